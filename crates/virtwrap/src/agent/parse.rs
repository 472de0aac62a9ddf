//! Parsers of QEMU guest agent replies (qemu-ga's QAPI schema,
//! `qga/qapi-schema.json`) into KubeVirt's guest-agent shapes
//! (`kubevirt.io/api/core/v1` `VirtualMachineInstanceGuestAgentInfo` and
//! friends, [`wire::guest_info`]; `api.InterfaceStatus`,
//! [`wire::api_domain::InterfaceStatus`]).
//!
//! Every reply is `{"return": <value>}` or `{"error": {"class", "desc"}}`.
//! Replies are decoded with serde into lenient types: a missing field is
//! its empty value, an unknown one is ignored, a field of the wrong type
//! fails the whole reply (the datum goes stale, nothing panics). Replies
//! larger than [`MAX_REPLY_BYTES`] and lists longer than [`MAX_ITEMS`] are
//! refused, so a misbehaving agent cannot make the launcher hold more than
//! a few MiB per datum.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wire::api_domain::InterfaceStatus;
use wire::guest_info::{
    FileSystem, FileSystemDisk, GuestAgentCommandInfo, GuestOsInfo, GuestOsUser,
};

/// Largest agent reply parsed (bytes). libvirt itself caps a reply at its
/// RPC message limit (32 MiB); a real guest's biggest reply (fsinfo of a
/// few hundred mounts, or exec output) stays far below 4 MiB.
pub const MAX_REPLY_BYTES: usize = 4 << 20;
/// Longest list kept from a reply (interfaces, users, file systems,
/// supported commands): more is refused as garbage.
pub const MAX_ITEMS: usize = 4096;

/// Why a reply could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Larger than [`MAX_REPLY_BYTES`].
    #[error("agent reply of {0} bytes exceeds the {MAX_REPLY_BYTES}-byte limit")]
    TooLarge(usize),
    /// Not JSON, or not the shape of the command's reply.
    #[error("invalid agent reply: {0}")]
    Invalid(String),
    /// The agent answered `{"error": {...}}`.
    #[error("agent error {class}: {desc}")]
    Agent {
        /// QMP error class (`GenericError`, `CommandNotFound` ...).
        class: String,
        /// Its description.
        desc: String,
    },
    /// A list longer than [`MAX_ITEMS`].
    #[error("agent reply lists {0} entries, more than the {MAX_ITEMS} accepted")]
    TooMany(usize),
}

#[derive(Deserialize)]
struct Envelope<T> {
    #[serde(rename = "return")]
    ret: Option<T>,
    error: Option<QmpError>,
}

#[derive(Deserialize)]
struct QmpError {
    #[serde(default)]
    class: String,
    #[serde(default)]
    desc: String,
}

/// The `return` value of a reply, decoded as `T`.
///
/// # Errors
/// [`ParseError`]: too large, not JSON / not `T`, or the agent's error.
pub fn unwrap_return<T: DeserializeOwned>(reply: &str) -> Result<T, ParseError> {
    if reply.len() > MAX_REPLY_BYTES {
        return Err(ParseError::TooLarge(reply.len()));
    }
    let env: Envelope<T> =
        serde_json::from_str(reply).map_err(|e| ParseError::Invalid(e.to_string()))?;
    match (env.ret, env.error) {
        (_, Some(e)) => Err(ParseError::Agent {
            class: e.class,
            desc: e.desc,
        }),
        (Some(v), None) => Ok(v),
        (None, None) => Err(ParseError::Invalid(
            "neither \"return\" nor \"error\" in the reply".into(),
        )),
    }
}

fn check_len<T>(v: Vec<T>) -> Result<Vec<T>, ParseError> {
    if v.len() > MAX_ITEMS {
        Err(ParseError::TooMany(v.len()))
    } else {
        Ok(v)
    }
}

// ---------------------------------------------------------------------------
// qemu-ga shapes kept as such

/// The guest's load averages (`guest-get-load`, qemu-ga 10+:
/// `{load1m, load5m, load15m}`, all required).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestLoad {
    /// 1-minute load average.
    #[serde(rename = "load1m")]
    pub load1: f64,
    /// 5-minute load average.
    #[serde(rename = "load5m")]
    pub load5: f64,
    /// 15-minute load average.
    #[serde(rename = "load15m")]
    pub load15: f64,
}

/// The guest's time zone (`guest-get-timezone`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Timezone {
    /// `zone` (`UTC`, `CET`); qemu-ga omits it when unknown.
    #[serde(default)]
    pub zone: String,
    /// Offset from UTC in seconds.
    #[serde(default)]
    pub offset: i64,
}

impl Timezone {
    /// KubeVirt's `"<zone>, <offset>"` form.
    pub fn kubevirt(&self) -> String {
        format!("{}, {}", self.zone, self.offset)
    }
}

/// What `guest-info` reports: the agent's version and commands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentInfo {
    /// qemu-ga's version (`10.0.2`).
    pub version: String,
    /// Its commands, blocked ones with `enabled: false`.
    pub supported_commands: Vec<GuestAgentCommandInfo>,
}

// ---------------------------------------------------------------------------
// qemu-ga reply types (field names of qga/qapi-schema.json)

#[derive(Deserialize)]
struct RawInfo {
    #[serde(default)]
    version: String,
    #[serde(default)]
    supported_commands: Vec<RawCommand>,
}

#[derive(Deserialize)]
struct RawCommand {
    #[serde(default)]
    name: String,
    #[serde(default)]
    enabled: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RawOsInfo {
    #[serde(default)]
    name: String,
    #[serde(default)]
    kernel_release: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    pretty_name: String,
    #[serde(default)]
    version_id: String,
    #[serde(default)]
    kernel_version: String,
    #[serde(default)]
    machine: String,
    #[serde(default)]
    id: String,
}

#[derive(Deserialize)]
struct RawHostName {
    #[serde(rename = "host-name", default)]
    host_name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawUser {
    #[serde(default)]
    user: String,
    #[serde(default)]
    domain: String,
    #[serde(default)]
    login_time: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawFs {
    #[serde(default)]
    name: String,
    #[serde(default)]
    mountpoint: String,
    #[serde(rename = "type", default)]
    fs_type: String,
    #[serde(default)]
    used_bytes: u64,
    #[serde(default)]
    total_bytes: u64,
    #[serde(default)]
    disk: Vec<RawFsDisk>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawFsDisk {
    #[serde(default)]
    serial: String,
    #[serde(default)]
    bus_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawInterface {
    #[serde(default)]
    name: String,
    #[serde(default)]
    hardware_address: String,
    #[serde(default)]
    ip_addresses: Vec<RawIp>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawIp {
    #[serde(default)]
    ip_address_type: String,
    #[serde(default)]
    ip_address: String,
}

// ---------------------------------------------------------------------------
// Parsers

/// `guest-info` → version and supported commands.
///
/// # Errors
/// [`ParseError`].
pub fn agent_info(reply: &str) -> Result<AgentInfo, ParseError> {
    let raw: RawInfo = unwrap_return(reply)?;
    let cmds = check_len(raw.supported_commands)?;
    Ok(AgentInfo {
        version: raw.version,
        supported_commands: cmds
            .into_iter()
            .map(|c| GuestAgentCommandInfo {
                name: c.name,
                enabled: c.enabled,
            })
            .collect(),
    })
}

/// `guest-get-osinfo` → [`GuestOsInfo`].
///
/// # Errors
/// [`ParseError`].
pub fn os_info(reply: &str) -> Result<GuestOsInfo, ParseError> {
    let r: RawOsInfo = unwrap_return(reply)?;
    Ok(GuestOsInfo {
        name: r.name,
        kernel_release: r.kernel_release,
        version: r.version,
        pretty_name: r.pretty_name,
        version_id: r.version_id,
        kernel_version: r.kernel_version,
        machine: r.machine,
        id: r.id,
    })
}

/// `guest-get-host-name` → the host name (bytes that were not UTF-8 in the
/// guest arrive as U+FFFD: qemu-ga and libvirt replace them).
///
/// # Errors
/// [`ParseError`].
pub fn host_name(reply: &str) -> Result<String, ParseError> {
    Ok(unwrap_return::<RawHostName>(reply)?.host_name)
}

/// `guest-get-timezone` → [`Timezone`].
///
/// # Errors
/// [`ParseError`].
pub fn timezone(reply: &str) -> Result<Timezone, ParseError> {
    unwrap_return(reply)
}

/// `guest-get-users` → [`GuestOsUser`]s (qemu-ga's `login-time` is
/// already in seconds).
///
/// # Errors
/// [`ParseError`].
pub fn users(reply: &str) -> Result<Vec<GuestOsUser>, ParseError> {
    let raw: Vec<RawUser> = check_len(unwrap_return(reply)?)?;
    Ok(raw
        .into_iter()
        .map(|u| GuestOsUser {
            user_name: u.user,
            domain: u.domain,
            login_time: if u.login_time.is_finite() {
                u.login_time
            } else {
                0.0
            },
        })
        .collect())
}

/// `guest-get-fsinfo` → [`FileSystem`]s with their disks.
///
/// # Errors
/// [`ParseError`].
pub fn filesystems(reply: &str) -> Result<Vec<FileSystem>, ParseError> {
    let raw: Vec<RawFs> = check_len(unwrap_return(reply)?)?;
    raw.into_iter()
        .map(|f| {
            Ok(FileSystem {
                disk_name: f.name,
                mount_point: f.mountpoint,
                file_system_type: f.fs_type,
                used_bytes: f.used_bytes,
                total_bytes: f.total_bytes,
                disk: check_len(f.disk)?
                    .into_iter()
                    .map(|d| FileSystemDisk {
                        serial: d.serial,
                        bus_type: d.bus_type,
                    })
                    .collect(),
            })
        })
        .collect()
}

/// `guest-get-load` → [`GuestLoad`].
///
/// # Errors
/// [`ParseError`].
pub fn load(reply: &str) -> Result<GuestLoad, ParseError> {
    unwrap_return(reply)
}

/// `guest-fsfreeze-status` → `frozen` or `thawed`.
///
/// # Errors
/// [`ParseError`], also for any other string.
pub fn fsfreeze_status(reply: &str) -> Result<String, ParseError> {
    let s: String = unwrap_return(reply)?;
    match s.as_str() {
        "frozen" | "thawed" => Ok(s),
        other => Err(ParseError::Invalid(format!(
            "fsfreeze status {other:?} is neither \"frozen\" nor \"thawed\""
        ))),
    }
}

/// `guest-network-get-interfaces` → [`InterfaceStatus`]es, KubeVirt's way:
/// `lo` is dropped, order kept, `Ip` is the first IPv4 address or else the
/// first address of any family, `IPs` all of them; missing keys are empty.
///
/// # Errors
/// [`ParseError`].
pub fn interfaces(reply: &str) -> Result<Vec<InterfaceStatus>, ParseError> {
    let raw: Vec<RawInterface> = check_len(unwrap_return(reply)?)?;
    let mut out = Vec::with_capacity(raw.len());
    for i in raw {
        if i.name == "lo" {
            continue;
        }
        let ips = check_len(i.ip_addresses)?;
        let ip = ips
            .iter()
            .find(|a| a.ip_address_type == "ipv4")
            .or_else(|| ips.first())
            .map(|a| a.ip_address.clone())
            .unwrap_or_default();
        out.push(InterfaceStatus {
            mac: i.hardware_address,
            ip,
            ips: ips.into_iter().map(|a| a.ip_address).collect(),
            interface_name: i.name,
        });
    }
    Ok(out)
}

/// `guest-exec` → the guest pid.
///
/// # Errors
/// [`ParseError`], also for a pid ≤ 0 (KubeVirt's "Invalid pid").
pub fn exec_pid(reply: &str) -> Result<i64, ParseError> {
    #[derive(Deserialize)]
    struct Pid {
        pid: i64,
    }
    let p: Pid = unwrap_return(reply)?;
    if p.pid <= 0 {
        return Err(ParseError::Invalid(format!("Invalid pid [{}]", p.pid)));
    }
    Ok(p.pid)
}

/// A `guest-exec-status` result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecStatus {
    /// The process ended.
    pub exited: bool,
    /// Its exit code (or `128 + signal`, KubeVirt reads only `exitcode`).
    pub exit_code: i32,
    /// Its standard output, decoded from base64 (lossy UTF-8).
    pub stdout: String,
}

/// `guest-exec-status` → [`ExecStatus`].
///
/// # Errors
/// [`ParseError`], also for `out-data` that is not base64.
pub fn exec_status(reply: &str) -> Result<ExecStatus, ParseError> {
    use base64::Engine as _;
    #[derive(Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct Raw {
        #[serde(default)]
        exited: bool,
        #[serde(default)]
        exitcode: Option<i64>,
        #[serde(default)]
        signal: Option<i64>,
        #[serde(default)]
        out_data: String,
    }
    let r: Raw = unwrap_return(reply)?;
    let out = base64::engine::general_purpose::STANDARD
        .decode(r.out_data.as_bytes())
        .map_err(|e| ParseError::Invalid(format!("out-data is not base64: {e}")))?;
    let code = match (r.exitcode, r.signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 0,
    };
    Ok(ExecStatus {
        exited: r.exited,
        exit_code: i32::try_from(code).unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded from the test guest's qemu-ga 10.0.2 (tests/guest/build)
    // with `virsh qemu-agent-command`.
    const REAL_OSINFO: &str = r##"{"return":{"name":"Busybox Guest","kernel-release":"6.1.0-57-cloud-amd64","version":"0.1 (Debian 12 bookworm packages)","pretty-name":"Busybox Guest 0.1 (Debian 12 kernel 6.1.0-57-cloud-amd64)","version-id":"0.1","kernel-version":"#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-26)","machine":"x86_64","id":"busybox-guest"}}"##;
    const REAL_INTERFACES: &str = r#"{"return":[{"name":"lo","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8},{"ip-address-type":"ipv6","ip-address":"::1","prefix":128}],"statistics":{"tx-packets":0,"tx-errs":0,"rx-bytes":0,"rx-dropped":0,"rx-packets":0,"rx-errs":0,"tx-bytes":0,"tx-dropped":0},"hardware-address":"00:00:00:00:00:00"}]}"#;
    const REAL_LOAD: &str =
        r#"{"return":{"load15m":0.0302734375,"load5m":0.09130859375,"load1m":0.330078125}}"#;

    #[test]
    fn os_info_maps_every_field_to_kubevirt_names() {
        let os = os_info(REAL_OSINFO).unwrap();
        assert_eq!(os.name, "Busybox Guest");
        assert_eq!(os.kernel_release, "6.1.0-57-cloud-amd64");
        assert_eq!(os.version_id, "0.1");
        assert_eq!(os.machine, "x86_64");
        let j = serde_json::to_value(&os).unwrap();
        assert_eq!(
            j["prettyName"],
            "Busybox Guest 0.1 (Debian 12 kernel 6.1.0-57-cloud-amd64)"
        );
        assert_eq!(
            j["kernelVersion"].as_str().unwrap().get(..6),
            Some("#1 SMP")
        );
        assert_eq!(j["id"], "busybox-guest");
        assert_eq!(j["version"], "0.1 (Debian 12 bookworm packages)");
    }

    #[test]
    fn real_guest_with_only_the_loopback_reports_no_interface() {
        assert_eq!(interfaces(REAL_INTERFACES).unwrap(), vec![]);
    }

    #[test]
    fn os_info_with_missing_fields_omits_them() {
        let os = os_info(r#"{"return":{"id":"mswindows"}}"#).unwrap();
        assert_eq!(serde_json::to_string(&os).unwrap(), r#"{"id":"mswindows"}"#);
    }

    #[test]
    fn guest_info_keeps_disabled_commands() {
        let r = r#"{"return":{"version":"10.0.2","supported_commands":[
            {"enabled":true,"name":"guest-ping","success-response":true},
            {"enabled":false,"name":"guest-exec","success-response":true}]}}"#;
        let i = agent_info(r).unwrap();
        assert_eq!(i.version, "10.0.2");
        assert_eq!(
            serde_json::to_value(&i.supported_commands).unwrap(),
            serde_json::json!([{"name":"guest-ping","enabled":true},{"name":"guest-exec"}])
        );
    }

    #[test]
    fn hostnames_that_were_not_utf8_arrive_replaced_and_survive() {
        // qemu-ga writes invalid UTF-8 as U+FFFD; libvirt's string is then
        // decoded lossily by the binding: either way valid UTF-8 here.
        let from_bytes = String::from_utf8_lossy(b"{\"return\":{\"host-name\":\"h\xffst\"}}");
        assert_eq!(host_name(&from_bytes).unwrap(), "h\u{fffd}st");
        assert_eq!(
            host_name(r#"{"return":{"host-name":"h\ufffdst-\u00e4"}}"#).unwrap(),
            "h\u{fffd}st-ä"
        );
        // A lone surrogate escape is not JSON text: refused, no panic.
        assert!(matches!(
            host_name(r#"{"return":{"host-name":"a\udc80"}}"#),
            Err(ParseError::Invalid(_))
        ));
    }

    #[test]
    fn timezone_is_formatted_as_kubevirt_does() {
        assert_eq!(
            timezone(r#"{"return":{"zone":"CET","offset":3600}}"#)
                .unwrap()
                .kubevirt(),
            "CET, 3600"
        );
        // qemu-ga omits the zone when the guest has none.
        assert_eq!(
            timezone(r#"{"return":{"offset":0}}"#).unwrap().kubevirt(),
            ", 0"
        );
    }

    #[test]
    fn users_keep_login_time_in_seconds() {
        let u = users(
            r#"{"return":[{"user":"root","login-time":1700000000.25},{"user":"bob","domain":"CORP"}]}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&u).unwrap(),
            serde_json::json!([
                {"userName":"root","loginTime":1700000000.25},
                {"userName":"bob","domain":"CORP"}
            ])
        );
        assert!(users(r#"{"return":[]}"#).unwrap().is_empty());
    }

    #[test]
    fn filesystems_map_disks_and_sizes() {
        let r = r#"{"return":[{"name":"vda1","mountpoint":"/","type":"ext4","used-bytes":1024,"total-bytes":4096,
            "disk":[{"serial":"abc","bus-type":"virtio","bus":0,"target":0,"unit":0,"dev":"/dev/vda1",
                     "pci-controller":{"domain":0,"bus":0,"slot":4,"function":0}}]},
            {"name":"sr0","mountpoint":"/mnt","type":"iso9660","disk":[]}]}"#;
        let f = filesystems(r).unwrap();
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!([
                {"diskName":"vda1","mountPoint":"/","fileSystemType":"ext4","usedBytes":1024,"totalBytes":4096,
                 "disk":[{"serial":"abc","busType":"virtio"}]},
                {"diskName":"sr0","mountPoint":"/mnt","fileSystemType":"iso9660","usedBytes":0,"totalBytes":0}
            ])
        );
    }

    #[test]
    fn load_and_fsfreeze_status() {
        let l = load(REAL_LOAD).unwrap();
        assert_eq!(
            (l.load1, l.load5, l.load15),
            (0.330078125, 0.09130859375, 0.0302734375)
        );
        // Other key names are not a zero load: refused.
        assert!(load(r#"{"return":{"load1":0.5}}"#).is_err());
        assert_eq!(fsfreeze_status(r#"{"return":"frozen"}"#).unwrap(), "frozen");
        assert!(fsfreeze_status(r#"{"return":"melting"}"#).is_err());
    }

    #[test]
    fn case_022_interfaces_follow_kubevirt_rules() {
        let reply = include_str!("../../../../tests/data/cases/022-agent-interfaces-parsing.json");
        let got = interfaces(reply).unwrap();
        let row = |name: &str, mac: &str, ip: &str, ips: &[&str]| InterfaceStatus {
            mac: mac.into(),
            ip: ip.into(),
            ips: ips.iter().map(|s| (*s).to_owned()).collect(),
            interface_name: name.into(),
        };
        assert_eq!(
            got,
            vec![
                row(
                    "eth0",
                    "02:00:00:aa:bb:01",
                    "10.0.2.2",
                    &["fd10:0:2::2", "10.0.2.2", "fe80::ff:fe00:1"]
                ),
                row(
                    "eth1",
                    "02:00:00:aa:bb:02",
                    "fe80::ff:fe00:2",
                    &["fe80::ff:fe00:2"]
                ),
                row(
                    "eth1:vip",
                    "02:00:00:aa:bb:02",
                    "192.0.2.10",
                    &["192.0.2.10"]
                ),
                row("docker0", "", "", &[]),
                row("Ethernet äö", "02:00:00:aa:bb:03", "", &[]),
            ]
        );
    }

    #[test]
    fn interfaces_ipv6_only_and_none() {
        let got = interfaces(
            r#"{"return":[{"name":"eth0","hardware-address":"52:54:00:00:00:01",
                "ip-addresses":[{"ip-address-type":"ipv6","ip-address":"fd00::5","prefix":64},
                                {"ip-address-type":"ipv6","ip-address":"fe80::1","prefix":64}]}]}"#,
        )
        .unwrap();
        assert_eq!(got[0].ip, "fd00::5");
        assert_eq!(got[0].ips, ["fd00::5", "fe80::1"]);
        // Only the loopback: nothing to report.
        assert!(
            interfaces(r#"{"return":[{"name":"lo","ip-addresses":[]}]}"#)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn hundreds_of_interfaces_are_kept_in_order() {
        let list: Vec<String> = (0..500)
            .map(|i| {
                format!(
                    r#"{{"name":"veth{i}","hardware-address":"02:00:00:00:{:02x}:{:02x}","ip-addresses":[{{"ip-address-type":"ipv4","ip-address":"10.{}.{}.1","prefix":24}}]}}"#,
                    i / 256,
                    i % 256,
                    i / 256,
                    i % 256
                )
            })
            .collect();
        let got = interfaces(&format!(r#"{{"return":[{}]}}"#, list.join(","))).unwrap();
        assert_eq!(got.len(), 500);
        assert_eq!(got[499].interface_name, "veth499");
        assert_eq!(got[499].ip, "10.1.243.1");
    }

    #[test]
    fn too_many_entries_or_bytes_are_refused() {
        let many = format!(
            r#"{{"return":[{}]}}"#,
            vec![r#"{"name":"x"}"#; MAX_ITEMS + 1].join(",")
        );
        assert_eq!(interfaces(&many), Err(ParseError::TooMany(MAX_ITEMS + 1)));
        let huge = format!(
            r#"{{"return":{{"host-name":"{}"}}}}"#,
            "a".repeat(MAX_REPLY_BYTES)
        );
        assert!(matches!(host_name(&huge), Err(ParseError::TooLarge(_))));
        // Just under the limit is fine: a megabyte host name parses.
        let mb = format!(r#"{{"return":{{"host-name":"{}"}}}}"#, "a".repeat(1 << 20));
        assert_eq!(host_name(&mb).unwrap().len(), 1 << 20);
    }

    #[test]
    fn invalid_json_wrong_shapes_and_agent_errors() {
        for bad in [
            "",
            "not json",
            "{\"return\":",
            "{}",
            "[1,2]",
            r#"{"return":{"host-name":42}}"#,
            r#"{"return":"a string where a list belongs"}"#,
        ] {
            assert!(host_name(bad).is_err() || interfaces(bad).is_err(), "{bad}");
        }
        assert!(interfaces(r#"{"return":{"host-name":"x"}}"#).is_err());
        assert_eq!(
            host_name(
                r#"{"error":{"class":"GenericError","desc":"Command guest-get-host-name has been disabled"}}"#
            ),
            Err(ParseError::Agent {
                class: "GenericError".into(),
                desc: "Command guest-get-host-name has been disabled".into()
            })
        );
    }

    #[test]
    fn exec_pid_and_status() {
        assert_eq!(exec_pid(r#"{"return":{"pid":812}}"#).unwrap(), 812);
        assert!(exec_pid(r#"{"return":{"pid":0}}"#).is_err());
        let s = exec_status(r#"{"return":{"exited":true,"exitcode":0,"out-data":"aGVsbG8K"}}"#)
            .unwrap();
        assert_eq!(
            s,
            ExecStatus {
                exited: true,
                exit_code: 0,
                stdout: "hello\n".into()
            }
        );
        assert!(
            !exec_status(r#"{"return":{"exited":false}}"#)
                .unwrap()
                .exited
        );
        assert_eq!(
            exec_status(r#"{"return":{"exited":true,"signal":9}}"#)
                .unwrap()
                .exit_code,
            137
        );
        assert!(exec_status(r#"{"return":{"exited":true,"out-data":"!!"}}"#).is_err());
    }
}
