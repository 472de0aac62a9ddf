//! Where each SR-IOV interface's virtual function is on the host: the
//! launcher's side of KubeVirt v1.6.6's SR-IOV host devices
//! (`virtwrap/device/hostdevice/sriov`, `pkg/network/downwardapi`).
//!
//! virt-controller copies the device-info Multus reports for each network
//! (the pod's `k8s.v1.cni.cncf.io/network-status` annotation, matched to
//! the VMI network through its pod interface name) into the pod annotation
//! `kubevirt.io/network-info`, which kubelet projects into the launcher as
//! the downward API file `/etc/podinfo/network-info`:
//!
//! ```json
//! {"interfaces":[{"network":"red","deviceInfo":{"type":"pci","version":"1.1.0",
//!   "pci":{"pci-address":"0000:81:11.1"}}}]}
//! ```
//!
//! `network` is the VMI's network (= interface) name. When that file is
//! absent or lists no PCI address at all, KubeVirt falls back to the
//! device plugin's environment: `KUBEVIRT_RESOURCE_NAME_<interface>` names
//! the resource, `PCIDEVICE_<RESOURCE>` (upper case, `.` and `/` → `_`)
//! lists its addresses separated by commas; each address is handed out
//! once. An interface left without an address is an error naming it and
//! the file, never a guess.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;
use serde::Deserialize;

/// The network-info downward API file in a launcher pod (KubeVirt's
/// `downwardapi.MountPath` + `NetworkInfoVolumePath`).
pub const NETWORK_INFO_PATH: &str = "/etc/podinfo/network-info";

/// Largest network-info file read (a pod annotation is at most 256 KiB).
pub const MAX_NETWORK_INFO_BYTES: u64 = 1 << 20;

/// How long an existing but empty network-info file is polled in a pod
/// before it is an error (KubeVirt's 1 s, every 100 ms: kubelet may not
/// have written the annotation yet).
pub const POPULATE_TIMEOUT: Duration = Duration::from_secs(1);

/// `downwardapi.NetworkInfo`.
#[derive(Debug, Default, Deserialize)]
struct NetworkInfo {
    #[serde(default)]
    interfaces: Option<Vec<DownwardInterface>>,
}

/// `downwardapi.Interface`: a VMI network and its Multus device-info.
#[derive(Debug, Deserialize)]
struct DownwardInterface {
    network: String,
    #[serde(rename = "deviceInfo", default)]
    device_info: Option<DeviceInfo>,
}

/// The device-info specification's object (`k8s.cni.cncf.io/v1`
/// `DeviceInfo`); only its PCI part is read.
#[derive(Debug, Deserialize)]
struct DeviceInfo {
    #[serde(default)]
    pci: Option<PciDevice>,
}

/// `PciDevice` of the device-info specification.
#[derive(Debug, Deserialize)]
struct PciDevice {
    #[serde(rename = "pci-address", default)]
    pci_address: Option<String>,
}

/// Why the host address of an SR-IOV interface's VF was not found. One
/// line naming the file (and its field), the VMI interface field or the
/// environment variable.
#[derive(Debug, thiserror::Error)]
pub enum SriovError {
    /// The network-info text is not a JSON object, or does not decode.
    #[error("{file}: not a network-info document: {reason}")]
    NotDocument {
        /// The file.
        file: String,
        /// What serde or the shape check says.
        reason: String,
    },
    /// A field of the network-info document has the wrong type.
    #[error("{file}: {field}: {reason}")]
    Field {
        /// The file.
        file: String,
        /// The JSON path (`interfaces[0].deviceInfo.pci.pci-address`).
        field: String,
        /// What serde says.
        reason: String,
    },
    /// One network listed twice in `interfaces`.
    #[error("{file}: interfaces[{index}].network: network {network:?} is listed twice")]
    ListedTwice {
        /// The file.
        file: String,
        /// Index of the second entry.
        index: usize,
        /// The network's name.
        network: String,
    },
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The path is a FIFO, device or directory.
    #[error("{file}: not a regular file")]
    NotRegular {
        /// The file.
        file: String,
    },
    /// Larger than [`MAX_NETWORK_INFO_BYTES`].
    #[error("{file}: larger than {max} bytes")]
    TooLarge {
        /// The file.
        file: String,
        /// The limit in bytes.
        max: u64,
    },
    /// Still empty after the populate wait.
    #[error("{file}: empty: the network-info downward API file is not populated")]
    Empty {
        /// The file.
        file: String,
    },
    /// The file lists PCI addresses, but none for this network.
    #[error("{field}: {file}: no PCI address for SR-IOV network {network:?} (no interfaces[].network of that name with deviceInfo.pci.pci-address)")]
    NotListed {
        /// `spec.domain.devices.interfaces[i].sriov`.
        field: String,
        /// The file.
        file: String,
        /// The network's name.
        network: String,
    },
    /// No file with addresses and no environment to fall back to.
    #[error("{field}: {file}: no PCI address for SR-IOV network {network:?} (the file lists no deviceInfo.pci.pci-address)")]
    NoneListed {
        /// `spec.domain.devices.interfaces[i].sriov`.
        field: String,
        /// The file.
        file: String,
        /// The network's name.
        network: String,
    },
    /// An address is not `dddd:bb:ss.f`.
    #[error("{source_of}: {address:?} is not a PCI address of the form dddd:bb:ss.f")]
    BadAddress {
        /// Where it was read: the file and its field, or the variable.
        source_of: String,
        /// The address as written.
        address: String,
    },
    /// The file lists none and the device plugin's resource variable
    /// `KUBEVIRT_RESOURCE_NAME_<interface>` is not set.
    #[error("{field}: no host PCI address for SR-IOV interface {interface:?}: {file} lists none and {variable} is not set")]
    NoResourceName {
        /// `spec.domain.devices.interfaces[i].sriov`.
        field: String,
        /// The interface's name.
        interface: String,
        /// The network-info file.
        file: String,
        /// `KUBEVIRT_RESOURCE_NAME_<interface>`.
        variable: String,
    },
    /// The resource's address variable is not set.
    #[error("{field}: {variable} (the addresses of resource {resource:?}) is not set")]
    ResourceUnset {
        /// `spec.domain.devices.interfaces[i].sriov`.
        field: String,
        /// `PCIDEVICE_<RESOURCE>`.
        variable: String,
        /// The resource's name.
        resource: String,
    },
    /// Every address of the resource is taken by an earlier interface.
    #[error("{field}: {variable} has no address left for SR-IOV interface {interface:?}")]
    NoAddressLeft {
        /// `spec.domain.devices.interfaces[i].sriov`.
        field: String,
        /// `PCIDEVICE_<RESOURCE>`.
        variable: String,
        /// The interface's name.
        interface: String,
    },
}

/// The PCI addresses a network-info file gives, by VMI network name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkInfoPci {
    /// The file, for messages.
    pub file: String,
    /// Network name → (index in `interfaces`, `pci-address` as written).
    pub by_network: BTreeMap<String, (usize, String)>,
}

/// Parses a network-info file's text.
///
/// # Errors
/// [`SriovError::NotDocument`], [`SriovError::Field`],
/// [`SriovError::ListedTwice`]: one line naming `file` and, for a JSON
/// that does not fit the format, the field.
pub fn parse_network_info(file: &str, text: &[u8]) -> Result<NetworkInfoPci, SriovError> {
    // serde reads a struct from a JSON array too (by position); the
    // format is an object, as Go's decoder insists.
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(SriovError::NotDocument {
            file: file.to_owned(),
            reason: "a JSON object is expected".into(),
        });
    }
    let de = &mut serde_json::Deserializer::from_slice(text);
    let info: NetworkInfo = serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner().to_string();
        match e.path().to_string().as_str() {
            "." | "?" => SriovError::NotDocument {
                file: file.to_owned(),
                reason: inner,
            },
            p => SriovError::Field {
                file: file.to_owned(),
                field: p.to_owned(),
                reason: inner,
            },
        }
    })?;
    let mut out = NetworkInfoPci {
        file: file.to_owned(),
        by_network: BTreeMap::new(),
    };
    let mut seen = BTreeSet::new();
    for (i, iface) in info.interfaces.unwrap_or_default().into_iter().enumerate() {
        if !seen.insert(iface.network.clone()) {
            return Err(SriovError::ListedTwice {
                file: file.to_owned(),
                index: i,
                network: iface.network,
            });
        }
        let addr = iface
            .device_info
            .and_then(|d| d.pci)
            .and_then(|p| p.pci_address)
            .filter(|a| !a.is_empty());
        if let Some(a) = addr {
            out.by_network.insert(iface.network, (i, a));
        }
    }
    Ok(out)
}

/// Opens a network-info file for reading without blocking and without
/// following links: `O_NONBLOCK` (a FIFO in its place must not hang the
/// launcher: its type is then checked with `fstat` before any read) and
/// `O_NOFOLLOW` for any path but the pod's own downward API file
/// ([`NETWORK_INFO_PATH`], whose entries kubelet makes as links into its
/// `..data` directory). Issue 19.
fn open_network_info(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = nix::fcntl::OFlag::O_NONBLOCK.bits();
    if path != Path::new(NETWORK_INFO_PATH) {
        flags |= nix::fcntl::OFlag::O_NOFOLLOW.bits();
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
}

/// Reads a network-info file. `Ok(None)` when it does not exist and
/// `missing_ok` (a pod without SR-IOV networks from Multus: the
/// environment fallback applies); an existing empty file is polled for
/// `populate` before it is an error. Opened as [`open_network_info`] says:
/// a FIFO, a device or (for a user's file) a link is refused at once.
///
/// # Errors
/// One line naming the file: unreadable or missing (unless `missing_ok`)
/// ([`SriovError::Read`]), not a regular file, larger than
/// [`MAX_NETWORK_INFO_BYTES`], still empty, or malformed (as
/// [`parse_network_info`]).
pub fn read_network_info(
    path: &Path,
    missing_ok: bool,
    populate: Duration,
) -> Result<Option<NetworkInfoPci>, SriovError> {
    let file = path.display().to_string();
    let start = Instant::now();
    loop {
        let f = match open_network_info(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing_ok => return Ok(None),
            Err(source) => return Err(SriovError::Read { file, source }),
        };
        let read = |source| SriovError::Read {
            file: file.clone(),
            source,
        };
        if !f.metadata().map_err(read)?.is_file() {
            return Err(SriovError::NotRegular { file });
        }
        let mut buf = Vec::new();
        f.take(MAX_NETWORK_INFO_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(read)?;
        if buf.len() as u64 > MAX_NETWORK_INFO_BYTES {
            return Err(SriovError::TooLarge {
                file,
                max: MAX_NETWORK_INFO_BYTES,
            });
        }
        if !buf.iter().all(u8::is_ascii_whitespace) {
            return parse_network_info(&file, &buf).map(Some);
        }
        if start.elapsed() >= populate {
            return Err(SriovError::Empty { file });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads one environment variable (`std::env::var(..).ok()` in a pod).
pub type EnvLookup = dyn Fn(&str) -> Option<String>;

/// The device plugin's address variable for `resource`
/// (`PCIDEVICE_INTEL_COM_SRIOV` for `intel.com/sriov`).
pub fn resource_env_var(resource: &str) -> String {
    format!(
        "PCIDEVICE_{}",
        resource.to_uppercase().replace(['/', '.'], "_")
    )
}

/// The host PCI address of each live SR-IOV interface of `vmi`, by
/// interface name (for [`converter::ConvertContext::sriov_pci`]): from
/// `info` when it lists any PCI address, else — when `env` is given (pod
/// mode) — from the device plugin's variables, each address used once.
/// Every address is checked to be `dddd:bb:ss.f`.
///
/// # Errors
/// [`SriovError`], one line naming the interface field and where the
/// address was looked for (the file and its field, or the variable): no
/// address for an interface, a malformed address, a resource variable
/// missing or with no address left.
pub fn host_addresses(
    vmi: &VirtualMachineInstance,
    info: Option<&NetworkInfoPci>,
    file: &str,
    env: Option<&EnvLookup>,
) -> Result<BTreeMap<String, String>, SriovError> {
    let sriov = converter::sriov::live_interfaces(vmi);
    let mut out = BTreeMap::new();
    if sriov.is_empty() {
        return Ok(out);
    }
    let check = |what: &str, addr: &str| {
        converter::interfaces::pci_address(what, addr)
            .map(|_| ())
            .map_err(|_| SriovError::BadAddress {
                source_of: what.to_owned(),
                address: addr.to_owned(),
            })
    };
    match (info.filter(|i| !i.by_network.is_empty()), env) {
        (Some(info), _) => {
            for (i, iface) in sriov {
                let Some((k, addr)) = info.by_network.get(&iface.name) else {
                    return Err(SriovError::NotListed {
                        field: format!("spec.domain.devices.interfaces[{i}].sriov"),
                        file: info.file.clone(),
                        network: iface.name.clone(),
                    });
                };
                check(
                    &format!("{}: interfaces[{k}].deviceInfo.pci.pci-address", info.file),
                    addr,
                )?;
                out.insert(iface.name.clone(), addr.clone());
            }
        }
        (None, Some(env)) => {
            let mut used = BTreeSet::new();
            for (i, iface) in sriov {
                let path = format!("spec.domain.devices.interfaces[{i}].sriov");
                let name_var = format!("KUBEVIRT_RESOURCE_NAME_{}", iface.name);
                let Some(resource) = env(&name_var) else {
                    return Err(SriovError::NoResourceName {
                        field: path,
                        interface: iface.name.clone(),
                        file: file.to_owned(),
                        variable: name_var,
                    });
                };
                let var = resource_env_var(&resource);
                let Some(list) = env(&var) else {
                    return Err(SriovError::ResourceUnset {
                        field: path,
                        variable: var,
                        resource,
                    });
                };
                let addrs: Vec<&str> = list
                    .trim_end_matches(',')
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .collect();
                for a in &addrs {
                    check(&var, a)?;
                }
                let Some(addr) = addrs.into_iter().find(|a| !used.contains(*a)) else {
                    return Err(SriovError::NoAddressLeft {
                        field: path,
                        variable: var,
                        interface: iface.name.clone(),
                    });
                };
                used.insert(addr.to_owned());
                out.insert(iface.name.clone(), addr.to_owned());
            }
        }
        (None, None) => {
            let (i, iface) = sriov[0];
            return Err(SriovError::NoneListed {
                field: format!("spec.domain.devices.interfaces[{i}].sriov"),
                file: file.to_owned(),
                network: iface.name.clone(),
            });
        }
    }
    Ok(out)
}

/// Pod mode: the addresses from [`NETWORK_INFO_PATH`], else the process
/// environment (see [`host_addresses`]).
///
/// # Errors
/// As [`read_network_info`] and [`host_addresses`].
pub fn pod_host_addresses(
    vmi: &VirtualMachineInstance,
) -> Result<BTreeMap<String, String>, SriovError> {
    if converter::sriov::live_interfaces(vmi).is_empty() {
        return Ok(BTreeMap::new());
    }
    let info = read_network_info(Path::new(NETWORK_INFO_PATH), true, POPULATE_TIMEOUT)?;
    let env = |k: &str| std::env::var(k).ok();
    host_addresses(vmi, info.as_ref(), NETWORK_INFO_PATH, Some(&env))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const VMI: &str = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vf}
spec:
  domain:
    memory: {guest: 64Mi}
    devices:
      interfaces:
      - {name: default, masquerade: {}}
      - {name: red, sriov: {}}
      - {name: blue, sriov: {}}
  networks:
  - {name: default, pod: {}}
  - {name: red, multus: {networkName: red-net}}
  - {name: blue, multus: {networkName: ns/blue-net}}
"#;

    fn vmi() -> VirtualMachineInstance {
        api::load_vmi(VMI.as_bytes(), api::Arch::Amd64).unwrap()
    }

    /// What virt-controller writes (a non-SR-IOV network has no deviceInfo).
    const INFO: &str = r#"{"interfaces":[
        {"network":"blue","deviceInfo":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:81:11.2"}}},
        {"network":"default"},
        {"network":"red","deviceInfo":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:81:11.1","pf-pci-address":"0000:81:00.0"}}}]}"#;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn network_info_gives_each_sriov_network_its_vf() {
        let info = parse_network_info("/f", INFO.as_bytes()).unwrap();
        let got = host_addresses(&vmi(), Some(&info), "/f", None).unwrap();
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            [
                ("blue".to_owned(), "0000:81:11.2".to_owned()),
                ("red".to_owned(), "0000:81:11.1".to_owned())
            ]
        );
        // The file wins over the environment when it has any address.
        let e = env(&[("KUBEVIRT_RESOURCE_NAME_red", "x")]);
        let got = host_addresses(&vmi(), Some(&info), "/f", Some(&e)).unwrap();
        assert_eq!(got["red"], "0000:81:11.1");
    }

    #[test]
    fn device_plugin_environment_is_the_fallback() {
        let e = env(&[
            ("KUBEVIRT_RESOURCE_NAME_red", "intel.com/sriov_a"),
            ("KUBEVIRT_RESOURCE_NAME_blue", "intel.com/sriov_a"),
            ("PCIDEVICE_INTEL_COM_SRIOV_A", "0000:81:11.1,0000:81:11.2,"),
        ]);
        let empty = parse_network_info("/f", br#"{"interfaces":[{"network":"default"}]}"#).unwrap();
        for info in [None, Some(&empty)] {
            let got = host_addresses(&vmi(), info, "/f", Some(&e)).unwrap();
            assert_eq!(got["red"], "0000:81:11.1");
            assert_eq!(got["blue"], "0000:81:11.2");
        }
        assert_eq!(
            resource_env_var("intel.com/sriov_a"),
            "PCIDEVICE_INTEL_COM_SRIOV_A"
        );
    }

    #[test]
    fn bad_input_is_one_line_naming_file_field_or_variable() {
        let info = |t: &str| parse_network_info("/etc/podinfo/network-info", t.as_bytes());
        type Found = Result<BTreeMap<String, String>, SriovError>;
        let cases: Vec<(Found, &str)> = vec![
            (
                info("{not json").map(|_| BTreeMap::new()),
                "/etc/podinfo/network-info: not a network-info document: key must be a string at line 1 column 2",
            ),
            (
                info(" [[[{}]]]").map(|_| BTreeMap::new()),
                "/etc/podinfo/network-info: not a network-info document: a JSON object is expected",
            ),
            (
                info(r#"{"interfaces":[{"network":"red","deviceInfo":{"pci":{"pci-address":7}}}]}"#)
                    .map(|_| BTreeMap::new()),
                "/etc/podinfo/network-info: interfaces[0].deviceInfo.pci.pci-address: invalid type: integer `7`, expected a string at line 1 column 68",
            ),
            (
                info(r#"{"interfaces":[{"network":"red"},{"network":"red"}]}"#).map(|_| BTreeMap::new()),
                "/etc/podinfo/network-info: interfaces[1].network: network \"red\" is listed twice",
            ),
            (
                host_addresses(
                    &vmi(),
                    Some(&info(r#"{"interfaces":[{"network":"red","deviceInfo":{"pci":{"pci-address":"0000:81:11.1"}}}]}"#).unwrap()),
                    "/etc/podinfo/network-info",
                    None,
                ),
                "spec.domain.devices.interfaces[2].sriov: /etc/podinfo/network-info: no PCI address for SR-IOV network \"blue\" (no interfaces[].network of that name with deviceInfo.pci.pci-address)",
            ),
            (
                host_addresses(
                    &vmi(),
                    Some(&info(r#"{"interfaces":[{"network":"red","deviceInfo":{"pci":{"pci-address":"0000:81:11.1"}}},{"network":"blue","deviceInfo":{"pci":{"pci-address":"81:11.2"}}}]}"#).unwrap()),
                    "/etc/podinfo/network-info",
                    None,
                ),
                "/etc/podinfo/network-info: interfaces[1].deviceInfo.pci.pci-address: \"81:11.2\" is not a PCI address of the form dddd:bb:ss.f",
            ),
            (
                host_addresses(&vmi(), None, "/etc/podinfo/network-info", None),
                "spec.domain.devices.interfaces[1].sriov: /etc/podinfo/network-info: no PCI address for SR-IOV network \"red\" (the file lists no deviceInfo.pci.pci-address)",
            ),
            (
                host_addresses(&vmi(), None, "/etc/podinfo/network-info", Some(&env(&[]))),
                "spec.domain.devices.interfaces[1].sriov: no host PCI address for SR-IOV interface \"red\": /etc/podinfo/network-info lists none and KUBEVIRT_RESOURCE_NAME_red is not set",
            ),
            (
                host_addresses(&vmi(), None, "/f", Some(&env(&[("KUBEVIRT_RESOURCE_NAME_red", "a.b/c")]))),
                "spec.domain.devices.interfaces[1].sriov: PCIDEVICE_A_B_C (the addresses of resource \"a.b/c\") is not set",
            ),
            (
                host_addresses(&vmi(), None, "/f", Some(&env(&[
                    ("KUBEVIRT_RESOURCE_NAME_red", "r"),
                    ("KUBEVIRT_RESOURCE_NAME_blue", "r"),
                    ("PCIDEVICE_R", "0000:81:11.1"),
                ]))),
                "spec.domain.devices.interfaces[2].sriov: PCIDEVICE_R has no address left for SR-IOV interface \"blue\"",
            ),
            (
                host_addresses(&vmi(), None, "/f", Some(&env(&[
                    ("KUBEVIRT_RESOURCE_NAME_red", "r"),
                    ("PCIDEVICE_R", "0000:81:11.1,zz"),
                ]))),
                "PCIDEVICE_R: \"zz\" is not a PCI address of the form dddd:bb:ss.f",
            ),
        ];
        for (got, want) in cases {
            let e = got.unwrap_err().to_string();
            assert_eq!(e, want);
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn files_missing_empty_or_huge() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("network-info");
        assert!(matches!(
            read_network_info(&missing, true, Duration::ZERO),
            Ok(None)
        ));
        let e = read_network_info(&missing, false, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}: ", missing.display())), "{e}");
        std::fs::write(&missing, "\n").unwrap();
        let e = read_network_info(&missing, true, Duration::from_millis(150))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "{}: empty: the network-info downward API file is not populated",
                missing.display()
            )
        );
        std::fs::write(&missing, vec![b' '; (MAX_NETWORK_INFO_BYTES + 1) as usize]).unwrap();
        let e = read_network_info(&missing, true, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("larger than 1048576 bytes"), "{e}");
        std::fs::write(&missing, INFO).unwrap();
        let got = read_network_info(&missing, false, Duration::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!(got.by_network["red"], (2, "0000:81:11.1".to_owned()));
        let e = read_network_info(dir.path(), false, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a regular file") || e.contains("Is a directory"),
            "{e}"
        );
        // Issue 19: a FIFO in the file's place hung the launcher in open(2).
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let f = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_network_info(&f, false, Duration::ZERO));
        });
        let e = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a FIFO must not hang the reader")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        // A link the user's path goes through is refused, not followed.
        let real = dir.path().join("real");
        std::fs::write(&real, "{}").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = read_network_info(&link, false, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.contains("link"), "{e}");
    }
}
