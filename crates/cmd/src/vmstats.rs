//! GetVMStats (KubeVirt main, `pkg/virt-launcher/virtwrap/cmd-server/vmstats.go`):
//! one answer with what the request asks for — the domain statistics, the
//! dirty rate, and each guest agent command whose (empty) request message
//! is present — every item with a `Response` of its own, the top-level one
//! failing with every item's failure joined by `"; "`.

use crate::handler::AGENT_DATA_COMMANDS;
use crate::proto::cmd::{Response, VmStatsRequest, VmStatsResponse};

/// KubeVirt's answer (a gRPC error) when the launcher runs without
/// `--vm-stats-collector`.
pub const NOT_ENABLED: &str = "VMStatsCollector feature gate is not enabled";

/// The guest agent commands `req` asks for, in KubeVirt's order.
pub fn requested_agent_commands(req: &VmStatsRequest) -> Vec<&'static str> {
    let asked = [
        req.guest_get_load.is_some(),
        req.guest_get_cpu_stats.is_some(),
        req.guest_get_disk_stats.is_some(),
        req.guest_get_time.is_some(),
        req.guest_get_vcpus.is_some(),
        req.guest_get_memory_block_info.is_some(),
        req.guest_get_users.is_some(),
        req.guest_get_os_info.is_some(),
        req.guest_get_disks.is_some(),
        req.guest_get_host_name.is_some(),
        req.guest_get_timezone.is_some(),
        req.guest_network_get_route.is_some(),
        req.guest_network_get_interfaces.is_some(),
        req.guest_get_memory_blocks.is_some(),
    ];
    AGENT_DATA_COMMANDS
        .iter()
        .zip(asked)
        .filter_map(|(c, a)| a.then_some(*c))
        .collect()
}

/// Puts `r` into the field of `resp` that answers agent command `command`
/// (one of [`AGENT_DATA_COMMANDS`]; any other is ignored).
pub fn set_agent_item(resp: &mut VmStatsResponse, command: &str, r: Response) {
    let slot = match command {
        "guest-get-load" => &mut resp.guest_get_load,
        "guest-get-cpustats" => &mut resp.guest_get_cpu_stats,
        "guest-get-diskstats" => &mut resp.guest_get_disk_stats,
        "guest-get-time" => &mut resp.guest_get_time,
        "guest-get-vcpus" => &mut resp.guest_get_vcpus,
        "guest-get-memory-block-info" => &mut resp.guest_get_memory_block_info,
        "guest-get-users" => &mut resp.guest_get_users,
        "guest-get-osinfo" => &mut resp.guest_get_os_info,
        "guest-get-disks" => &mut resp.guest_get_disks,
        "guest-get-host-name" => &mut resp.guest_get_host_name,
        "guest-get-timezone" => &mut resp.guest_get_timezone,
        "guest-network-get-route" => &mut resp.guest_network_get_route,
        "guest-network-get-interfaces" => &mut resp.guest_network_get_interfaces,
        "guest-get-memory-blocks" => &mut resp.guest_get_memory_blocks,
        _ => return,
    };
    *slot = Some(r);
}

/// Bytes of agent replies one answer carries: the whole answer must stay
/// under the gRPC message limit ([`crate::server::MAX_MESSAGE_BYTES`]),
/// with room for the rest. A reply past it fails its item (KubeVirt has no
/// bound of its own; its client would refuse the whole answer instead).
pub const AGENT_REPLIES_BUDGET: usize = crate::server::MAX_MESSAGE_BYTES - (64 << 10);

/// The agent items of an answer: `fetch` runs each requested command in
/// KubeVirt's order (its `Err` is the item's message); the failures are
/// returned as KubeVirt words them for the top-level message (`agent data
/// <command>: <message>`).
pub fn agent_items(
    resp: &mut VmStatsResponse,
    commands: &[&str],
    mut fetch: impl FnMut(&str) -> Result<String, String>,
) -> Vec<String> {
    let mut errs = Vec::new();
    let mut budget = AGENT_REPLIES_BUDGET;
    for c in commands {
        let r = match fetch(c) {
            Ok(data) if data.len() > budget => Err(format!(
                "the agent's reply to {c} is {} bytes, more than the {budget} bytes left in this answer",
                data.len()
            )),
            other => other,
        };
        let r = match r {
            Ok(data) => {
                budget -= data.len();
                Response {
                    success: true,
                    message: data,
                }
            }
            Err(m) => {
                errs.push(format!("agent data {c}: {m}"));
                Response {
                    success: false,
                    message: m,
                }
            }
        };
        set_agent_item(resp, c, r);
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::cmd::{AgentLoadRequest, AgentOsInfoRequest, AgentTimeRequest};

    #[test]
    fn requested_commands_follow_kubevirts_order() {
        let req = VmStatsRequest {
            guest_get_os_info: Some(AgentOsInfoRequest {}),
            guest_get_time: Some(AgentTimeRequest {}),
            guest_get_load: Some(AgentLoadRequest {}),
            ..Default::default()
        };
        assert_eq!(
            requested_agent_commands(&req),
            ["guest-get-load", "guest-get-time", "guest-get-osinfo"]
        );
        assert!(requested_agent_commands(&VmStatsRequest::default()).is_empty());
    }

    /// Every command lands in its own field, and each field answers one
    /// command (a table error would leave one `None` or overwrite another).
    #[test]
    fn each_command_has_its_own_field() {
        let mut resp = VmStatsResponse::default();
        let errs = agent_items(&mut resp, &AGENT_DATA_COMMANDS, |c| Ok(c.to_owned()));
        assert!(errs.is_empty());
        let got = [
            &resp.guest_get_load,
            &resp.guest_get_cpu_stats,
            &resp.guest_get_disk_stats,
            &resp.guest_get_time,
            &resp.guest_get_vcpus,
            &resp.guest_get_memory_block_info,
            &resp.guest_get_users,
            &resp.guest_get_os_info,
            &resp.guest_get_disks,
            &resp.guest_get_host_name,
            &resp.guest_get_timezone,
            &resp.guest_network_get_route,
            &resp.guest_network_get_interfaces,
            &resp.guest_get_memory_blocks,
        ];
        for (c, r) in AGENT_DATA_COMMANDS.iter().zip(got) {
            assert_eq!(r.as_ref().map(|r| r.message.as_str()), Some(*c));
        }
    }

    #[test]
    fn failures_are_per_item_and_joined_in_kubevirts_words() {
        let mut resp = VmStatsResponse::default();
        let errs = agent_items(&mut resp, &["guest-get-load", "guest-get-time"], |c| {
            if c == "guest-get-time" {
                Err("failed to get agent data for guest-get-time: virError(Code=86, Domain=10, Message='Guest agent is not responding: QEMU guest agent is not connected')".into())
            } else {
                Ok(r#"{"return":{"load1m":0.5}}"#.into())
            }
        });
        assert_eq!(resp.guest_get_load.as_ref().map(|r| r.success), Some(true));
        let t = resp.guest_get_time.unwrap();
        assert!(!t.success);
        assert_eq!(errs, [format!("agent data guest-get-time: {}", t.message)]);
        assert!(resp.guest_get_os_info.is_none(), "not asked, not answered");
    }

    #[test]
    fn replies_past_the_budget_fail_their_item_only() {
        let mut resp = VmStatsResponse::default();
        let big = "x".repeat(AGENT_REPLIES_BUDGET - 10);
        let errs = agent_items(
            &mut resp,
            &[
                "guest-get-disks",
                "guest-get-memory-blocks",
                "guest-get-time",
            ],
            |c| match c {
                "guest-get-disks" => Ok(big.clone()),
                "guest-get-memory-blocks" => Ok("y".repeat(11)),
                _ => Ok("{}".into()),
            },
        );
        assert!(resp.guest_get_disks.unwrap().success);
        let m = resp.guest_get_memory_blocks.unwrap();
        assert!(
            !m.success && m.message.contains("more than the 10 bytes left"),
            "{}",
            m.message
        );
        assert!(resp.guest_get_time.unwrap().success);
        assert_eq!(errs.len(), 1);
    }
}
