//! Bounds on what the guest agent may tell the launcher, enforced while a
//! reply is decoded ([`crate::parse`]), before anything reaches the store
//! or virt-handler.
//!
//! The guest is not trusted: whatever qemu-ga answers ends up in the
//! `api.Domain` JSON of GetDomain and of every domain notification
//! (interfaces, OS info, freeze status), and in the GetGuestInfo, GetUsers,
//! GetFilesystems and Exec replies. virt-handler reads each of those
//! through gRPC with its default 4 MiB receive limit, and one message
//! above it wedges its view of the VM (issue 19: an interface whose address
//! is ~3.9 MB made the domain JSON ~8 MB). So every string and every list
//! of every reply has a bound, and every list handed on has a budget for
//! its encoded JSON:
//!
//! | what | bound | on excess |
//! |---|---|---|
//! | one reply | [`MAX_REPLY_BYTES`] | refused |
//! | a string field | its `MAX_*` below, in bytes | refused, naming the field |
//! | a list | its `MAX_*` count | refused, naming the list |
//! | interfaces, users, file systems, commands | `*_BUDGET`: their JSON, in bytes | refused |
//! | exec output | [`MAX_EXEC_OUTPUT`] | cut there (exit code kept) |
//! | error text from or about the guest | [`MAX_ERROR_TEXT`] | cut, control characters escaped |
//!
//! "Refused" is what KubeVirt does when the agent sends more than libvirt
//! carries (a `virDomainGetGuestInfo` of more than 2048 typed parameters,
//! a string over libvirt's 4 MiB RPC limit, an agent reply over its 10 MiB
//! buffer): the call fails, the poller logs it and the last good value
//! stays. Here the datum goes stale with an error naming the field
//! (`virtwrap::agent::store::Datum`), and the last good value stays.
//!
//! KubeVirt has no bound of its own on any field. Ours are chosen so that
//! every real guest fits with room to spare (sizes from Linux and Windows
//! limits, noted on each) and so that the agent's part of any message stays
//! far below 4 MiB: at most [`INTERFACES_BUDGET`] + 8 ×
//! [`MAX_OS_FIELD`] + 6 bytes (≈ 264 KiB) in a domain JSON; at most
//! [`COMMANDS_BUDGET`] + [`MAX_HOSTNAME`] + 8 × [`MAX_OS_FIELD`] +
//! [`MAX_TIMEZONE`] + [`USERS_BUDGET`] + [`FILESYSTEMS_BUDGET`] (≈ 720 KiB)
//! in GetGuestInfo, which lists only 10 users and 10 file systems;
//! [`USERS_BUDGET`] in GetUsers, [`FILESYSTEMS_BUDGET`] in GetFilesystems,
//! [`MAX_EXEC_OUTPUT`] in Exec.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};

/// Largest agent reply parsed (bytes): libvirt's own limit on the string
/// `virDomainQemuAgentCommand` returns (`REMOTE_STRING_MAX`, 4 MiB), so a
/// larger one never arrives anyway.
pub const MAX_REPLY_BYTES: usize = 4 << 20;

/// `ip-address` (bytes): the longest text form of an IPv6 address is 45
/// bytes (`INET6_ADDRSTRLEN` − 1); room for a zone suffix.
pub const MAX_IP_ADDRESS: usize = 64;
/// `ip-address-type` (bytes): `ipv4` or `ipv6`.
pub const MAX_IP_ADDRESS_TYPE: usize = 16;
/// `hardware-address` (bytes): 6 bytes are 17 characters; an InfiniBand
/// address of 20 bytes is 59.
pub const MAX_HARDWARE_ADDRESS: usize = 64;
/// An interface's `name` (bytes): Linux allows 15 bytes (`IFNAMSIZ`),
/// Windows' friendly names up to 256 UTF-16 units; 1 KiB holds them in
/// UTF-8.
pub const MAX_INTERFACE_NAME: usize = 1024;
/// Interfaces in one `guest-network-get-interfaces` reply (`lo` counted).
/// KubeVirt's `virDomainGetGuestInfo` fails beyond 2048 typed parameters,
/// i.e. about 340 interfaces of one address each.
pub const MAX_INTERFACES: usize = 1024;
/// Addresses of one interface (the same libvirt limit allows about 680 in
/// all).
pub const MAX_ADDRESSES_PER_INTERFACE: usize = 128;
/// The interfaces' JSON as the domain status carries it (bytes): a typical
/// interface takes ~130, so this holds ~2000 of them.
pub const INTERFACES_BUDGET: usize = 256 << 10;

/// Each `guest-get-osinfo` field (bytes): os-release values and kernel
/// version strings are under 100 in practice.
pub const MAX_OS_FIELD: usize = 1024;
/// `host-name` (bytes): a DNS name is at most 255 characters; Windows
/// replaces nothing, so up to 4 bytes each in UTF-8.
pub const MAX_HOSTNAME: usize = 1024;
/// The time zone's `zone` (bytes): `UTC`, `CET`, Windows' "Pacific
/// Standard Time" (at most 32 UTF-16 units in `TIME_ZONE_INFORMATION`).
pub const MAX_TIMEZONE: usize = 256;

/// A user's `user` and `domain` (bytes each): Linux logins are at most 32
/// bytes (`UT_NAMESIZE`), Windows user names 256 characters (`UNLEN`) and
/// domains 255.
pub const MAX_USER_FIELD: usize = 1024;
/// Users in one `guest-get-users` reply (KubeVirt's libvirt call fails
/// beyond about 680).
pub const MAX_USERS: usize = 1024;
/// The users' JSON (GetUsers; bytes): a typical user takes ~45.
pub const USERS_BUDGET: usize = 128 << 10;

/// A file system's `mountpoint` (bytes): Linux's `PATH_MAX`.
pub const MAX_MOUNT_POINT: usize = 4096;
/// A file system's `name` and `type` (bytes): `vda1`, `dm-0`, `ext4`,
/// Windows' `\\?\Volume{GUID}\` (49).
pub const MAX_FS_FIELD: usize = 1024;
/// A disk's `serial` and `bus-type` (bytes): SCSI VPD serials are at most
/// 255.
pub const MAX_DISK_FIELD: usize = 1024;
/// File systems in one `guest-get-fsinfo` reply.
pub const MAX_FILESYSTEMS: usize = 1024;
/// Disks under one file system (an LVM or RAID volume over many disks).
pub const MAX_DISKS_PER_FILESYSTEM: usize = 256;
/// The file systems' JSON (GetFilesystems; bytes): a typical one takes
/// ~130.
pub const FILESYSTEMS_BUDGET: usize = 512 << 10;

/// `guest-info`'s `version` (bytes): `10.0.2`, `107.0.1`.
pub const MAX_AGENT_VERSION: usize = 256;
/// A supported command's `name` (bytes): the longest of qemu-ga 10 has 31.
pub const MAX_COMMAND_NAME: usize = 256;
/// Supported commands (qemu-ga 10 lists 49).
pub const MAX_COMMANDS: usize = 1024;
/// The supported commands' JSON (bytes): a typical entry takes ~40.
pub const COMMANDS_BUDGET: usize = 64 << 10;

/// Standard output kept of a guest exec (bytes, after base64 decoding).
/// KubeVirt returns whatever libvirt carries (up to ~3 MiB); the output
/// goes to virt-probe, whose caller (kubelet's exec probe) reads at most
/// 10 KiB of it, so 1 MiB loses nothing anyone reads.
pub const MAX_EXEC_OUTPUT: usize = 1 << 20;

/// Text from or about the guest put in an error message (bytes): the
/// agent's own error description, a value that did not parse.
pub const MAX_ERROR_TEXT: usize = 512;

/// Prefix of every decoding error raised by a bound, so that the parser
/// can tell a bound from a malformed reply.
pub(super) const BOUND_ERROR: &str = "over its bound: ";

/// A string of at most `MAX` bytes, checked while it is decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Text<const MAX: usize>(pub String);

impl<const MAX: usize> Text<MAX> {
    /// The string.
    pub fn into_inner(self) -> String {
        self.0
    }
}

struct TextVisitor<const MAX: usize>;

impl<const MAX: usize> TextVisitor<MAX> {
    fn check<E: de::Error>(len: usize) -> Result<(), E> {
        if len > MAX {
            return Err(E::custom(format!(
                "{BOUND_ERROR}{len} bytes, more than the {MAX} accepted"
            )));
        }
        Ok(())
    }
}

impl<const MAX: usize> Visitor<'_> for TextVisitor<MAX> {
    type Value = Text<MAX>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a string of at most {MAX} bytes")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Self::check(v.len())?;
        Ok(Text(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Self::check(v.len())?;
        Ok(Text(v))
    }
}

impl<'de, const MAX: usize> Deserialize<'de> for Text<MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_string(TextVisitor::<MAX>)
    }
}

/// A list of at most `MAX` entries, refused as soon as entry `MAX + 1`
/// starts (nothing beyond it is decoded).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct List<T, const MAX: usize>(pub Vec<T>);

impl<T, const MAX: usize> Default for List<T, MAX> {
    fn default() -> Self {
        List(Vec::new())
    }
}

struct ListVisitor<T, const MAX: usize>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const MAX: usize> Visitor<'de> for ListVisitor<T, MAX> {
    type Value = List<T, MAX>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {MAX} entries")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(x) = seq.next_element()? {
            if v.len() == MAX {
                return Err(de::Error::custom(format!(
                    "{BOUND_ERROR}more than the {MAX} entries accepted"
                )));
            }
            v.push(x);
        }
        Ok(List(v))
    }
}

impl<'de, T: Deserialize<'de>, const MAX: usize> Deserialize<'de> for List<T, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(ListVisitor::<T, MAX>(PhantomData))
    }
}

/// `text` fit for an error line: control characters escaped (`\n`,
/// `\u{1b}`), cut after [`MAX_ERROR_TEXT`] bytes with the full length
/// noted ([`api::text::cut`]).
pub fn cut(text: &str) -> String {
    api::text::cut(text, MAX_ERROR_TEXT)
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate_utf8(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_list_refuse_beyond_their_bound() {
        let ok: Text<4> = serde_json::from_str(r#""abcd""#).unwrap();
        assert_eq!(ok.into_inner(), "abcd");
        // Escaped text is measured after unescaping.
        let ok: Text<4> = serde_json::from_str(r#""\u00e4\n""#).unwrap();
        assert_eq!(ok.0, "ä\n");
        let e = serde_json::from_str::<Text<4>>(r#""abcde""#).unwrap_err();
        assert!(e.to_string().starts_with(BOUND_ERROR), "{e}");
        assert!(e.to_string().contains("5 bytes, more than the 4"), "{e}");
        assert!(serde_json::from_str::<Text<4>>("42").is_err());

        let l: List<u8, 3> = serde_json::from_str("[1,2,3]").unwrap();
        assert_eq!(l.0, [1, 2, 3]);
        let e = serde_json::from_str::<List<u8, 3>>("[1,2,3,4]").unwrap_err();
        assert!(e.to_string().contains("more than the 3 entries"), "{e}");
        // Refused at the fourth entry: what follows is never decoded.
        let e = serde_json::from_str::<List<u8, 3>>("[1,2,3,4,").unwrap_err();
        assert!(e.to_string().contains("more than the 3 entries"), "{e}");
    }

    #[test]
    fn cut_escapes_control_characters_and_shortens() {
        assert_eq!(cut("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
        let long = "x".repeat(10 * MAX_ERROR_TEXT);
        let c = cut(&long);
        assert!(c.len() < MAX_ERROR_TEXT + 40, "{}", c.len());
        assert!(
            c.ends_with(&format!("… ({} bytes in all)", long.len())),
            "{c}"
        );
        assert_eq!(truncate_utf8("aä".into(), 2), "a");
        assert_eq!(truncate_utf8("aä".into(), 3), "aä");
    }
}
