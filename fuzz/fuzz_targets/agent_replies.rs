//! Arbitrary text as a reply of the QEMU guest agent → every parser of
//! `guest_agent::parse` (what the poller and the RPCs feed libvirt's
//! `virDomainQemuAgentCommand` answers to).
//!
//! Property: no parser panics; whatever one accepts stays inside the
//! bounds of `guest_agent::bounds` (each string, each list, each
//! list's JSON), so nothing the guest says reaches virt-handler larger;
//! every error's text is short (guest text in it is cut). Seeds:
//! `fuzz/seeds/agent_replies` (replies of the test guest's qemu-ga 10 and
//! of the unit tests); keys in `fuzz/agent.dict`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use guest_agent::bounds::*;
use guest_agent::parse::{self, ParseError};

/// Longest error text: the agent's class and description, each cut, or a
/// field path and a reason.
const MAX_ERROR_LINE: usize = 4 * MAX_ERROR_TEXT;

fn json_len<T: Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX)
}

fn check_error(what: &str, e: &ParseError) {
    let text = e.to_string();
    assert!(
        text.len() <= MAX_ERROR_LINE,
        "{what}: error of {} bytes: {}",
        text.len(),
        &text[..text.floor_char_boundary(300)]
    );
    assert!(
        !text.chars().any(|c| c.is_control()),
        "{what}: control character in error {text:?}"
    );
}

fn within(what: &str, s: &str, max: usize) {
    assert!(s.len() <= max, "{what}: {} bytes > {max}", s.len());
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let reply: &str = &text;

    match parse::interfaces(reply) {
        Ok(list) => {
            assert!(list.len() <= MAX_INTERFACES);
            assert!(json_len(&list) <= INTERFACES_BUDGET);
            for i in &list {
                assert_ne!(i.interface_name, "lo", "the loopback is never reported");
                within("name", &i.interface_name, MAX_INTERFACE_NAME);
                within("mac", &i.mac, MAX_HARDWARE_ADDRESS);
                within("ip", &i.ip, MAX_IP_ADDRESS);
                assert!(i.ips.len() <= MAX_ADDRESSES_PER_INTERFACE);
                assert!(i.ip.is_empty() || i.ips.contains(&i.ip), "Ip is one of IPs");
                for a in &i.ips {
                    within("address", a, MAX_IP_ADDRESS);
                }
            }
        }
        Err(e) => check_error("interfaces", &e),
    }
    match parse::os_info(reply) {
        Ok(os) => {
            let v = serde_json::to_value(&os).unwrap();
            for (k, f) in v.as_object().unwrap() {
                within(k, f.as_str().unwrap(), MAX_OS_FIELD);
            }
        }
        Err(e) => check_error("os_info", &e),
    }
    match parse::host_name(reply) {
        Ok(h) => within("host-name", &h, MAX_HOSTNAME),
        Err(e) => check_error("host_name", &e),
    }
    match parse::timezone(reply) {
        Ok(t) => within("zone", &t.zone, MAX_TIMEZONE),
        Err(e) => check_error("timezone", &e),
    }
    match parse::users(reply) {
        Ok(u) => {
            assert!(u.len() <= MAX_USERS && json_len(&u) <= USERS_BUDGET);
            for x in &u {
                within("user", &x.user_name, MAX_USER_FIELD);
                within("domain", &x.domain, MAX_USER_FIELD);
                assert!(x.login_time.is_finite());
            }
        }
        Err(e) => check_error("users", &e),
    }
    match parse::filesystems(reply) {
        Ok(f) => {
            assert!(f.len() <= MAX_FILESYSTEMS && json_len(&f) <= FILESYSTEMS_BUDGET);
            for x in &f {
                within("mountpoint", &x.mount_point, MAX_MOUNT_POINT);
                within("name", &x.disk_name, MAX_FS_FIELD);
                within("type", &x.file_system_type, MAX_FS_FIELD);
                assert!(x.disk.len() <= MAX_DISKS_PER_FILESYSTEM);
            }
        }
        Err(e) => check_error("filesystems", &e),
    }
    match parse::agent_info(reply) {
        Ok(i) => {
            within("version", &i.version, MAX_AGENT_VERSION);
            assert!(i.supported_commands.len() <= MAX_COMMANDS);
            assert!(json_len(&i.supported_commands) <= COMMANDS_BUDGET);
        }
        Err(e) => check_error("agent_info", &e),
    }
    match parse::load(reply) {
        Ok(_) => {}
        Err(e) => check_error("load", &e),
    }
    match parse::fsfreeze_status(reply) {
        Ok(s) => assert!(s == "frozen" || s == "thawed", "{s:?}"),
        Err(e) => check_error("fsfreeze_status", &e),
    }
    match parse::exec_pid(reply) {
        Ok(p) => assert!(p > 0),
        Err(e) => check_error("exec_pid", &e),
    }
    match parse::exec_status(reply) {
        Ok(s) => within("stdout", &s.stdout, MAX_EXEC_OUTPUT),
        Err(e) => check_error("exec_status", &e),
    }
    if let Err(e) = parse::unwrap_return::<serde_json::Value>(reply) {
        check_error("unwrap_return", &e);
    }
});
