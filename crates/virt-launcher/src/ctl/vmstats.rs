//! `virt-launcher ctl vmstats`: KubeVirt main's GetVMStats, its answer as
//! JSON (`response`, `domainStats`, `dirtyRateStats`, `guestAgentVersion`
//! and one `{success, message}` per guest agent command asked for, under
//! the command's name; a successful agent item's `message` is the agent's
//! raw JSON reply).

use cmd::proto::cmd as pb;
use cmd::server::AGENT_DATA_COMMANDS;
use serde_json::{json, Map, Value};

use crate::error::LauncherError;

/// The request for `items` (all items when empty).
///
/// # Errors
/// An unknown item, naming the known ones.
pub fn request(items: &[String]) -> Result<pb::VmStatsRequest, LauncherError> {
    let mut req = pb::VmStatsRequest::default();
    let all: Vec<String> = ["domainStats", "dirtyRate"]
        .into_iter()
        .chain(AGENT_DATA_COMMANDS)
        .map(str::to_owned)
        .collect();
    for item in if items.is_empty() { &all } else { items } {
        match item.as_str() {
            "domainStats" => req.domain_stats = Some(pb::DomainStatsRequest {}),
            "dirtyRate" => req.dirty_rate = Some(pb::DirtyRateRequest {}),
            "guest-get-load" => req.guest_get_load = Some(pb::AgentLoadRequest {}),
            "guest-get-cpustats" => req.guest_get_cpu_stats = Some(pb::AgentCpuStatsRequest {}),
            "guest-get-diskstats" => req.guest_get_disk_stats = Some(pb::AgentDiskStatsRequest {}),
            "guest-get-time" => req.guest_get_time = Some(pb::AgentTimeRequest {}),
            "guest-get-vcpus" => req.guest_get_vcpus = Some(pb::AgentVcpusRequest {}),
            "guest-get-memory-block-info" => {
                req.guest_get_memory_block_info = Some(pb::AgentMemoryBlockInfoRequest {});
            }
            "guest-get-users" => req.guest_get_users = Some(pb::AgentUsersRequest {}),
            "guest-get-osinfo" => req.guest_get_os_info = Some(pb::AgentOsInfoRequest {}),
            "guest-get-disks" => req.guest_get_disks = Some(pb::AgentDisksRequest {}),
            "guest-get-host-name" => req.guest_get_host_name = Some(pb::AgentHostNameRequest {}),
            "guest-get-timezone" => req.guest_get_timezone = Some(pb::AgentTimezoneRequest {}),
            "guest-network-get-route" => {
                req.guest_network_get_route = Some(pb::AgentNetworkRouteRequest {});
            }
            "guest-network-get-interfaces" => {
                req.guest_network_get_interfaces = Some(pb::AgentNetworkInterfacesRequest {});
            }
            "guest-get-memory-blocks" => {
                req.guest_get_memory_blocks = Some(pb::AgentMemoryBlocksRequest {});
            }
            other => {
                return Err(LauncherError::input(format!(
                    "vmstats --item {other:?}: not an item; use one of {}",
                    all.join(", ")
                )))
            }
        }
    }
    Ok(req)
}

fn response(r: Option<&pb::Response>) -> Value {
    r.map_or(
        Value::Null,
        |r| json!({"success": r.success, "message": r.message}),
    )
}

/// The answer as JSON (see the module's documentation).
pub fn answer_json(a: &pb::VmStatsResponse) -> Value {
    let mut m = Map::new();
    m.insert("response".into(), response(a.response.as_ref()));
    if let Some(d) = &a.domain_stats {
        m.insert(
            "domainStats".into(),
            json!({
                "response": response(d.response.as_ref()),
                "domainStats": serde_json::from_str::<Value>(&d.domain_stats).unwrap_or(Value::Null),
            }),
        );
    }
    if let Some(d) = &a.dirty_rate_stats {
        m.insert(
            "dirtyRateStats".into(),
            json!({"response": response(d.response.as_ref()), "dirtyRateMbs": d.dirty_rate_mbs}),
        );
    }
    if a.guest_agent_version.is_some() {
        m.insert(
            "guestAgentVersion".into(),
            response(a.guest_agent_version.as_ref()),
        );
    }
    let items = [
        &a.guest_get_load,
        &a.guest_get_cpu_stats,
        &a.guest_get_disk_stats,
        &a.guest_get_time,
        &a.guest_get_vcpus,
        &a.guest_get_memory_block_info,
        &a.guest_get_users,
        &a.guest_get_os_info,
        &a.guest_get_disks,
        &a.guest_get_host_name,
        &a.guest_get_timezone,
        &a.guest_network_get_route,
        &a.guest_network_get_interfaces,
        &a.guest_get_memory_blocks,
    ];
    for (name, r) in AGENT_DATA_COMMANDS.iter().zip(items) {
        if let Some(r) = r {
            m.insert((*name).to_owned(), response(Some(r)));
        }
    }
    Value::Object(m)
}

/// Asks the launcher on `c` for `items`.
///
/// # Errors
/// A bad item, or the call failed (e.g. KubeVirt's `VMStatsCollector
/// feature gate is not enabled`).
pub async fn ask(
    c: &mut cmd::client::CmdChannel,
    items: &[String],
) -> Result<Value, LauncherError> {
    let req = request(items)?;
    let a = c
        .get_vm_stats(req)
        .await
        .map_err(|s| LauncherError::runtime(s.message().to_owned()))?
        .into_inner();
    Ok(answer_json(&a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_has_a_request_and_an_answer_field() {
        let all = request(&[]).unwrap();
        let mut a = pb::VmStatsResponse::default();
        let errs =
            cmd::vmstats::agent_items(&mut a, &cmd::vmstats::requested_agent_commands(&all), |c| {
                Ok(format!("{{\"{c}\":1}}"))
            });
        assert!(errs.is_empty());
        let j = answer_json(&a);
        for c in AGENT_DATA_COMMANDS {
            assert_eq!(j[c]["message"], format!("{{\"{c}\":1}}"), "{j}");
        }
        assert!(all.domain_stats.is_some() && all.dirty_rate.is_some());
        let one = request(&["guest-get-time".into()]).unwrap();
        assert_eq!(
            cmd::vmstats::requested_agent_commands(&one),
            ["guest-get-time"]
        );
        assert!(one.domain_stats.is_none());
        let e = request(&["guest-get-nothing".into()]).unwrap_err();
        assert!(e.to_string().contains("guest-get-nothing"), "{e}");
    }
}
