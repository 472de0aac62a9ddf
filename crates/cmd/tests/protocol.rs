//! The protocol against a fake handler (the real one is exercised end to
//! end in virt-launcher's e2e tests): framing, version negotiation, the
//! answers virt-handler relies on, and hostile clients.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::VirtualMachineInstance;
use cmd::notify::{EventType, Notifier};
use cmd::proto::cmd::{EmptyRequest, MigrationRequest, VirtualMachineOptions, Vmi, VmiRequest};
use cmd::proto::notify::notify_server::{Notify, NotifyServer};
use cmd::proto::notify::{DomainEventRequest, K8sEventRequest, Response as NotifyResponse};
use cmd::proto::notify_info::notify_info_server::{NotifyInfo, NotifyInfoServer};
use cmd::proto::notify_info::{NotifyInfoRequest, NotifyInfoResponse};
use cmd::server::{self, CommandError, Handler, SyncOptions};
use tokio::io::AsyncWriteExt;

#[derive(Default)]
struct Fake {
    synced: Mutex<Vec<(String, SyncOptions)>>,
    calls: AtomicUsize,
    dumps: Mutex<Vec<String>>,
    /// GetDomainDirtyRateStats answers: each call blocks until the test
    /// sends one (no sender: KubeVirt's not-set message at once).
    dirty: Mutex<Option<std::sync::mpsc::Receiver<Result<i64, String>>>>,
    /// Dirty-rate calls that reached the handler.
    dirty_calls: AtomicUsize,
    /// Migration commands that reached the handler, as text.
    migration: Mutex<Vec<String>>,
}

impl Handler for Fake {
    fn vmi_uid(&self) -> String {
        "uid-1".into()
    }
    fn sync(&self, vmi: &VirtualMachineInstance, opts: &SyncOptions) -> Result<(), CommandError> {
        self.synced
            .lock()
            .unwrap()
            .push((vmi.metadata.name.clone(), opts.clone()));
        Ok(())
    }
    fn pause(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Err(CommandError::Libvirt {
            code: 42,
            domain: 10,
            message: "Domain not found.".into(),
        })
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
        std::thread::sleep(Duration::from_millis(300));
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn delete(&self, _: &VirtualMachineInstance) -> Result<(), CommandError> {
        Ok(())
    }
    fn domain_json(&self) -> Result<Option<String>, CommandError> {
        Ok(Some(r#"{"kind":"Domain"}"#.into()))
    }
    fn domain_stats_json(&self) -> Result<Option<String>, CommandError> {
        Ok(None)
    }
    fn qemu_version(&self) -> Result<String, CommandError> {
        Ok("QEMU 10.0.2".into())
    }
    fn memory_dump(
        &self,
        vmi: &VirtualMachineInstance,
        dump_path: &str,
    ) -> Result<(), CommandError> {
        if dump_path.is_empty() {
            return Err(CommandError::Failed("dumpPath: is empty".into()));
        }
        self.dumps
            .lock()
            .unwrap()
            .push(format!("{} {dump_path}", vmi.uid()));
        Ok(())
    }
    fn migrate(&self, vmi: &VirtualMachineInstance, options: &[u8]) -> Result<(), CommandError> {
        self.migration.lock().unwrap().push(format!(
            "migrate {} {}",
            vmi.uid(),
            String::from_utf8_lossy(options)
        ));
        Ok(())
    }
    fn sync_migration_target(
        &self,
        vmi: &VirtualMachineInstance,
        opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        self.migration.lock().unwrap().push(format!(
            "target {} {:?}",
            vmi.uid(),
            opts.interface_migration
        ));
        Ok(())
    }
    fn finalize_migration(
        &self,
        vmi: &VirtualMachineInstance,
        opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        self.migration.lock().unwrap().push(format!(
            "finalize {} {:?}",
            vmi.uid(),
            opts.interface_migration
        ));
        Err(CommandError::Failed("failed to update network red".into()))
    }
    fn signal_target_pod_cleanup(&self, vmi: &VirtualMachineInstance) {
        self.migration
            .lock()
            .unwrap()
            .push(format!("cleanup {}", vmi.uid()));
    }
    fn dirty_rate_mbs(&self) -> Result<i64, CommandError> {
        self.dirty_calls.fetch_add(1, Ordering::SeqCst);
        match &*self.dirty.lock().unwrap() {
            // Bounded: a server that ran this on its runtime thread would
            // otherwise hang the test instead of failing it.
            Some(rx) => rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|e| Err(format!("no answer from the test: {e}")))
                .map_err(CommandError::Failed),
            None => Err(CommandError::Failed(
                "Dirty rate MegabytesPerSecondSet is false".into(),
            )),
        }
    }
}

/// A VMI as virt-handler sends it: the informer's object, marshalled by
/// Go, without TypeMeta (kubevirt-facts §11.1).
fn vmi(uid: &str) -> Option<Vmi> {
    Some(Vmi {
        vmi_json: format!(
            r#"{{"metadata":{{"name":"v","namespace":"n","uid":"{uid}","resourceVersion":"7","generation":2,"creationTimestamp":"2026-01-01T00:00:00Z","finalizers":["kubevirt.io/virtualMachineControllerFinalize"]}},"spec":{{"domain":{{"memory":{{"guest":"64Mi"}}}}}},"status":{{"phase":"Scheduled","runtimeUser":107}}}}"#
        )
        .into_bytes(),
    })
}

/// `vmi(uid)` with TypeMeta `apiVersion`/`kind`, as an object from the
/// informer's initial list carries it.
fn vmi_typed(uid: &str, api_version: &str, kind: &str) -> Option<Vmi> {
    Some(Vmi {
        vmi_json: format!(
            r#"{{"apiVersion":"{api_version}","kind":"{kind}","metadata":{{"name":"v","namespace":"n","uid":"{uid}"}},"spec":{{"domain":{{"memory":{{"guest":"64Mi"}}}}}}}}"#
        )
        .into_bytes(),
    })
}

async fn start(dir: &std::path::Path) -> (Arc<Fake>, tokio::sync::oneshot::Sender<()>) {
    let fake = Arc::new(Fake::default());
    let (tx, rx) = tokio::sync::oneshot::channel();
    server::serve(
        dir,
        Arc::clone(&fake),
        cmd::spin::Spinner::new(),
        async move {
            let _ = rx.await;
        },
    )
    .await
    .unwrap();
    (fake, tx)
}

#[tokio::test]
async fn answers_like_kubevirts_server() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, _stop) = start(dir.path()).await;
    let sock = server::init_socket(dir.path());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o755);
    let mut c = cmd::client::Client::connect(&sock).await.unwrap().cmd;

    assert!(c.ping(EmptyRequest {}).await.unwrap().into_inner().success);
    let d = c.get_domain(EmptyRequest {}).await.unwrap().into_inner();
    assert_eq!(d.domain, r#"{"kind":"Domain"}"#);
    let s = c
        .get_domain_stats(EmptyRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.domain_stats, "null");
    assert_eq!(
        c.get_qemu_version(EmptyRequest {})
            .await
            .unwrap()
            .into_inner()
            .version,
        "QEMU 10.0.2"
    );

    #[allow(deprecated)]
    let opts = VirtualMachineOptions {
        mem_balloon_stats_period: 5,
        preallocated_volumes: vec!["thick".into()],
        // The deprecated top-level flag counts only without a ClusterConfig.
        expand_disks_enabled: true,
        ..Default::default()
    };
    let r = c
        .sync_virtual_machine(VmiRequest {
            vmi: vmi("uid-1"),
            options: Some(opts.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.success, "{}", r.message);
    {
        let synced = fake.synced.lock().unwrap();
        assert_eq!(synced[0].1.mem_balloon_stats_period, 5);
        assert_eq!(synced[0].1.preallocated_volumes, ["thick"]);
        assert!(synced[0].1.expand_disks_enabled);
    }
    for (cluster, want) in [(false, false), (true, true)] {
        let mut o = opts.clone();
        o.cluster_config = Some(cmd::proto::cmd::ClusterConfig {
            expand_disks_enabled: cluster,
            ..Default::default()
        });
        let r = c
            .sync_virtual_machine(VmiRequest {
                vmi: vmi("uid-1"),
                options: Some(o),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.success, "{}", r.message);
        let synced = fake.synced.lock().unwrap();
        assert_eq!(synced.last().unwrap().1.expand_disks_enabled, want);
    }

    // Handler errors travel in the Response, gRPC status OK.
    let r = c
        .pause_virtual_machine(VmiRequest {
            vmi: vmi("uid-1"),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.success, r.message.as_str()),
        (
            false,
            "LibvirtError(Code=42, Domain=10, Message='Domain not found.')"
        )
    );

    // Another VMI's UID, a VMI that does not decode, no VMI at all.
    let r = c
        .kill_virtual_machine(VmiRequest {
            vmi: vmi("uid-2"),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !r.success && r.message.contains("is not the VMI this launcher runs"),
        "{}",
        r.message
    );
    // A VMI with only a name and namespace, as KubeVirt's virt-freezer
    // sends it (Go's json.Marshal of such a VMI): no UID to compare.
    let r = c
        .delete_virtual_machine(VmiRequest {
            vmi: Some(Vmi {
                vmi_json: br#"{"metadata":{"name":"v","namespace":"n","creationTimestamp":null},"spec":{"domain":{"resources":{},"devices":{}}},"status":{}}"#.to_vec(),
            }),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.success, "{}", r.message);
    let r = c
        .kill_virtual_machine(VmiRequest {
            vmi: Some(Vmi {
                vmi_json: b"\x00garbage".to_vec(),
            }),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !r.success && r.message.starts_with(server::NO_VALID_VMI),
        "{}",
        r.message
    );
    let r = c
        .kill_virtual_machine(VmiRequest {
            vmi: None,
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.message, server::NO_VALID_VMI);
    // TypeMeta, when present, must be a VMI's.
    let r = c
        .kill_virtual_machine(VmiRequest {
            vmi: vmi_typed("uid-1", "kubevirt.io/v1", "VirtualMachine"),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.message,
        format!(
            r#"{}: kind: "VirtualMachine" is not VirtualMachineInstance"#,
            server::NO_VALID_VMI
        )
    );
    let r = c
        .kill_virtual_machine(VmiRequest {
            vmi: vmi_typed("uid-1", "v1", "VirtualMachineInstance"),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.message,
        format!(
            r#"{}: apiVersion: "v1" is not kubevirt.io/v1"#,
            server::NO_VALID_VMI
        )
    );
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        0,
        "refused requests never reach the handler"
    );
    // With the right TypeMeta (an object of the informer's initial list),
    // as without it.
    let r = c
        .kill_virtual_machine(VmiRequest {
            vmi: vmi_typed("uid-1", "kubevirt.io/v1", "VirtualMachineInstance"),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.success, "{}", r.message);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);

    // Features not built yet say so; cancel says what virt-handler matches.
    let r = c
        .freeze_virtual_machine(cmd::proto::cmd::FreezeRequest {
            vmi: vmi("uid-1"),
            unfreeze_timeout_seconds: 5,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !r.success && r.message.starts_with("not supported yet: "),
        "{}",
        r.message
    );
    // Exec and GuestPing fail as KubeVirt's do: a gRPC error (Unknown)
    // carrying the message, which virt-probe reports with exit code -1.
    for (timeout, want) in [
        (5, "not supported yet: guest exec (guest agent)"),
        (0, "timeoutSeconds: must be at least 1"),
        (-1, "timeoutSeconds: -1 is negative"),
    ] {
        let e = c
            .exec(cmd::proto::cmd::ExecRequest {
                domain_name: "n_v".into(),
                command: "/bin/true".into(),
                args: Vec::new(),
                timeout_seconds: timeout,
            })
            .await
            .unwrap_err();
        assert_eq!((e.code(), e.message()), (tonic::Code::Unknown, want));
    }
    let e = c
        .guest_ping(cmd::proto::cmd::GuestPingRequest {
            domain_name: "n_v".into(),
            timeout_seconds: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unknown);
    let r = c
        .get_guest_info(cmd::proto::cmd::EmptyRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!r.response.unwrap().success && r.guest_info_response.is_empty());
    let r = c
        .migrate_virtual_machine(MigrationRequest {
            vmi: vmi("uid-1"),
            options: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.message,
        "migration options object not present in command server request"
    );
    let r = c
        .cancel_virtual_machine_migration(VmiRequest {
            vmi: vmi("uid-1"),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.message,
        "failed to cancel migration - vmi is not migrating"
    );

    // MemoryDump: the VMI is checked like every command's, then the
    // handler starts the dump; its errors come back in the Response.
    for (uid, path, want) in [
        (
            "uid-2",
            "/d/x.memory.dump",
            Err("is not the VMI this launcher runs"),
        ),
        ("uid-1", "", Err("dumpPath: is empty")),
        ("uid-1", "/d/x.memory.dump", Ok(())),
    ] {
        let r = c
            .virtual_machine_memory_dump(cmd::proto::cmd::MemoryDumpRequest {
                vmi: vmi(uid),
                dump_path: path.into(),
            })
            .await
            .unwrap()
            .into_inner();
        match want {
            Ok(()) => assert!(r.success, "{}", r.message),
            Err(m) => assert!(!r.success && r.message.contains(m), "{}", r.message),
        }
    }
    let r = c
        .virtual_machine_memory_dump(cmd::proto::cmd::MemoryDumpRequest {
            vmi: None,
            dump_path: "/d/y.memory.dump".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.message, server::NO_VALID_VMI);
    assert_eq!(
        *fake.dumps.lock().unwrap(),
        vec!["uid-1 /d/x.memory.dump".to_owned()]
    );

    server::mark_ready(dir.path()).unwrap();
    assert!(server::ready_socket(dir.path()).exists() && !sock.exists());
    // The renamed socket still serves.
    let mut c2 = cmd::client::Client::connect(&server::ready_socket(dir.path()))
        .await
        .unwrap()
        .cmd;
    assert!(c2.ping(EmptyRequest {}).await.unwrap().into_inner().success);
}

/// GetDomainDirtyRateStats: the rate or the failure in the Response, and
/// the calculation never holds up the runtime: a Ping on the same
/// connection is answered while a dirty-rate call is still blocked in the
/// handler (the test runs the server on one thread, as the launcher does;
/// a handler run on that thread would hold the ping back until the fake
/// gives up after 10 s, and the checks below would fail).
/// The migration commands reach the handler with their VMI, options bytes
/// and `interfaceMigration` (field 9); the VMI is checked first, the
/// missing options answered by the server in KubeVirt's words.
#[tokio::test]
async fn migration_commands_reach_the_handler() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, _stop) = start(dir.path()).await;
    let mut c = cmd::client::Client::connect(&server::init_socket(dir.path()))
        .await
        .unwrap()
        .cmd;
    let r = c
        .migrate_virtual_machine(MigrationRequest {
            vmi: vmi("uid-1"),
            options: br#"{"ProgressTimeout":150}"#.to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.success, "{}", r.message);
    let r = c
        .migrate_virtual_machine(MigrationRequest {
            vmi: vmi("uid-2"),
            options: b"{}".to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!r.success && r.message.contains("is not the VMI this launcher runs"));
    let r = c
        .migrate_virtual_machine(MigrationRequest {
            vmi: None,
            options: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.message, server::NO_VALID_VMI);
    let options = || {
        Some(VirtualMachineOptions {
            interface_migration: [(
                "red".to_owned(),
                cmd::proto::cmd::InterfaceBindingMigration {
                    method: "link-refresh".into(),
                },
            )]
            .into(),
            ..VirtualMachineOptions::default()
        })
    };
    let r = c
        .sync_migration_target(VmiRequest {
            vmi: vmi("uid-1"),
            options: options(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.success, "{}", r.message);
    let r = c
        .finalize_virtual_machine_migration(VmiRequest {
            vmi: vmi("uid-1"),
            options: options(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.success, r.message.as_str()),
        (false, "failed to update network red")
    );
    let r = c
        .signal_target_pod_cleanup(VmiRequest {
            vmi: vmi("uid-1"),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.success);
    assert_eq!(
        *fake.migration.lock().unwrap(),
        [
            r#"migrate uid-1 {"ProgressTimeout":150}"#,
            r#"target uid-1 {"red": "link-refresh"}"#,
            r#"finalize uid-1 {"red": "link-refresh"}"#,
            "cleanup uid-1",
        ]
    );
}

#[tokio::test]
async fn dirty_rate_is_answered_off_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, _stop) = start(dir.path()).await;
    let sock = server::init_socket(dir.path());
    let mut c = cmd::client::Client::connect(&sock).await.unwrap().cmd;

    let r = c
        .get_domain_dirty_rate_stats(EmptyRequest {})
        .await
        .unwrap()
        .into_inner();
    let resp = r.response.unwrap();
    assert_eq!(
        (resp.success, resp.message.as_str(), r.dirty_rate_mbs),
        (false, "Dirty rate MegabytesPerSecondSet is false", 0)
    );

    let (tx, rx) = std::sync::mpsc::channel();
    *fake.dirty.lock().unwrap() = Some(rx);
    let mut slow = c.clone();
    let pending = tokio::spawn(async move {
        slow.get_domain_dirty_rate_stats(EmptyRequest {})
            .await
            .unwrap()
            .into_inner()
    });
    // Until the handler is inside the call, the ping proves nothing.
    for _ in 0..2000 {
        if fake.dirty_calls.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(fake.dirty_calls.load(Ordering::SeqCst), 2);
    let ping = tokio::time::timeout(Duration::from_secs(10), c.ping(EmptyRequest {}))
        .await
        .expect("ping answered while the dirty-rate call blocks")
        .unwrap();
    assert!(ping.into_inner().success);
    assert!(!pending.is_finished());
    tx.send(Ok(37)).unwrap();
    let r = pending.await.unwrap();
    assert!(r.response.unwrap().success);
    assert_eq!(r.dirty_rate_mbs, 37);

    let slow = tokio::spawn({
        let mut c = c.clone();
        async move { c.get_domain_dirty_rate_stats(EmptyRequest {}).await }
    });
    tx.send(Err("failed to get domain dirty rate stats: boom".into()))
        .unwrap();
    let r = slow.await.unwrap().unwrap().into_inner();
    let resp = r.response.unwrap();
    assert_eq!(
        (resp.success, resp.message.as_str(), r.dirty_rate_mbs),
        (false, "failed to get domain dirty rate stats: boom", 0)
    );
}

#[tokio::test]
async fn survives_garbage_huge_messages_and_vanishing_clients() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, _stop) = start(dir.path()).await;
    let sock = server::init_socket(dir.path());
    // Raw garbage instead of HTTP/2.
    for junk in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        &[0u8; 4096][..],
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff",
    ] {
        let mut s = tokio::net::UnixStream::connect(&sock).await.unwrap();
        let _ = s.write_all(junk).await;
        drop(s);
    }
    // A request over the size limit.
    let mut c = cmd::client::Client::connect(&sock).await.unwrap().cmd;
    let big = VmiRequest {
        vmi: Some(Vmi {
            vmi_json: vec![b' '; 5 << 20],
        }),
        options: None,
    };
    let err = c.sync_virtual_machine(big).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::OutOfRange, "{err}");
    assert!(err.message().contains("limit is: 4194304"), "{err}");
    // A client that goes away in the middle of a slow call.
    let mut c3 = cmd::client::Client::connect(&sock).await.unwrap().cmd;
    let call = tokio::spawn(async move {
        c3.kill_virtual_machine(VmiRequest {
            vmi: vmi("uid-1"),
            options: None,
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    call.abort();
    // Still serving.
    let mut c4 = cmd::client::Client::connect(&sock).await.unwrap().cmd;
    assert!(c4.ping(EmptyRequest {}).await.unwrap().into_inner().success);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        1,
        "the aborted call still completed on the server"
    );
}

/// A fake virt-handler notify server that records what it receives.
#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<(String, String)>>>,
    reject: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl Notify for Recorder {
    async fn handle_domain_event(
        &self,
        r: tonic::Request<DomainEventRequest>,
    ) -> Result<tonic::Response<NotifyResponse>, tonic::Status> {
        let r = r.into_inner();
        if self.reject.load(Ordering::SeqCst) > 0 {
            self.reject.fetch_sub(1, Ordering::SeqCst);
            return Ok(tonic::Response::new(NotifyResponse {
                success: false,
                message: "VMI not found".into(),
            }));
        }
        self.events
            .lock()
            .unwrap()
            .push((r.event_type, String::from_utf8(r.domain_json).unwrap()));
        Ok(tonic::Response::new(NotifyResponse {
            success: true,
            message: String::new(),
        }))
    }
    async fn handle_k8s_event(
        &self,
        r: tonic::Request<K8sEventRequest>,
    ) -> Result<tonic::Response<NotifyResponse>, tonic::Status> {
        self.events.lock().unwrap().push((
            "K8S".into(),
            String::from_utf8(r.into_inner().event_json).unwrap(),
        ));
        Ok(tonic::Response::new(NotifyResponse {
            success: true,
            message: String::new(),
        }))
    }
}

#[tonic::async_trait]
impl NotifyInfo for Recorder {
    async fn info(
        &self,
        _r: tonic::Request<NotifyInfoRequest>,
    ) -> Result<tonic::Response<NotifyInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(NotifyInfoResponse {
            supported_notify_versions: vec![1],
        }))
    }
}

async fn notify_server(path: &std::path::Path, rec: Recorder) -> tokio::sync::oneshot::Sender<()> {
    // tonic's default receive limit, grpc-go's (4 MiB).
    notify_server_receiving(path, rec, 4 << 20).await
}

/// [`notify_server`] receiving messages of at most `limit` bytes.
async fn notify_server_receiving(
    path: &std::path::Path,
    rec: Recorder,
    limit: usize,
) -> tokio::sync::oneshot::Sender<()> {
    let _ = std::fs::remove_file(path);
    let l = tokio::net::UnixListener::bind(path).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(NotifyServer::new(rec.clone()).max_decoding_message_size(limit))
            .add_service(NotifyInfoServer::new(rec))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(l),
                async move {
                    let _ = rx.await;
                },
            )
            .await
            .unwrap();
    });
    tx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_keeps_order_across_late_start_restart_and_rejection() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("domain-notify-pipe.sock");
    let n = Notifier::start(dir.path());
    // virt-handler not there yet: events queue up.
    n.domain(EventType::Added, "1".into());
    n.domain(EventType::Modified, "2".into());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(n.pending(), 2);
    let rec = Recorder::default();
    let stop = notify_server(&sock, rec.clone()).await;
    assert!(n.flush(Duration::from_secs(10)).await);
    // It restarts: events sent meanwhile arrive after it is back.
    let _ = stop.send(());
    tokio::time::sleep(Duration::from_millis(200)).await;
    n.domain(EventType::Modified, "3".into());
    n.send(cmd::notify::Event::K8s {
        json: cmd::notify::k8s_event("v", "n", "u", "Warning", "SyncFailed", "boom"),
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _stop2 = notify_server(&sock, rec.clone()).await;
    // It rejects twice, then accepts: the event is retried, not lost.
    rec.reject.store(2, Ordering::SeqCst);
    n.domain(EventType::Modified, "4".into());
    assert!(n.flush(Duration::from_secs(20)).await);
    let got: Vec<_> = rec
        .events
        .lock()
        .unwrap()
        .iter()
        .map(|(t, d)| format!("{t}:{}", if t == "K8S" { "event" } else { d.as_str() }))
        .collect();
    assert_eq!(
        got,
        [
            "ADDED:1",
            "MODIFIED:2",
            "MODIFIED:3",
            "K8S:event",
            "MODIFIED:4"
        ]
    );
    let k8s = &rec.events.lock().unwrap()[3].1;
    let v: serde_json::Value = serde_json::from_str(k8s).unwrap();
    assert_eq!(v["involvedObject"]["kind"], "VirtualMachineInstance");
    assert_eq!(v["reason"], "SyncFailed");
}

#[tokio::test]
async fn notify_queue_is_bounded_and_keeps_the_last_event() {
    let dir = tempfile::tempdir().unwrap();
    let n = Notifier::start(dir.path());
    // Kubernetes events (a later one supersedes none of them).
    for i in 0..(cmd::notify::MAX_QUEUE + 10) {
        n.send(cmd::notify::Event::K8s {
            json: i.to_string(),
        });
    }
    n.send(cmd::notify::Event::Domain {
        event_type: EventType::Modified,
        domain_json: "final".into(),
        status_json: String::new(),
        last: true,
    });
    assert_eq!(n.pending(), cmd::notify::MAX_QUEUE);
    assert_eq!(n.counts().1, 11);
}

/// While virt-handler is away, a MODIFIED update supersedes the queued
/// ones (each carries the whole domain); ADDED, Kubernetes events and the
/// final event are kept in order, and nothing superseded counts as
/// dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_domain_update_supersedes_the_queued_ones() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("domain-notify-pipe.sock");
    let n = Notifier::start(dir.path());
    n.domain(EventType::Added, "1".into());
    for i in 2..=500 {
        n.domain(EventType::Modified, i.to_string());
        if i == 300 {
            n.send(cmd::notify::Event::K8s {
                json: cmd::notify::k8s_event("v", "n", "u", "Warning", "IOerror", "disk"),
            });
        }
    }
    n.domain(EventType::Added, "501".into());
    n.domain(EventType::Modified, "502".into());
    n.send(cmd::notify::Event::Domain {
        event_type: EventType::Modified,
        domain_json: "final".into(),
        status_json: String::new(),
        last: true,
    });
    assert_eq!(n.pending(), 5, "ADDED, k8s, ADDED, MODIFIED, final");
    let rec = Recorder::default();
    let _stop = notify_server(&sock, rec.clone()).await;
    assert!(n.flush(Duration::from_secs(20)).await);
    let got: Vec<_> = rec
        .events
        .lock()
        .unwrap()
        .iter()
        .map(|(t, d)| format!("{t}:{}", if t == "K8S" { "event" } else { d.as_str() }))
        .collect();
    assert_eq!(
        got,
        [
            "ADDED:1",
            "K8S:event",
            "ADDED:501",
            "MODIFIED:502",
            "MODIFIED:final"
        ]
    );
    assert_eq!(n.counts(), (5, 0));
}

/// A missing or dead command socket is reported with its cause (what an
/// operator can act on), not tonic's bare "transport error".
#[tokio::test]
async fn connect_errors_name_the_socket_and_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("launcher-sock");
    let e = cmd::client::Client::connect(&missing)
        .await
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        format!(
            "cannot connect to {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
    // A socket file nobody listens on any more.
    let dead = dir.path().join("dead-sock");
    drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
    let e = cmd::client::Client::connect(&dead)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.ends_with("Connection refused (os error 111)"), "{e}");
}

/// Issue 19: an event above grpc-go's 4 MiB receive limit (a guest-inflated
/// domain JSON) was retried forever at the head of the queue, blocking every
/// later event. It is dropped (and counted) at once; the events around it
/// arrive in order. The stand-in server is tonic's, whose receive limit is
/// grpc-go's (4 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue19_an_undeliverable_event_is_dropped_never_blocks_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("domain-notify-pipe.sock");
    let rec = Recorder::default();
    let _stop = notify_server(&sock, rec.clone()).await;
    let n = Notifier::start(dir.path());
    n.domain(EventType::Added, "1".into());
    // Over the limit before it is sent.
    n.domain(
        EventType::Modified,
        "x".repeat(cmd::notify::MAX_NOTIFY_MESSAGE + 1),
    );
    // Behind it, an event a domain update does not supersede.
    n.domain(EventType::Added, "2".into());
    assert!(
        n.flush(Duration::from_secs(30)).await,
        "the queue is stuck behind an undeliverable event"
    );
    // A server with a smaller limit refuses an event (a status a retry
    // cannot change): dropped too, the next one arrives.
    let dir2 = tempfile::tempdir().unwrap();
    let sock2 = dir2.path().join("domain-notify-pipe.sock");
    let _stop2 = notify_server_receiving(&sock2, rec.clone(), 1 << 20).await;
    let n2 = Notifier::start(dir2.path());
    n2.domain(EventType::Modified, "y".repeat(2 << 20));
    n2.domain(EventType::Modified, "3".into());
    assert!(
        n2.flush(Duration::from_secs(30)).await,
        "the queue is stuck behind an event the server refuses"
    );
    assert_eq!(n2.counts(), (1, 1));
    let got: Vec<_> = rec
        .events
        .lock()
        .unwrap()
        .iter()
        .map(|(t, d)| format!("{t}:{}", &d[..d.len().min(8)]))
        .collect();
    assert_eq!(got, ["ADDED:1", "ADDED:2", "MODIFIED:3"]);
    assert_eq!(n.counts(), (2, 1));
}

/// Issue 19 (faults): a notify socket that accepts connections but never
/// reads. The queue keeps the event (nothing is lost, nothing blocks the
/// caller: `send` returns at once and `flush` gives up at its deadline);
/// once a real virt-handler listens, the event is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_socket_that_never_reads_holds_up_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("domain-notify-pipe.sock");
    let silent = tokio::net::UnixListener::bind(&sock).unwrap();
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            tokio::select! {
                c = silent.accept() => held.push(c.unwrap().0),
                _ = &mut stop_rx => return held.len(),
            }
        }
    });
    let n = Notifier::start(dir.path());
    n.domain(EventType::Added, "1".into());
    assert!(
        !n.flush(Duration::from_secs(7)).await,
        "nothing can be delivered to a socket that never reads"
    );
    assert_eq!(n.pending(), 1, "the event is kept");
    let _ = stop_tx.send(());
    assert!(
        holder.await.unwrap() >= 1,
        "the launcher did dial the silent socket"
    );
    let rec = Recorder::default();
    let _stop = notify_server(&sock, rec.clone()).await;
    assert!(n.flush(Duration::from_secs(30)).await);
    assert_eq!(rec.events.lock().unwrap().len(), 1);
    assert_eq!(n.counts(), (1, 0));
}
