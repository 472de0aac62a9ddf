//! The bounds of [`super::bounds`] end to end: issue 19's guest (an
//! interface whose address is ~3.9 MB) through the poller into the store
//! and the domain JSON, every field's bound at and beyond it, and the
//! largest messages any accepted data makes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use wire::api_domain::{domain_json, DomainStatus, ObjectMeta};

use super::bounds::*;
use super::parse::{self, ParseError};
use super::poller::{Intervals, Poller};
use super::store::{AgentData, AgentStore};
use super::{AgentChannel, AgentError};

/// The address of issue 19's guest: ~3.9 MB, under libvirt's 4 MiB reply
/// limit, so it reaches the launcher.
const HUGE_ADDRESS_BYTES: usize = 3_900_000;

fn huge_interface_reply() -> String {
    format!(
        r#"{{"return":[{{"name":"lo","hardware-address":"00:00:00:00:00:00","ip-addresses":[{{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8}}]}},{{"name":"eth0","hardware-address":"02:00:00:00:00:01","ip-addresses":[{{"ip-address-type":"ipv4","ip-address":"{}","prefix":24}}],"statistics":{{"rx-bytes":0}}}}]}}"#,
        "1".repeat(HUGE_ADDRESS_BYTES)
    )
}

const GOOD_INTERFACES: &str = r#"{"return":[{"name":"eth0","hardware-address":"02:00:00:00:00:01","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"10.0.2.2","prefix":24}]}]}"#;

/// A guest agent whose replies the test sets per command.
#[derive(Default)]
struct Guest {
    replies: Mutex<HashMap<String, String>>,
    calls: AtomicUsize,
}

impl Guest {
    fn set(&self, cmd: &str, reply: &str) {
        self.replies
            .lock()
            .unwrap()
            .insert(cmd.into(), reply.into());
    }
}

impl AgentChannel for Guest {
    fn command(&self, cmd: &str, _t: Duration) -> Result<String, AgentError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let v: serde_json::Value = serde_json::from_str(cmd).unwrap();
        let name = v["execute"].as_str().unwrap();
        self.replies
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .ok_or_else(|| AgentError::Libvirt(format!("no reply for {name}")))
    }
    fn fs_freeze(&self) -> Result<u32, AgentError> {
        Ok(0)
    }
    fn fs_thaw(&self) -> Result<u32, AgentError> {
        Ok(0)
    }
    fn reboot(&self) -> Result<(), AgentError> {
        Ok(())
    }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(20), "never: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The api.Domain JSON the launcher sends for what the store holds (as
/// the launcher's `status_json` builds it), on libvirt's live XML.
fn domain_json_of(store: &AgentStore) -> String {
    let spec =
        domain::Domain::from_xml(include_str!("../../../wire/tests/golden/libvirt-live.xml"))
            .unwrap();
    let (os, interfaces, fs_freeze_status) = store.status_parts();
    let status = DomainStatus {
        status: "Running".into(),
        reason: "Unknown".into(),
        interfaces: interfaces
            .map(|l| l.iter().map(|i| serde_json::to_value(i).unwrap()).collect()),
        os_info: os.map(|o| serde_json::to_value(o).unwrap()),
        fs_freeze_status,
    };
    let meta = ObjectMeta {
        name: "vm1".into(),
        namespace: "ns1".into(),
        uid: "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77".into(),
        deletion_timestamp: None,
    };
    domain_json(&meta, Some(&spec), &status).to_string()
}

#[test]
fn issue_19_a_3_9_mb_address_is_refused_by_field() {
    let reply = huge_interface_reply();
    assert!(reply.len() < MAX_REPLY_BYTES, "reaches the launcher");
    assert_eq!(
        parse::interfaces(&reply),
        Err(ParseError::Bound {
            field: "return[1].ip-addresses[0].ip-address".into(),
            reason: "3900000 bytes, more than the 64 accepted".into(),
        })
    );
}

#[test]
fn issue_19_the_store_keeps_a_bounded_value_and_the_domain_json_stays_small() {
    let guest = Arc::new(Guest::default());
    for (cmd, reply) in [
        ("guest-info", r#"{"return":{"version":"10.0.2"}}"#),
        ("guest-get-osinfo", r#"{"return":{"id":"debian"}}"#),
        ("guest-get-host-name", r#"{"return":{"host-name":"vm1"}}"#),
        ("guest-get-timezone", r#"{"return":{"zone":"UTC"}}"#),
        ("guest-get-users", r#"{"return":[]}"#),
        ("guest-get-fsinfo", r#"{"return":[]}"#),
        (
            "guest-get-load",
            r#"{"return":{"load1m":0,"load5m":0,"load15m":0}}"#,
        ),
        ("guest-fsfreeze-status", r#"{"return":"thawed"}"#),
        ("guest-network-get-interfaces", GOOD_INTERFACES),
    ] {
        guest.set(cmd, reply);
    }
    let store = Arc::new(AgentStore::default());
    let changes = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&changes);
    let ms = Duration::from_millis;
    let poller = Poller::start(
        Arc::clone(&guest) as Arc<dyn AgentChannel>,
        Arc::clone(&store),
        Intervals {
            initial: ms(10),
            max: [ms(10); 6],
        },
        Arc::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }),
    )
    .unwrap();

    // Before the first poll, and the first good value.
    let empty = domain_json_of(&store);
    assert!(empty.contains(r#""Interfaces":null"#), "{empty}");
    poller.connected();
    wait_until("interfaces polled", || store.status_parts().1.is_some());
    let good = domain_json_of(&store);
    assert!(good.contains(r#""Ip":"10.0.2.2""#), "{good}");

    // The guest now reports issue 19's interface.
    guest.set("guest-network-get-interfaces", &huge_interface_reply());
    let changes_before = changes.load(Ordering::SeqCst);
    wait_until("interfaces stale", || store.snapshot().interfaces.stale);
    // Polled again and again: still refused, still the last good value.
    let calls = guest.calls.load(Ordering::SeqCst);
    wait_until("polled on", || {
        guest.calls.load(Ordering::SeqCst) > calls + 20
    });
    poller.stop();

    let d = store.snapshot();
    assert_eq!(d.stale(), ["guest-network-get-interfaces"]);
    let kept = d.interfaces.value.clone().unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].ip, "10.0.2.2");
    let error = d.interfaces.error.clone().unwrap();
    assert_eq!(
        error,
        "agent reply refused: return[1].ip-addresses[0].ip-address: \
         3900000 bytes, more than the 64 accepted"
    );
    // A refused reply is no change: virt-handler is not notified of it.
    assert_eq!(changes.load(Ordering::SeqCst), changes_before);

    // What virt-handler gets: the same small JSON as before (KubeVirt's
    // was ~8 MB here, over gRPC's 4 MiB).
    let after = domain_json_of(&store);
    assert_eq!(after, good);
    assert!(after.len() < 16 << 10, "{} bytes", after.len());
    // The whole store holds no more than a few KiB.
    assert!(format!("{d:?}").len() < 4096);
}

/// `(parser, reply with `@` where the value goes, field, bound)`: each
/// string field at its bound is accepted, one byte more is refused naming
/// the field.
#[test]
fn every_string_field_is_accepted_at_its_bound_and_refused_beyond() {
    type Parser = fn(&str) -> Result<(), ParseError>;
    fn ok<T>(r: Result<T, ParseError>) -> Result<(), ParseError> {
        r.map(|_| ())
    }
    let cases: [(Parser, &str, &str, usize); 20] = [
        (
            |r| ok(parse::interfaces(r)),
            r#"{"return":[{"name":"@"}]}"#,
            "return[0].name",
            MAX_INTERFACE_NAME,
        ),
        (
            |r| ok(parse::interfaces(r)),
            r#"{"return":[{"name":"eth0","hardware-address":"@"}]}"#,
            "return[0].hardware-address",
            MAX_HARDWARE_ADDRESS,
        ),
        (
            |r| ok(parse::interfaces(r)),
            r#"{"return":[{"name":"eth0","ip-addresses":[{"ip-address":"@"}]}]}"#,
            "return[0].ip-addresses[0].ip-address",
            MAX_IP_ADDRESS,
        ),
        (
            |r| ok(parse::interfaces(r)),
            r#"{"return":[{"name":"eth0","ip-addresses":[{"ip-address-type":"@"}]}]}"#,
            "return[0].ip-addresses[0].ip-address-type",
            MAX_IP_ADDRESS_TYPE,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"name":"@"}}"#,
            "return.name",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"kernel-release":"@"}}"#,
            "return.kernel-release",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"version":"@"}}"#,
            "return.version",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"pretty-name":"@"}}"#,
            "return.pretty-name",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"version-id":"@"}}"#,
            "return.version-id",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"kernel-version":"@"}}"#,
            "return.kernel-version",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"machine":"@"}}"#,
            "return.machine",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::os_info(r)),
            r#"{"return":{"id":"@"}}"#,
            "return.id",
            MAX_OS_FIELD,
        ),
        (
            |r| ok(parse::timezone(r)),
            r#"{"return":{"zone":"@","offset":0}}"#,
            "return.zone",
            MAX_TIMEZONE,
        ),
        (
            |r| ok(parse::users(r)),
            r#"{"return":[{"user":"@"}]}"#,
            "return[0].user",
            MAX_USER_FIELD,
        ),
        (
            |r| ok(parse::users(r)),
            r#"{"return":[{"user":"u","domain":"@"}]}"#,
            "return[0].domain",
            MAX_USER_FIELD,
        ),
        (
            |r| ok(parse::filesystems(r)),
            r#"{"return":[{"mountpoint":"@"}]}"#,
            "return[0].mountpoint",
            MAX_MOUNT_POINT,
        ),
        (
            |r| ok(parse::filesystems(r)),
            r#"{"return":[{"name":"@"}]}"#,
            "return[0].name",
            MAX_FS_FIELD,
        ),
        (
            |r| ok(parse::filesystems(r)),
            r#"{"return":[{"type":"@"}]}"#,
            "return[0].type",
            MAX_FS_FIELD,
        ),
        (
            |r| ok(parse::filesystems(r)),
            r#"{"return":[{"disk":[{"bus-type":"virtio","serial":"@"}]}]}"#,
            "return[0].disk[0].serial",
            MAX_DISK_FIELD,
        ),
        (
            |r| ok(parse::agent_info(r)),
            r#"{"return":{"version":"10","supported_commands":[{"name":"@"}]}}"#,
            "return.supported_commands[0].name",
            MAX_COMMAND_NAME,
        ),
    ];
    for (parser, template, field, max) in cases {
        let at = template.replace('@', &"a".repeat(max));
        assert_eq!(parser(&at), Ok(()), "{field} at {max}");
        let over = template.replace('@', &"a".repeat(max + 1));
        assert_eq!(
            parser(&over),
            Err(ParseError::Bound {
                field: field.into(),
                reason: format!("{} bytes, more than the {max} accepted", max + 1),
            }),
            "{field}"
        );
    }
    // The two single values.
    let name = format!(
        r#"{{"return":{{"host-name":"{}"}}}}"#,
        "a".repeat(MAX_HOSTNAME + 1)
    );
    assert!(
        matches!(parse::host_name(&name), Err(ParseError::Bound { field, .. }) if field == "return.host-name")
    );
    let version = format!(
        r#"{{"return":{{"version":"{}"}}}}"#,
        "1".repeat(MAX_AGENT_VERSION + 1)
    );
    assert!(
        matches!(parse::agent_info(&version), Err(ParseError::Bound { field, .. }) if field == "return.version")
    );
}

#[test]
fn every_list_is_accepted_at_its_bound_and_refused_beyond() {
    let list = |item: &str, n: usize| vec![item; n].join(",");
    let ifaces = |n| format!(r#"{{"return":[{}]}}"#, list(r#"{"name":"e"}"#, n));
    assert_eq!(
        parse::interfaces(&ifaces(MAX_INTERFACES)).unwrap().len(),
        MAX_INTERFACES
    );
    assert!(
        matches!(parse::interfaces(&ifaces(MAX_INTERFACES + 1)), Err(ParseError::Bound { field, .. }) if field == "return")
    );

    let addrs = |n| {
        format!(
            r#"{{"return":[{{"name":"e","ip-addresses":[{}]}}]}}"#,
            list(r#"{"ip-address":"fe80::1"}"#, n)
        )
    };
    assert_eq!(
        parse::interfaces(&addrs(MAX_ADDRESSES_PER_INTERFACE)).unwrap()[0]
            .ips
            .len(),
        MAX_ADDRESSES_PER_INTERFACE
    );
    assert!(
        matches!(parse::interfaces(&addrs(MAX_ADDRESSES_PER_INTERFACE + 1)), Err(ParseError::Bound { field, .. }) if field == "return[0].ip-addresses")
    );

    let users = |n| format!(r#"{{"return":[{}]}}"#, list(r#"{"user":"u"}"#, n));
    assert_eq!(parse::users(&users(MAX_USERS)).unwrap().len(), MAX_USERS);
    assert!(
        matches!(parse::users(&users(MAX_USERS + 1)), Err(ParseError::Bound { field, .. }) if field == "return")
    );

    let fs = |n| format!(r#"{{"return":[{}]}}"#, list(r#"{"name":"f"}"#, n));
    assert_eq!(
        parse::filesystems(&fs(MAX_FILESYSTEMS)).unwrap().len(),
        MAX_FILESYSTEMS
    );
    assert!(
        matches!(parse::filesystems(&fs(MAX_FILESYSTEMS + 1)), Err(ParseError::Bound { field, .. }) if field == "return")
    );

    let disks = |n| {
        format!(
            r#"{{"return":[{{"name":"md0","disk":[{}]}}]}}"#,
            list(r#"{"bus-type":"virtio"}"#, n)
        )
    };
    assert_eq!(
        parse::filesystems(&disks(MAX_DISKS_PER_FILESYSTEM)).unwrap()[0]
            .disk
            .len(),
        MAX_DISKS_PER_FILESYSTEM
    );
    assert!(
        matches!(parse::filesystems(&disks(MAX_DISKS_PER_FILESYSTEM + 1)), Err(ParseError::Bound { field, .. }) if field == "return[0].disk")
    );

    let cmds = |n| {
        format!(
            r#"{{"return":{{"supported_commands":[{}]}}}}"#,
            list(r#"{"name":"guest-ping","enabled":true}"#, n)
        )
    };
    assert_eq!(
        parse::agent_info(&cmds(MAX_COMMANDS))
            .unwrap()
            .supported_commands
            .len(),
        MAX_COMMANDS
    );
    assert!(
        matches!(parse::agent_info(&cmds(MAX_COMMANDS + 1)), Err(ParseError::Bound { field, .. }) if field == "return.supported_commands")
    );
}

#[test]
fn lists_within_their_counts_are_still_refused_beyond_their_json_budget() {
    // 1024 interfaces with 1 KiB names: every field and count within its
    // bound, 1 MiB of JSON in all.
    let name = "n".repeat(MAX_INTERFACE_NAME);
    let item = format!(r#"{{"name":"{name}"}}"#);
    let reply = format!(
        r#"{{"return":[{}]}}"#,
        vec![item.as_str(); MAX_INTERFACES].join(",")
    );
    match parse::interfaces(&reply) {
        Err(ParseError::Bound { field, reason }) => {
            assert_eq!(field, "return");
            assert!(
                reason.ends_with(&format!("more than the {INTERFACES_BUDGET} accepted")),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    let mount = "m".repeat(MAX_MOUNT_POINT);
    let item = format!(r#"{{"mountpoint":"{mount}"}}"#);
    let reply = format!(r#"{{"return":[{}]}}"#, vec![item.as_str(); 200].join(","));
    assert!(
        matches!(parse::filesystems(&reply), Err(ParseError::Bound { field, .. }) if field == "return")
    );
    let user = "u".repeat(MAX_USER_FIELD);
    let item = format!(r#"{{"user":"{user}"}}"#);
    let reply = format!(r#"{{"return":[{}]}}"#, vec![item.as_str(); 200].join(","));
    assert!(
        matches!(parse::users(&reply), Err(ParseError::Bound { field, .. }) if field == "return")
    );
    let cmd = "c".repeat(MAX_COMMAND_NAME);
    let item = format!(r#"{{"name":"{cmd}"}}"#);
    let reply = format!(
        r#"{{"return":{{"supported_commands":[{}]}}}}"#,
        vec![item.as_str(); 500].join(",")
    );
    assert!(
        matches!(parse::agent_info(&reply), Err(ParseError::Bound { field, .. }) if field == "return.supported_commands")
    );
}

/// The largest reply of each kind the parsers accept: just under its
/// budget, each field as long as it may be.
fn largest(item: impl Fn(usize) -> String, budget: usize, wrap: impl Fn(&str) -> String) -> String {
    let mut items = Vec::new();
    let mut i = 0;
    loop {
        let next = item(i);
        // Measured in qemu-ga's form; the callers leave room for the
        // difference to ours.
        if items.iter().map(|s: &String| s.len() + 1).sum::<usize>() + next.len() > budget {
            break;
        }
        items.push(next);
        i += 1;
    }
    wrap(&items.join(","))
}

#[test]
fn the_largest_accepted_data_keeps_every_message_far_below_4_mib() {
    let pad = |c: char, n: usize| c.to_string().repeat(n);
    let interfaces = largest(
        |i| {
            format!(
                r#"{{"name":"{}{i}","hardware-address":"{}","ip-addresses":[{{"ip-address-type":"ipv6","ip-address":"{}"}}]}}"#,
                pad('n', 64),
                pad('h', MAX_HARDWARE_ADDRESS),
                pad('a', MAX_IP_ADDRESS)
            )
        },
        // Ours repeats the address (`Ip` and `IPs`).
        INTERFACES_BUDGET * 3 / 4,
        |s| format!(r#"{{"return":[{s}]}}"#),
    );
    let os = format!(
        r#"{{"return":{{"name":"{0}","kernel-release":"{0}","version":"{0}","pretty-name":"{0}","version-id":"{0}","kernel-version":"{0}","machine":"{0}","id":"{0}"}}}}"#,
        pad('o', MAX_OS_FIELD)
    );
    let users = largest(
        |i| {
            format!(
                r#"{{"user":"{}{i}","domain":"{}","login-time":1.5}}"#,
                pad('u', 900),
                pad('d', 900)
            )
        },
        USERS_BUDGET - 4096,
        |s| format!(r#"{{"return":[{s}]}}"#),
    );
    let fs = largest(
        |i| {
            format!(
                r#"{{"name":"{}","mountpoint":"{}{i}","type":"{}","used-bytes":18446744073709551615,"total-bytes":18446744073709551615,"disk":[{{"serial":"{}","bus-type":"{}"}}]}}"#,
                pad('n', 200),
                pad('m', 4000),
                pad('t', 200),
                pad('s', 1000),
                pad('b', 1000)
            )
        },
        FILESYSTEMS_BUDGET - 8192,
        |s| format!(r#"{{"return":[{s}]}}"#),
    );
    let cmds = largest(
        |i| format!(r#"{{"name":"{}{i}","enabled":true}}"#, pad('c', 200)),
        COMMANDS_BUDGET - 1024,
        |s| {
            format!(
                r#"{{"return":{{"version":"{}","supported_commands":[{s}]}}}}"#,
                pad('v', MAX_AGENT_VERSION)
            )
        },
    );
    let mut d = AgentData::default();
    d.interfaces.value = Some(parse::interfaces(&interfaces).unwrap());
    d.os.value = Some(parse::os_info(&os).unwrap());
    d.users.value = Some(parse::users(&users).unwrap());
    d.filesystems.value = Some(parse::filesystems(&fs).unwrap());
    d.info.value = Some(parse::agent_info(&cmds).unwrap());
    d.hostname.value = Some(
        parse::host_name(&format!(
            r#"{{"return":{{"host-name":"{}"}}}}"#,
            pad('h', MAX_HOSTNAME)
        ))
        .unwrap(),
    );
    d.timezone.value = Some(
        parse::timezone(&format!(
            r#"{{"return":{{"zone":"{}","offset":-43200}}}}"#,
            pad('z', MAX_TIMEZONE)
        ))
        .unwrap(),
    );
    d.fsfreeze.value = Some("frozen".into());
    assert!(d.interfaces.value.as_ref().unwrap().len() > 500);
    assert!(d.users.value.as_ref().unwrap().len() > 50);
    assert!(d.filesystems.value.as_ref().unwrap().len() > 50);

    let store = AgentStore::default();
    *store.lock() = d;
    let limit = 4 << 20;
    let dom = domain_json_of(&store).len();
    let guest_info = serde_json::to_vec(&store.guest_info()).unwrap().len();
    let users = serde_json::to_vec(&store.users()).unwrap().len();
    let fs = serde_json::to_vec(&store.filesystems()).unwrap().len();
    // The sums in the bounds module's docs.
    assert!(dom < 300 << 10, "domain JSON {dom} bytes");
    assert!(guest_info < 720 << 10, "GetGuestInfo {guest_info} bytes");
    assert!(
        users <= USERS_BUDGET && fs <= FILESYSTEMS_BUDGET,
        "{users} {fs}"
    );
    assert!(dom.max(guest_info).max(users).max(fs) < limit / 4);
}

#[test]
fn exec_output_is_cut_and_the_exit_code_kept() {
    let out = "é".repeat(MAX_EXEC_OUTPUT); // 2 MiB of 2-byte characters
    let b64 = base64::engine::general_purpose::STANDARD.encode(out.as_bytes());
    let reply = format!(r#"{{"return":{{"exited":true,"exitcode":3,"out-data":"{b64}"}}}}"#);
    assert!(reply.len() < MAX_REPLY_BYTES);
    let s = parse::exec_status(&reply).unwrap();
    assert_eq!(s.exit_code, 3);
    assert_eq!(s.stdout.len(), MAX_EXEC_OUTPUT);
    assert!(s.stdout.chars().all(|c| c == 'é'));
    // A signal number at the end of the range is no overflow.
    let s = parse::exec_status(&format!(
        r#"{{"return":{{"exited":true,"signal":{}}}}}"#,
        i64::MAX
    ))
    .unwrap();
    assert_eq!(s.exit_code, -1);
}

#[test]
fn text_from_the_guest_in_errors_is_cut_and_escaped() {
    let desc = format!("\u{1b}[2J{}", "x".repeat(1 << 20));
    let reply = serde_json::json!({"error": {"class": "GenericError", "desc": desc}}).to_string();
    let e = parse::host_name(&reply).unwrap_err().to_string();
    assert!(e.len() < 2 * MAX_ERROR_TEXT, "{} bytes", e.len());
    assert!(
        e.starts_with("agent error GenericError: \\u{1b}[2Jxxx"),
        "{e}"
    );
    // serde_json quotes the value it did not expect: cut too.
    let reply = format!(r#"{{"return":{{"load1m":"{}"}}}}"#, "9".repeat(1 << 20));
    let e = parse::load(&reply).unwrap_err().to_string();
    assert!(e.len() < 2 * MAX_ERROR_TEXT, "{} bytes", e.len());
    assert!(e.contains("return.load1m"), "{e}");
    let reply = format!(r#"{{"return":"{}"}}"#, "f".repeat(100));
    assert!(matches!(
        parse::fsfreeze_status(&reply),
        Err(ParseError::Bound { .. })
    ));
}
