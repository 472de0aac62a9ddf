//! Parsers of QEMU guest agent replies (qemu-ga's QAPI schema,
//! `qga/qapi-schema.json`) into KubeVirt's guest-agent shapes
//! (`kubevirt.io/api/core/v1` `VirtualMachineInstanceGuestAgentInfo` and
//! friends, [`wire::guest_info`]; `api.InterfaceStatus`,
//! [`wire::api_domain::InterfaceStatus`]).
//!
//! Every reply is `{"return": <value>}` or `{"error": {"class", "desc"}}`.
//! Replies are decoded with serde into lenient types: a missing field is
//! its empty value, an unknown one is ignored, a field of the wrong type
//! fails the whole reply (the datum goes stale, nothing panics). Every
//! string and list has a bound, checked while decoding, and every list
//! handed on a budget for its JSON ([`crate::bounds`]): a reply beyond one
//! is refused with an error naming the field, so nothing a guest says can
//! make a message to virt-handler approach its 4 MiB limit.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wire::api_domain::InterfaceStatus;
use wire::guest_info::{
    FileSystem, FileSystemDisk, GuestAgentCommandInfo, GuestOsInfo, GuestOsUser,
};

pub use crate::bounds::MAX_REPLY_BYTES;
use crate::bounds::{
    cut, truncate_utf8, List, Text, BOUND_ERROR, COMMANDS_BUDGET, FILESYSTEMS_BUDGET,
    INTERFACES_BUDGET, MAX_ADDRESSES_PER_INTERFACE, MAX_AGENT_VERSION, MAX_COMMANDS,
    MAX_COMMAND_NAME, MAX_DISKS_PER_FILESYSTEM, MAX_DISK_FIELD, MAX_EXEC_OUTPUT, MAX_FILESYSTEMS,
    MAX_FS_FIELD, MAX_HARDWARE_ADDRESS, MAX_HOSTNAME, MAX_INTERFACES, MAX_INTERFACE_NAME,
    MAX_IP_ADDRESS, MAX_IP_ADDRESS_TYPE, MAX_MOUNT_POINT, MAX_OS_FIELD, MAX_TIMEZONE, MAX_USERS,
    MAX_USER_FIELD, USERS_BUDGET,
};

/// Why a reply could not be used. Text from the guest in it is cut and
/// escaped ([`crate::bounds::cut`]).
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
    /// A field, a list or a whole datum beyond its bound
    /// ([`crate::bounds`]).
    #[error("agent reply refused: {field}: {reason}")]
    Bound {
        /// The field in qemu-ga's names (`return[0].ip-addresses[0].ip-address`),
        /// or the datum (`interfaces`).
        field: String,
        /// By how much (`3900000 bytes, more than the 64 accepted`).
        reason: String,
    },
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
/// [`ParseError`]: too large, not JSON / not `T`, a bound exceeded, or the
/// agent's error.
pub fn unwrap_return<T: DeserializeOwned>(reply: &str) -> Result<T, ParseError> {
    if reply.len() > MAX_REPLY_BYTES {
        return Err(ParseError::TooLarge(reply.len()));
    }
    let mut de = serde_json::Deserializer::from_str(reply);
    let env: Envelope<T> = serde_path_to_error::deserialize(&mut de).map_err(decode_error)?;
    de.end()
        .map_err(|e| ParseError::Invalid(cut(&e.to_string())))?;
    match (env.ret, env.error) {
        (_, Some(e)) => Err(ParseError::Agent {
            class: cut(&e.class),
            desc: cut(&e.desc),
        }),
        (Some(v), None) => Ok(v),
        (None, None) => Err(ParseError::Invalid(
            "neither \"return\" nor \"error\" in the reply".into(),
        )),
    }
}

/// A decoding error, with the path of the field: [`ParseError::Bound`]
/// when a bound refused it, else [`ParseError::Invalid`].
fn decode_error(e: serde_path_to_error::Error<serde_json::Error>) -> ParseError {
    let field = e.path().to_string();
    let msg = e.into_inner().to_string();
    match msg.strip_prefix(BOUND_ERROR) {
        Some(reason) => ParseError::Bound {
            field,
            // serde_json appends the position; the field says where.
            reason: reason
                .rsplit_once(" at line ")
                .map_or(reason, |(r, _)| r)
                .to_owned(),
        },
        None => ParseError::Invalid(cut(&format!("{field}: {msg}"))),
    }
}

/// Refuses `value` when its JSON takes more than `budget` bytes.
fn within_budget<T: Serialize>(what: &str, value: &T, budget: usize) -> Result<(), ParseError> {
    /// Counts what serde_json writes.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, value).map_err(|e| ParseError::Invalid(e.to_string()))?;
    if n.0 > budget {
        return Err(ParseError::Bound {
            field: what.into(),
            reason: format!("{} bytes of JSON, more than the {budget} accepted", n.0),
        });
    }
    Ok(())
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

/// The load averages as KubeVirt's domain statistics carry them (each
/// marked set).
impl From<GuestLoad> for wire::stats::DomainStatsLoad {
    fn from(l: GuestLoad) -> Self {
        wire::stats::DomainStatsLoad {
            load1m_set: true,
            load1m: l.load1,
            load5m_set: true,
            load5m: l.load5,
            load15m_set: true,
            load15m: l.load15,
        }
    }
}

/// The guest's time zone (`guest-get-timezone`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timezone {
    /// `zone` (`UTC`, `CET`); qemu-ga omits it when unknown.
    pub zone: String,
    /// Offset from UTC in seconds.
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
// qemu-ga reply types (field names of qga/qapi-schema.json), each string
// and list with its bound

#[derive(Deserialize)]
struct RawInfo {
    #[serde(default)]
    version: Text<MAX_AGENT_VERSION>,
    #[serde(default)]
    supported_commands: List<RawCommand, MAX_COMMANDS>,
}

#[derive(Deserialize)]
struct RawCommand {
    #[serde(default)]
    name: Text<MAX_COMMAND_NAME>,
    #[serde(default)]
    enabled: bool,
}

type OsField = Text<MAX_OS_FIELD>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RawOsInfo {
    #[serde(default)]
    name: OsField,
    #[serde(default)]
    kernel_release: OsField,
    #[serde(default)]
    version: OsField,
    #[serde(default)]
    pretty_name: OsField,
    #[serde(default)]
    version_id: OsField,
    #[serde(default)]
    kernel_version: OsField,
    #[serde(default)]
    machine: OsField,
    #[serde(default)]
    id: OsField,
}

#[derive(Deserialize)]
struct RawHostName {
    #[serde(rename = "host-name", default)]
    host_name: Text<MAX_HOSTNAME>,
}

#[derive(Deserialize)]
struct RawTimezone {
    #[serde(default)]
    zone: Text<MAX_TIMEZONE>,
    #[serde(default)]
    offset: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawUser {
    #[serde(default)]
    user: Text<MAX_USER_FIELD>,
    #[serde(default)]
    domain: Text<MAX_USER_FIELD>,
    #[serde(default)]
    login_time: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawFs {
    #[serde(default)]
    name: Text<MAX_FS_FIELD>,
    #[serde(default)]
    mountpoint: Text<MAX_MOUNT_POINT>,
    #[serde(rename = "type", default)]
    fs_type: Text<MAX_FS_FIELD>,
    #[serde(default)]
    used_bytes: u64,
    #[serde(default)]
    total_bytes: u64,
    #[serde(default)]
    disk: List<RawFsDisk, MAX_DISKS_PER_FILESYSTEM>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawFsDisk {
    #[serde(default)]
    serial: Text<MAX_DISK_FIELD>,
    #[serde(default)]
    bus_type: Text<MAX_DISK_FIELD>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawInterface {
    #[serde(default)]
    name: Text<MAX_INTERFACE_NAME>,
    #[serde(default)]
    hardware_address: Text<MAX_HARDWARE_ADDRESS>,
    #[serde(default)]
    ip_addresses: List<RawIp, MAX_ADDRESSES_PER_INTERFACE>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawIp {
    #[serde(default)]
    ip_address_type: Text<MAX_IP_ADDRESS_TYPE>,
    #[serde(default)]
    ip_address: Text<MAX_IP_ADDRESS>,
}

// ---------------------------------------------------------------------------
// Parsers

/// `guest-info` → version and supported commands.
///
/// # Errors
/// [`ParseError`], also beyond [`crate::bounds::COMMANDS_BUDGET`].
pub fn agent_info(reply: &str) -> Result<AgentInfo, ParseError> {
    let raw: RawInfo = unwrap_return(reply)?;
    let supported_commands: Vec<_> = raw
        .supported_commands
        .0
        .into_iter()
        .map(|c| GuestAgentCommandInfo {
            name: c.name.into_inner(),
            enabled: c.enabled,
        })
        .collect();
    within_budget(
        "return.supported_commands",
        &supported_commands,
        COMMANDS_BUDGET,
    )?;
    Ok(AgentInfo {
        version: raw.version.into_inner(),
        supported_commands,
    })
}

/// `guest-get-osinfo` → [`GuestOsInfo`].
///
/// # Errors
/// [`ParseError`].
pub fn os_info(reply: &str) -> Result<GuestOsInfo, ParseError> {
    let r: RawOsInfo = unwrap_return(reply)?;
    Ok(GuestOsInfo {
        name: r.name.into_inner(),
        kernel_release: r.kernel_release.into_inner(),
        version: r.version.into_inner(),
        pretty_name: r.pretty_name.into_inner(),
        version_id: r.version_id.into_inner(),
        kernel_version: r.kernel_version.into_inner(),
        machine: r.machine.into_inner(),
        id: r.id.into_inner(),
    })
}

/// `guest-get-host-name` → the host name (bytes that were not UTF-8 in the
/// guest arrive as U+FFFD: qemu-ga and libvirt replace them).
///
/// # Errors
/// [`ParseError`].
pub fn host_name(reply: &str) -> Result<String, ParseError> {
    Ok(unwrap_return::<RawHostName>(reply)?.host_name.into_inner())
}

/// `guest-get-timezone` → [`Timezone`].
///
/// # Errors
/// [`ParseError`].
pub fn timezone(reply: &str) -> Result<Timezone, ParseError> {
    let r: RawTimezone = unwrap_return(reply)?;
    Ok(Timezone {
        zone: r.zone.into_inner(),
        offset: r.offset,
    })
}

/// `guest-get-users` → [`GuestOsUser`]s (qemu-ga's `login-time` is
/// already in seconds).
///
/// # Errors
/// [`ParseError`], also beyond [`crate::bounds::USERS_BUDGET`].
pub fn users(reply: &str) -> Result<Vec<GuestOsUser>, ParseError> {
    let raw: List<RawUser, MAX_USERS> = unwrap_return(reply)?;
    let users: Vec<_> = raw
        .0
        .into_iter()
        .map(|u| GuestOsUser {
            user_name: u.user.into_inner(),
            domain: u.domain.into_inner(),
            login_time: if u.login_time.is_finite() {
                u.login_time
            } else {
                0.0
            },
        })
        .collect();
    within_budget("return", &users, USERS_BUDGET)?;
    Ok(users)
}

/// `guest-get-fsinfo` → [`FileSystem`]s with their disks.
///
/// # Errors
/// [`ParseError`], also beyond [`crate::bounds::FILESYSTEMS_BUDGET`].
pub fn filesystems(reply: &str) -> Result<Vec<FileSystem>, ParseError> {
    let raw: List<RawFs, MAX_FILESYSTEMS> = unwrap_return(reply)?;
    let fs: Vec<_> = raw
        .0
        .into_iter()
        .map(|f| FileSystem {
            disk_name: f.name.into_inner(),
            mount_point: f.mountpoint.into_inner(),
            file_system_type: f.fs_type.into_inner(),
            used_bytes: f.used_bytes,
            total_bytes: f.total_bytes,
            disk: f
                .disk
                .0
                .into_iter()
                .map(|d| FileSystemDisk {
                    serial: d.serial.into_inner(),
                    bus_type: d.bus_type.into_inner(),
                })
                .collect(),
        })
        .collect();
    within_budget("return", &fs, FILESYSTEMS_BUDGET)?;
    Ok(fs)
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
    let s: Text<16> = unwrap_return(reply)?;
    match s.0.as_str() {
        "frozen" | "thawed" => Ok(s.0),
        other => Err(ParseError::Invalid(format!(
            "fsfreeze status {:?} is neither \"frozen\" nor \"thawed\"",
            cut(other)
        ))),
    }
}

/// `guest-network-get-interfaces` → [`InterfaceStatus`]es, KubeVirt's way:
/// `lo` is dropped, order kept, `Ip` is the first IPv4 address or else the
/// first address of any family, `IPs` all of them; missing keys are empty.
///
/// # Errors
/// [`ParseError`], also beyond [`crate::bounds::INTERFACES_BUDGET`].
pub fn interfaces(reply: &str) -> Result<Vec<InterfaceStatus>, ParseError> {
    let raw: List<RawInterface, MAX_INTERFACES> = unwrap_return(reply)?;
    let mut out = Vec::with_capacity(raw.0.len());
    for i in raw.0 {
        if i.name.0 == "lo" {
            continue;
        }
        let ips = i.ip_addresses.0;
        let ip = ips
            .iter()
            .find(|a| a.ip_address_type.0 == "ipv4")
            .or_else(|| ips.first())
            .map(|a| a.ip_address.0.clone())
            .unwrap_or_default();
        out.push(InterfaceStatus {
            mac: i.hardware_address.into_inner(),
            ip,
            ips: ips.into_iter().map(|a| a.ip_address.into_inner()).collect(),
            interface_name: i.name.into_inner(),
        });
    }
    within_budget("return", &out, INTERFACES_BUDGET)?;
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
    /// Its standard output, decoded from base64 (lossy UTF-8), cut after
    /// [`crate::bounds::MAX_EXEC_OUTPUT`] bytes.
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
        (None, Some(s)) => s.saturating_add(128),
        (None, None) => 0,
    };
    let end = out.len().min(MAX_EXEC_OUTPUT);
    Ok(ExecStatus {
        exited: r.exited,
        exit_code: i32::try_from(code).unwrap_or(-1),
        stdout: truncate_utf8(
            String::from_utf8_lossy(&out[..end]).into_owned(),
            MAX_EXEC_OUTPUT,
        ),
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
        let reply = include_str!("../../../tests/data/cases/022-agent-interfaces-parsing.json");
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
            vec![r#"{"name":"x"}"#; crate::bounds::MAX_INTERFACES + 1].join(",")
        );
        assert_eq!(
            interfaces(&many),
            Err(ParseError::Bound {
                field: "return".into(),
                reason: "more than the 1024 entries accepted".into()
            })
        );
        let huge = format!(
            r#"{{"return":{{"host-name":"{}"}}}}"#,
            "a".repeat(MAX_REPLY_BYTES)
        );
        assert!(matches!(host_name(&huge), Err(ParseError::TooLarge(_))));
        // A host name of a kilobyte parses, one byte more does not.
        let name = |n: usize| format!(r#"{{"return":{{"host-name":"{}"}}}}"#, "a".repeat(n));
        assert_eq!(host_name(&name(1024)).unwrap().len(), 1024);
        assert_eq!(
            host_name(&name(1025)),
            Err(ParseError::Bound {
                field: "return.host-name".into(),
                reason: "1025 bytes, more than the 1024 accepted".into()
            })
        );
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
