//! GetVMStats, GetScreenshot and the SEV options through the real server
//! against a fake handler: the feature gate, the composition of the answer
//! (KubeVirt main's `vmstats.go`), the size bound of a screenshot.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use api::VirtualMachineInstance;
use cmd::proto::cmd as pb;
use cmd::server::{self, CommandError, Handler, Screenshot, SyncOptions};

struct Fake {
    enabled: bool,
    screenshot_bytes: usize,
}

impl Handler for Fake {
    fn vmi_uid(&self) -> String {
        "uid-1".into()
    }
    fn sync(&self, _: &VirtualMachineInstance, _: &SyncOptions) -> Result<(), CommandError> {
        Ok(())
    }
    fn pause(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn unpause(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn reset(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn soft_reboot(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn shutdown(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn kill(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn delete(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn domain_json(&self) -> Result<Option<String>, CommandError> {
        Ok(None)
    }
    fn domain_stats_json(&self) -> Result<Option<String>, CommandError> {
        Ok(Some(r#"{"Name":"n_v"}"#.into()))
    }
    fn qemu_version(&self) -> Result<String, CommandError> {
        Ok("QEMU 10.0.2".into())
    }
    fn dirty_rate_mbs(&self) -> Result<i64, CommandError> {
        Err(CommandError::Failed(
            "Dirty rate MegabytesPerSecondSet is false".into(),
        ))
    }
    fn screenshot(&self, _: &VirtualMachineInstance) -> Result<Screenshot, CommandError> {
        Ok(Screenshot {
            mime: "image/png".into(),
            data: vec![7; self.screenshot_bytes],
        })
    }
    fn vm_stats_collector(&self) -> bool {
        self.enabled
    }
    fn guest_agent_version(&self) -> String {
        "10.0.2".into()
    }
    fn agent_data(&self, command: &str) -> Result<String, CommandError> {
        if command == "guest-get-users" {
            return Err(CommandError::Failed(
                "failed to get agent data for guest-get-users: virError(Code=86, Domain=10, Message='x')"
                    .into(),
            ));
        }
        Ok(format!(r#"{{"return":"{command}"}}"#))
    }
}

fn vmi() -> Option<pb::Vmi> {
    Some(pb::Vmi {
        vmi_json: br#"{"metadata":{"name":"v","namespace":"n","uid":"uid-1"}}"#.to_vec(),
    })
}

async fn client(fake: Fake) -> (cmd::client::CmdChannel, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    server::serve(
        dir.path(),
        Arc::new(fake),
        cmd::spin::Spinner::new(),
        std::future::pending(),
    )
    .await
    .unwrap();
    let c = cmd::client::Client::connect(&server::init_socket(dir.path()))
        .await
        .unwrap()
        .cmd;
    (c, dir)
}

#[tokio::test]
async fn vm_stats_need_the_collector_flag() {
    let (mut c, _d) = client(Fake {
        enabled: false,
        screenshot_bytes: 1,
    })
    .await;
    let e = c
        .get_vm_stats(pb::VmStatsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.message(), "VMStatsCollector feature gate is not enabled");
}

#[tokio::test]
async fn vm_stats_answer_each_item_and_join_the_failures() {
    let (mut c, _d) = client(Fake {
        enabled: true,
        screenshot_bytes: 1,
    })
    .await;
    let a = c
        .get_vm_stats(pb::VmStatsRequest {
            domain_stats: Some(pb::DomainStatsRequest {}),
            dirty_rate: Some(pb::DirtyRateRequest {}),
            guest_get_load: Some(pb::AgentLoadRequest {}),
            guest_get_users: Some(pb::AgentUsersRequest {}),
            guest_get_memory_blocks: Some(pb::AgentMemoryBlocksRequest {}),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let d = a.domain_stats.unwrap();
    assert_eq!(d.domain_stats, r#"{"Name":"n_v"}"#);
    assert!(d.response.unwrap().success);
    let r = a.dirty_rate_stats.unwrap();
    assert!(!r.response.unwrap().success);
    assert_eq!(a.guest_agent_version.unwrap().message, "10.0.2");
    assert_eq!(
        a.guest_get_load.unwrap().message,
        r#"{"return":"guest-get-load"}"#
    );
    assert_eq!(
        a.guest_get_memory_blocks.unwrap().message,
        r#"{"return":"guest-get-memory-blocks"}"#
    );
    assert!(!a.guest_get_users.unwrap().success);
    assert!(a.guest_get_time.is_none(), "not asked");
    let top = a.response.unwrap();
    assert!(!top.success);
    assert_eq!(
        top.message,
        "dirty rate stats: Dirty rate MegabytesPerSecondSet is false; agent data guest-get-users: failed to get agent data for guest-get-users: virError(Code=86, Domain=10, Message='x')"
    );
    // Nothing agent-related asked: no agent version either.
    let a = c
        .get_vm_stats(pb::VmStatsRequest {
            domain_stats: Some(pb::DomainStatsRequest {}),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(a.guest_agent_version.is_none());
    assert!(a.response.unwrap().success);
}

#[tokio::test]
async fn a_screenshot_over_the_message_limit_is_refused_by_size() {
    let (mut c, _d) = client(Fake {
        enabled: true,
        screenshot_bytes: server::MAX_SCREENSHOT_BYTES + 1,
    })
    .await;
    let a = c
        .get_screenshot(pb::VmiRequest {
            vmi: vmi(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    let r = a.response.unwrap();
    assert!(
        !r.success && r.message.contains("more than the"),
        "{}",
        r.message
    );
    assert!(a.data.is_empty());
    let (mut c, _d) = client(Fake {
        enabled: true,
        screenshot_bytes: server::MAX_SCREENSHOT_BYTES,
    })
    .await;
    let a = c
        .get_screenshot(pb::VmiRequest {
            vmi: vmi(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(a.response.unwrap().success);
    assert_eq!(a.mime, "image/png");
    assert_eq!(a.data.len(), server::MAX_SCREENSHOT_BYTES);
}

#[tokio::test]
async fn launch_secret_options_are_checked_before_the_handler() {
    let (mut c, _d) = client(Fake {
        enabled: true,
        screenshot_bytes: 1,
    })
    .await;
    let ask = |options: &str| pb::InjectLaunchSecretRequest {
        vmi: vmi(),
        options: options.as_bytes().to_vec(),
    };
    let r = c.inject_launch_secret(ask("{")).await.unwrap().into_inner();
    assert_eq!(
        r.message,
        "No valid secret options present in command server request"
    );
    // Valid options reach the handler, whose default says not supported.
    let r = c
        .inject_launch_secret(ask(r#"{"header":"h","secret":"s"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.message, "not supported yet: SEV launch secret");
}
