//! Reader for the cache files network phase 1 (virt-handler) writes into
//! the launcher's private directory (KubeVirt v1.6.6 `pkg/network/cache`).
//!
//! | File | Content |
//! |---|---|
//! | `<private>/vif-cache-<podIface>.json` | DHCP configuration ([`DhcpConfigCache`]), Go field names |
//! | `<private>/interface-cache-<iface>.json` | domain interface ([`DomainInterfaceCache`]): `{"MAC":{"MAC":"..."}}` |
//!
//! `<private>` is `/var/run/kubevirt-private` in a pod. A missing or
//! corrupt file is a [`CacheError`] naming the file: the launcher never
//! guesses a MAC or an address.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::{Deserialize, Serialize};

/// Largest cache file read (bytes); phase 1 writes a few hundred.
pub const MAX_CACHE_BYTES: u64 = 1 << 20;

/// Why a cache file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The file is absent or unreadable.
    #[error("network cache {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// The file is not the JSON phase 1 writes, or a field is invalid.
    #[error("network cache {path}: corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the JSON path.
        reason: String,
    },
}

/// `<private_dir>/vif-cache-<pod_iface>.json`.
pub fn vif_cache_path(private_dir: &Path, pod_iface: &str) -> PathBuf {
    private_dir.join(format!("vif-cache-{pod_iface}.json"))
}

/// `<private_dir>/interface-cache-<iface>.json` (`iface` = the VMI's
/// interface name).
pub fn interface_cache_path(private_dir: &Path, iface: &str) -> PathBuf {
    private_dir.join(format!("interface-cache-{iface}.json"))
}

/// Go's `net.IPNet` / `netlink.Addr` JSON: `IP` as text, `Mask` as base64
/// bytes (4 or 16).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoIpNet {
    /// Address text (`10.244.0.5`); empty for none.
    #[serde(rename = "IP", default)]
    pub ip: String,
    /// Netmask bytes, base64 (`////AA==` = 255.255.255.0).
    #[serde(rename = "Mask", default)]
    pub mask: Option<String>,
}

impl GoIpNet {
    /// The address, `None` when empty.
    ///
    /// # Errors
    /// Text that is not an IP address.
    pub fn addr(&self) -> Result<Option<IpAddr>, String> {
        if self.ip.is_empty() {
            return Ok(None);
        }
        self.ip
            .parse()
            .map(Some)
            .map_err(|_| format!("IP {:?} is not an IP address", self.ip))
    }

    /// Prefix length from `Mask` (count of leading one bits).
    ///
    /// # Errors
    /// Invalid base64, a length other than 4/16, or a non-contiguous mask.
    pub fn prefix_len(&self) -> Result<Option<u8>, String> {
        let Some(mask) = &self.mask else {
            return Ok(None);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(mask)
            .map_err(|e| format!("Mask {mask:?} is not base64: {e}"))?;
        if bytes.len() != 4 && bytes.len() != 16 {
            return Err(format!("Mask has {} bytes, want 4 or 16", bytes.len()));
        }
        let width = bytes.len() * 8;
        // Left-align the mask in 128 bits: ones then zeros when contiguous.
        let bits = bytes
            .iter()
            .fold(0u128, |acc, b| (acc << 8) | u128::from(*b))
            << (128 - width);
        let ones = bits.leading_ones() as usize;
        if bits.checked_shl(ones as u32).unwrap_or(0) != 0 {
            return Err(format!("Mask {mask:?} is not a contiguous netmask"));
        }
        u8::try_from(ones)
            .map(Some)
            .map_err(|_| "mask too long".into())
    }
}

/// Go's `netlink.Route` JSON, the fields DHCP uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoRoute {
    /// Destination; `null` = default route.
    #[serde(rename = "Dst", default)]
    pub dst: Option<GoIpNet>,
    /// Gateway text; empty or `null` = on-link.
    #[serde(rename = "Gw", default)]
    pub gw: Option<String>,
    /// Preferred source text; set on the kernel's route to the local subnet.
    #[serde(rename = "Src", default)]
    pub src: Option<String>,
}

/// `vif-cache-<podIface>.json`: the DHCP configuration phase 1 found
/// (bridge binding). JSON keys are Go field names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DhcpConfigCache {
    /// Pod interface name.
    #[serde(rename = "Name", default)]
    pub name: String,
    /// IPv4 address of the pod interface.
    #[serde(rename = "IP", default)]
    pub ip: Option<GoIpNet>,
    /// IPv6 address of the pod interface.
    #[serde(rename = "IPv6", default)]
    pub ipv6: Option<GoIpNet>,
    /// MAC of the pod interface, base64 of 6 bytes.
    #[serde(rename = "MAC", default)]
    pub mac: Option<String>,
    /// Server address the DHCP server advertises.
    #[serde(rename = "AdvertisingIPAddr", default)]
    pub advertising_ip_addr: Option<String>,
    /// IPv6 server address.
    #[serde(rename = "AdvertisingIPv6Addr", default)]
    pub advertising_ipv6_addr: Option<String>,
    /// Pod routes (`null` = none).
    #[serde(rename = "Routes", default)]
    pub routes: Option<Vec<GoRoute>>,
    /// Pod interface MTU.
    #[serde(rename = "Mtu", default)]
    pub mtu: u16,
    /// No IPAM on the pod network: no DHCP server.
    #[serde(rename = "IPAMDisabled", default)]
    pub ipam_disabled: bool,
    /// IPv4 gateway text.
    #[serde(rename = "Gateway", default)]
    pub gateway: Option<String>,
    /// `spec.subdomain` of the VMI.
    #[serde(rename = "Subdomain", default)]
    pub subdomain: String,
}

impl DhcpConfigCache {
    /// The MAC as 6 bytes.
    ///
    /// # Errors
    /// Not base64, or not 6 bytes.
    pub fn mac_bytes(&self) -> Result<Option<[u8; 6]>, String> {
        let Some(mac) = &self.mac else {
            return Ok(None);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(mac)
            .map_err(|e| format!("MAC {mac:?} is not base64: {e}"))?;
        <[u8; 6]>::try_from(bytes.as_slice())
            .map(Some)
            .map_err(|_| format!("MAC has {} bytes, want 6", bytes.len()))
    }

    /// The IPv4 address and prefix of the pod interface.
    ///
    /// # Errors
    /// An unparsable address or mask, or an IPv6 address in `IP`.
    pub fn ipv4(&self) -> Result<Option<(Ipv4Addr, u8)>, String> {
        let Some(net) = &self.ip else { return Ok(None) };
        match (net.addr()?, net.prefix_len()?) {
            (Some(IpAddr::V4(a)), Some(p)) if p <= 32 => Ok(Some((a, p))),
            (Some(IpAddr::V4(a)), None) => Ok(Some((a, 32))),
            (None, _) => Ok(None),
            (Some(other), _) => Err(format!("IP {other} is not an IPv4 address/mask")),
        }
    }
}

/// `interface-cache-<iface>.json`: KubeVirt's `api.Interface` JSON, of
/// which phase 1 fills only the MAC (`{"MAC":{"MAC":"02:..."}}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainInterfaceCache {
    /// `<mac address>`.
    #[serde(rename = "MAC", default)]
    pub mac: Option<GoMac>,
}

/// `api.MAC` JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoMac {
    /// Colon-separated MAC.
    #[serde(rename = "MAC", default)]
    pub mac: String,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, CacheError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |reason: String| CacheError::Read {
        path: path.into(),
        reason,
    };
    // Phase 1 writes a plain file: a symbolic link is not followed, and
    // a FIFO or device planted there neither blocks the open nor is read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => err("a symbolic link, not followed".into()),
            _ => err(e.to_string()),
        })?;
    if !file.metadata().map_err(|e| err(e.to_string()))?.is_file() {
        return Err(err("not a regular file".into()));
    }
    let mut text = Vec::new();
    file.take(MAX_CACHE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| CacheError::Read {
            path: path.into(),
            reason: e.to_string(),
        })?;
    if text.len() as u64 > MAX_CACHE_BYTES {
        return Err(CacheError::Corrupt {
            path: path.into(),
            reason: format!("larger than {MAX_CACHE_BYTES} bytes"),
        });
    }
    let de = &mut serde_json::Deserializer::from_slice(&text);
    serde_path_to_error::deserialize(de).map_err(|e| CacheError::Corrupt {
        path: path.into(),
        reason: format!("{}: {}", e.path(), e.inner()),
    })
}

/// Reads and checks `vif-cache-<pod_iface>.json`.
///
/// # Errors
/// [`CacheError`] naming the file when it is missing, not JSON, or has
/// an unparsable MAC, address or mask.
pub fn read_dhcp_config(
    private_dir: &Path,
    pod_iface: &str,
) -> Result<DhcpConfigCache, CacheError> {
    let path = vif_cache_path(private_dir, pod_iface);
    let cache: DhcpConfigCache = read_json(&path)?;
    let corrupt = |reason: String| CacheError::Corrupt {
        path: path.clone(),
        reason,
    };
    cache.mac_bytes().map_err(corrupt)?;
    cache.ipv4().map_err(corrupt)?;
    Ok(cache)
}

/// Reads `interface-cache-<iface>.json` and returns its MAC, parsed.
///
/// # Errors
/// [`CacheError`] naming the file when it is missing, not JSON, or its
/// MAC is absent or malformed.
pub fn read_domain_interface_mac(private_dir: &Path, iface: &str) -> Result<[u8; 6], CacheError> {
    let path = interface_cache_path(private_dir, iface);
    let cache: DomainInterfaceCache = read_json(&path)?;
    let text = cache.mac.map(|m| m.mac).unwrap_or_default();
    api::mac::parse_mac(&text).map_err(|e| CacheError::Corrupt {
        path: path.clone(),
        reason: format!("MAC.MAC: {e}"),
    })
}

/// Writes `value` as indented JSON, mode 0604, as phase 1 does (used by
/// the phase-1 stand-in, `ctl addinterface` and tests).
///
/// The launcher never writes through a link it did not make: the JSON goes
/// to a new file in the same directory (`.<name>.tmp-<pid>-<n>`, created
/// with `O_CREAT|O_EXCL|O_NOFOLLOW`, its mode set on the descriptor), which
/// is then renamed over `path`. A link planted at `path` is replaced, never
/// followed; a reader sees the old file or the whole new one.
///
/// # Errors
/// [`CacheError::Read`] naming the file: the I/O error (a directory at
/// `path`, a directory that is not writable, ...); nothing is left behind.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), CacheError> {
    use nix::fcntl::OFlag;
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    use std::sync::atomic::{AtomicU64, Ordering};
    /// Tells apart the temporary files of concurrent writes in one process.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let err = |e: std::io::Error| CacheError::Read {
        path: path.into(),
        reason: e.to_string(),
    };
    let text = serde_json::to_vec_pretty(value).map_err(|e| CacheError::Corrupt {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let name = path.file_name().ok_or_else(|| CacheError::Read {
        path: path.into(),
        reason: "no file name".into(),
    })?;
    // A name taken (by a stale file of a killed launcher, or one planted)
    // is skipped: O_EXCL never opens what is there.
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(
            ".tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = path.with_file_name(tmp_name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                attempt += 1;
            }
            Err(e) => return Err(err(e)),
        }
    };
    let written = file
        .write_all(&text)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(0o604)))
        .and_then(|()| {
            drop(file);
            std::fs::rename(&tmp, path)
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What virt-handler v1.6.6 writes for a bridge-bound pod interface
    /// (Go `json.MarshalIndent` of `cache.DHCPConfig`).
    const VIF: &str = r#"{
  "Name": "eth0",
  "IP": {"IP": "10.244.0.5", "Mask": "////AA==", "Label": "eth0", "Flags": 128, "Scope": 0,
         "Peer": null, "Broadcast": "10.244.0.255", "PreferedLft": 0, "ValidLft": 0, "LinkIndex": 0},
  "IPv6": {"IP": "", "Mask": null, "Label": "", "Flags": 0, "Scope": 0, "Peer": null,
           "Broadcast": null, "PreferedLft": 0, "ValidLft": 0, "LinkIndex": 0},
  "MAC": "qrvM3e7/",
  "AdvertisingIPAddr": "169.254.75.10",
  "AdvertisingIPv6Addr": "",
  "Routes": [
    {"LinkIndex": 3, "ILinkIndex": 0, "Scope": 0, "Dst": null, "Src": "", "Gw": "10.244.0.1",
     "MultiPath": null, "Protocol": 0, "Priority": 0, "Table": 254, "Type": 1, "Tos": 0, "Flags": 0}
  ],
  "Mtu": 1450,
  "IPAMDisabled": false,
  "Gateway": "10.244.0.1",
  "Subdomain": ""
}"#;

    #[test]
    fn reads_virt_handler_vif_cache() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("vif-cache-eth0.json"), VIF).unwrap();
        let c = read_dhcp_config(dir.path(), "eth0").unwrap();
        assert_eq!(c.ipv4().unwrap(), Some((Ipv4Addr::new(10, 244, 0, 5), 24)));
        assert_eq!(
            c.mac_bytes().unwrap(),
            Some([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])
        );
        assert_eq!(c.mtu, 1450);
        assert_eq!(c.advertising_ip_addr.as_deref(), Some("169.254.75.10"));
        let routes = c.routes.unwrap();
        assert_eq!(routes.len(), 1);
        assert!(routes[0].dst.is_none());
        assert_eq!(routes[0].gw.as_deref(), Some("10.244.0.1"));
    }

    #[test]
    fn missing_cache_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_dhcp_config(dir.path(), "eth0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("vif-cache-eth0.json"), "{e}");
        assert!(e.contains("No such file"), "{e}");
    }

    #[test]
    fn corrupt_cache_names_the_file_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("vif-cache-eth0.json");
        std::fs::write(&p, "{\"Mtu\": \"big\"}").unwrap();
        let e = read_dhcp_config(dir.path(), "eth0")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("vif-cache-eth0.json") && e.contains("Mtu"),
            "{e}"
        );
        std::fs::write(&p, "{\"MAC\": \"qrvM\"}").unwrap();
        let e = read_dhcp_config(dir.path(), "eth0")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("corrupt") && e.contains("MAC has 3 bytes"),
            "{e}"
        );
        std::fs::write(
            &p,
            "{\"IP\": {\"IP\": \"10.0.0.1\", \"Mask\": \"/wD/AA==\"}}",
        )
        .unwrap();
        let e = read_dhcp_config(dir.path(), "eth0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("contiguous"), "{e}");
        std::fs::write(&p, "not json").unwrap();
        let e = read_dhcp_config(dir.path(), "eth0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("vif-cache-eth0.json: corrupt"), "{e}");
    }

    #[test]
    fn domain_interface_cache_mac() {
        let dir = tempfile::tempdir().unwrap();
        let p = interface_cache_path(dir.path(), "default");
        std::fs::write(&p, r#"{"MAC":{"MAC":"02:00:00:AA:bb:01"},"Alias":null}"#).unwrap();
        assert_eq!(
            read_domain_interface_mac(dir.path(), "default").unwrap(),
            [2, 0, 0, 0xaa, 0xbb, 1]
        );
        std::fs::write(&p, r#"{"MAC":null}"#).unwrap();
        let e = read_domain_interface_mac(dir.path(), "default")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("interface-cache-default.json") && e.contains("MAC.MAC"),
            "{e}"
        );
    }

    #[test]
    fn links_at_the_cache_path_are_replaced_never_followed() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "secret").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = DomainInterfaceCache {
            mac: Some(GoMac {
                mac: "02:00:00:00:00:01".into(),
            }),
        };
        // A symbolic link, then a hard link, to the victim at the path.
        let p = interface_cache_path(dir.path(), "default");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let e = read_domain_interface_mac(dir.path(), "default").unwrap_err();
        assert!(
            e.to_string().ends_with("a symbolic link, not followed"),
            "{e}"
        );
        write_json(&p, &c).unwrap();
        let p2 = interface_cache_path(dir.path(), "second");
        std::fs::hard_link(&victim, &p2).unwrap();
        write_json(&p2, &c).unwrap();
        for p in [&p, &p2] {
            let m = std::fs::symlink_metadata(p).unwrap();
            assert!(m.is_file() && m.permissions().mode() & 0o777 == 0o604);
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
        let m = std::fs::metadata(&victim).unwrap();
        assert_eq!((m.permissions().mode() & 0o777, m.nlink()), (0o600, 1));
        assert_eq!(
            read_domain_interface_mac(dir.path(), "second").unwrap(),
            [2, 0, 0, 0, 0, 1]
        );
        // A FIFO there is refused at once, not waited on.
        let fifo = interface_cache_path(dir.path(), "fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read_domain_interface_mac(dir.path(), "fifo").unwrap_err();
        assert!(e.to_string().ends_with("not a regular file"), "{e}");
        // Nothing but the caches and the victim is left (no temporary).
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "interface-cache-default.json",
                "interface-cache-fifo.json",
                "interface-cache-second.json",
                "victim"
            ]
        );
    }

    #[test]
    fn write_then_read_round_trips_with_mode_0604() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = interface_cache_path(dir.path(), "default");
        let c = DomainInterfaceCache {
            mac: Some(GoMac {
                mac: "02:00:00:00:00:01".into(),
            }),
        };
        write_json(&p, &c).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o604
        );
        assert_eq!(
            read_domain_interface_mac(dir.path(), "default").unwrap(),
            [2, 0, 0, 0, 0, 1]
        );
    }

    /// A link planted at the cache's path (pointing at a file the launcher
    /// must not write) is replaced by the cache, never written through; a
    /// stale temporary name is skipped; a directory at the path is an
    /// error naming the file, and no temporary file is left behind.
    #[test]
    fn write_never_follows_a_link_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let p = interface_cache_path(dir.path(), "default");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let c = DomainInterfaceCache {
            mac: Some(GoMac {
                mac: "02:00:00:00:00:02".into(),
            }),
        };
        write_json(&p, &c).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&p).unwrap().is_symlink());
        assert_eq!(
            read_domain_interface_mac(dir.path(), "default").unwrap(),
            [2, 0, 0, 0, 0, 2]
        );
        // A dangling link is replaced too (a write through it would create
        // the file it names).
        let target = outside.path().join("made");
        let q = vif_cache_path(dir.path(), "eth0");
        std::os::unix::fs::symlink(&target, &q).unwrap();
        write_json(&q, &c).unwrap();
        assert!(!target.exists());
        assert!(std::fs::symlink_metadata(&q).unwrap().is_file());
        // A directory at the path: refused, named, nothing left.
        let d = dir.path().join("interface-cache-dir.json");
        std::fs::create_dir(&d).unwrap();
        let e = write_json(&d, &c).unwrap_err().to_string();
        assert!(e.contains("interface-cache-dir.json"), "{e}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.iter().all(|n| !n.contains(".tmp-")),
            "temporary files left: {names:?}"
        );
    }
}
