//! `--pvc`: the claims of persistentVolumeClaim, dataVolume and ephemeral
//! volumes (image files, claim directories, block devices), checked, and
//! the facts virt-handler writes into the VMI's status for them.

use std::path::PathBuf;

use api::VirtualMachineInstance;

use super::volumes::refuse_foreign_entries;
use crate::error::LauncherError;

/// One `--pvc VOLUME=PATH[,capacity=QUANTITY][,filesystem-overhead=FRACTION][,preallocated]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PvcArg {
    /// The volume's name in `spec.volumes`.
    pub volume: String,
    /// An image file, a directory (filesystem-mode claim) or a block device.
    pub path: PathBuf,
    /// The claim's size (a Kubernetes quantity): its status capacity and
    /// request, what a created disk.img gets.
    pub capacity: Option<api::Quantity>,
    /// The claim's `filesystemOverhead` (0 to 1; CDI's default is 0.055).
    pub filesystem_overhead: Option<f64>,
    /// A preallocated (thick) claim: no `discard='unmap'`, falloc growth.
    pub preallocated: bool,
}

impl PvcArg {
    /// Parses the flag's value. A path containing a comma cannot be given.
    ///
    /// # Errors
    /// A message naming the bad part.
    pub fn parse(s: &str) -> Result<PvcArg, String> {
        let form = "VOLUME=PATH[,capacity=QUANTITY][,filesystem-overhead=FRACTION][,preallocated]";
        let (volume, rest) = s
            .split_once('=')
            .filter(|(v, r)| !v.is_empty() && !r.is_empty())
            .ok_or_else(|| format!("{s:?} is not {form}"))?;
        let mut parts = rest.split(',');
        let path = parts
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("{s:?} is not {form}"))?;
        let mut arg = PvcArg {
            volume: volume.to_owned(),
            path: PathBuf::from(path),
            capacity: None,
            filesystem_overhead: None,
            preallocated: false,
        };
        for opt in parts {
            match opt.split_once('=') {
                Some(("capacity", q)) => {
                    let q = api::Quantity::parse(q).map_err(|e| format!("capacity={q}: {e}"))?;
                    q.to_bytes().map_err(|e| format!("capacity: {e}"))?;
                    arg.capacity = Some(q);
                }
                Some(("filesystem-overhead", f)) => {
                    let x = f
                        .parse::<f64>()
                        .ok()
                        .filter(|x| (0.0..=1.0).contains(x))
                        .ok_or_else(|| format!("filesystem-overhead={f}: not a fraction from 0 to 1"))?;
                    arg.filesystem_overhead = Some(x);
                }
                None if opt == "preallocated" => arg.preallocated = true,
                _ => return Err(format!("{opt:?} is not capacity=QUANTITY, filesystem-overhead=FRACTION or preallocated (form: {form})")),
            }
        }
        Ok(arg)
    }
}

/// What a `--pvc` path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimSource {
    /// A raw image, bind-mounted at `vmi-disks/<vol>/disk.img`.
    File,
    /// A filesystem-mode claim, bind-mounted at `vmi-disks/<vol>/`.
    Dir,
    /// A block-mode claim, a node `/dev/<vol>` in the launcher's private `/dev`.
    Block,
}

/// A checked `--pvc`: volume, absolute path, kind, read-only.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The volume.
    pub volume: String,
    /// The canonical path on the host.
    pub path: PathBuf,
    /// What it is.
    pub source: ClaimSource,
    /// Ephemeral volume or read-only claim: mounted read-only.
    pub read_only: bool,
}

/// Checks the `--pvc` claims: each names a persistentVolumeClaim,
/// dataVolume or ephemeral volume, once; every such volume has one; the path
/// is a regular file, a directory or a block device. Ephemeral volumes and
/// read-only claims are mounted read-only, so the guest can never write
/// them; a directory without disk.img needs the claim's size.
pub(crate) fn pvc_claims(
    vmi: &VirtualMachineInstance,
    s: &super::StandaloneArgs,
) -> Result<Vec<Claim>, LauncherError> {
    let mut out: Vec<Claim> = Vec::new();
    // Names first, for every flag, so a duplicate or unknown volume is
    // reported as such rather than through a later flag's path problem.
    let mut seen = std::collections::BTreeSet::new();
    for p in &s.pvcs {
        let name = &p.volume;
        if let Some(q) = &p.capacity {
            // A disk image needs at least 1 MiB (KubeVirt aligns sizes down
            // to it); said here, before anything starts.
            if q.to_bytes().map_or(true, |b| b < (1 << 20)) {
                return Err(LauncherError::input_at(
                    format!("--pvc {name}=...,capacity={q}"),
                    format!("the size for volume {name} is too low, must be at least 1MiB"),
                ));
            }
        }
        if !vmi.spec.volumes.iter().any(|v| &v.name == name) {
            return Err(LauncherError::input_at(
                format!("--pvc {name}=..."),
                format!("the VMI has no volume named {name:?}"),
            ));
        }
        if !seen.insert(name) {
            return Err(LauncherError::input(format!(
                "--pvc {name}=... is given twice"
            )));
        }
    }
    for p in &s.pvcs {
        let name = &p.volume;
        let Some(v) = vmi.spec.volumes.iter().find(|v| &v.name == name) else {
            return Err(LauncherError::input_at(
                format!("--pvc {name}=..."),
                format!("the VMI has no volume named {name:?}"),
            ));
        };
        let read_only = v.ephemeral.is_some()
            || v.persistent_volume_claim
                .as_ref()
                .is_some_and(|p| p.read_only);
        if v.persistent_volume_claim.is_none() && v.data_volume.is_none() && v.ephemeral.is_none() {
            return Err(LauncherError::input_at(format!("--pvc {name}=..."), format!("volume {name:?} is not a persistentVolumeClaim, dataVolume or ephemeral volume")));
        }
        if out.iter().any(|c| &c.volume == name) {
            return Err(LauncherError::input(format!(
                "--pvc {name}=... is given twice"
            )));
        }
        let file = &p.path;
        let field = format!("--pvc {name}={}", file.display());
        let source = match super::given::open(&field, file, true)?.1 {
            super::given::GivenKind::File => ClaimSource::File,
            super::given::GivenKind::Dir => ClaimSource::Dir,
            super::given::GivenKind::Block => ClaimSource::Block,
        };
        let abs = std::fs::canonicalize(file)
            .map_err(|e| LauncherError::input(format!("{}: {e}", file.display())))?;
        if source == ClaimSource::Dir {
            refuse_foreign_entries(
                &format!("--pvc {name}={}", file.display()),
                &abs,
                &["disk.img", "lost+found"],
            )?;
            let img = abs.join("disk.img");
            let has_image = std::fs::symlink_metadata(&img).is_ok();
            let status_size = storage::pvc::info(vmi, name)
                .map_err(LauncherError::from)?
                .is_some_and(|i| i.capacity.is_some() || i.requests.is_some());
            if !has_image && p.capacity.is_none() && !status_size {
                return Err(LauncherError::input_at(format!("--pvc {name}={}", file.display()), format!("the claim has no disk.img and its size is unknown: give it as --pvc {name}={},capacity=QUANTITY", file.display())));
            }
            if read_only && !has_image {
                return Err(LauncherError::input_at(
                    format!("--pvc {name}={}", file.display()),
                    "a read-only claim needs its disk.img (it cannot be created)",
                ));
            }
        }
        out.push(Claim {
            volume: name.clone(),
            path: abs,
            source,
            read_only,
        });
    }
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let kind = if v.persistent_volume_claim.is_some() {
            "persistentVolumeClaim"
        } else if v.data_volume.is_some() {
            "dataVolume"
        } else if v.ephemeral.is_some() {
            "ephemeral"
        } else {
            continue;
        };
        if !out.iter().any(|c| c.volume == v.name) {
            return Err(LauncherError::input_at(format!("spec.volumes[{i}].{kind}"), format!("standalone mode has no mounted claims: pass --pvc {}=PATH, a raw disk image, a claim directory or a block device", v.name)));
        }
    }
    Ok(out)
}

/// `vmi` with the `--pvc` facts in `status.volumeStatus[].persistentVolumeClaimInfo`,
/// as virt-handler reports a claim (capacity and request both the given
/// size, the file system overhead, the volume mode); facts the flags do not
/// give keep the VMI's own status. Every other volume gets an entry with
/// its name, as virt-controller writes one per volume.
pub fn with_claim_status(
    vmi: &VirtualMachineInstance,
    args: &[PvcArg],
    claims: &[Claim],
) -> VirtualMachineInstance {
    use serde_json::{json, Map, Value};
    let mut out = vmi.clone();
    let mut status = match out.status.take() {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut list = match status.remove("volumeStatus") {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    for a in args {
        let (Some(c), Some(v)) = (
            claims.iter().find(|c| c.volume == a.volume),
            vmi.spec.volumes.iter().find(|v| v.name == a.volume),
        ) else {
            continue;
        };
        let claim_name = v
            .persistent_volume_claim
            .as_ref()
            .map(|p| p.claim_name.clone())
            .or_else(|| v.data_volume.as_ref().map(|d| d.name.clone()))
            .or_else(|| {
                v.ephemeral
                    .as_ref()
                    .and_then(|e| e.persistent_volume_claim.as_ref())
                    .map(|p| p.claim_name.clone())
            })
            .unwrap_or_default();
        let idx = match list
            .iter()
            .position(|s| s.get("name").and_then(Value::as_str) == Some(&a.volume))
        {
            Some(i) => i,
            None => {
                list.push(Value::Null);
                list.len() - 1
            }
        };
        let mut entry = match std::mem::take(&mut list[idx]) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        entry.insert("name".into(), json!(a.volume));
        let mut info = match entry.remove("persistentVolumeClaimInfo") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        info.entry("claimName").or_insert_with(|| json!(claim_name));
        let mode = if c.source == ClaimSource::Block {
            "Block"
        } else {
            "Filesystem"
        };
        info.insert("volumeMode".into(), json!(mode));
        if let Some(q) = &a.capacity {
            info.insert("capacity".into(), json!({ "storage": q.as_str() }));
            info.insert("requests".into(), json!({ "storage": q.as_str() }));
        }
        if let Some(f) = a.filesystem_overhead {
            info.insert("filesystemOverhead".into(), json!(f.to_string()));
        }
        if a.preallocated {
            info.insert("preallocated".into(), json!(true));
        }
        entry.insert("persistentVolumeClaimInfo".into(), Value::Object(info));
        list[idx] = Value::Object(entry);
    }
    // virt-controller gives every volume an entry: a volume without one
    // would be taken for a permanent volume not yet started, and the
    // launcher leaves such a disk out (api::hotplug).
    for v in &vmi.spec.volumes {
        if !list
            .iter()
            .any(|s| s.get("name").and_then(Value::as_str) == Some(&v.name))
        {
            list.push(json!({ "name": v.name }));
        }
    }
    status.insert("volumeStatus".into(), Value::Array(list));
    out.status = Some(Value::Object(status));
    out
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvc_flag_takes_a_path_and_claim_facts() {
        let a = PvcArg::parse("data=/claims/a,capacity=2Gi,filesystem-overhead=0.055,preallocated")
            .unwrap();
        assert_eq!(a.volume, "data");
        assert_eq!(a.path, PathBuf::from("/claims/a"));
        assert_eq!(a.capacity.unwrap().as_str(), "2Gi");
        assert_eq!(a.filesystem_overhead, Some(0.055));
        assert!(a.preallocated);
        let b = PvcArg::parse("v=/x.img").unwrap();
        assert_eq!(
            (b.capacity, b.filesystem_overhead, b.preallocated),
            (None, None, false)
        );
        for (bad, msg) in [
            ("data", "is not VOLUME=PATH"),
            ("=x", "is not VOLUME=PATH"),
            ("v=,capacity=1Gi", "is not VOLUME=PATH"),
            ("v=/x,capacity=12XB", "capacity=12XB: "),
            ("v=/x,capacity=-1Gi", "capacity: -1Gi is negative"),
            ("v=/x,capacity=1e30", "capacity: 1e30 is too large"),
            ("v=/x,filesystem-overhead=1.5", "not a fraction from 0 to 1"),
            ("v=/x,size=3", "\"size=3\" is not capacity=QUANTITY"),
        ] {
            let e = PvcArg::parse(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn pvc_flag_facts_become_the_claims_volume_status() {
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: s}\nspec:\n  domain: {memory: {guest: 64Mi}}\n  volumes:\n  - {name: a, persistentVolumeClaim: {claimName: ca}}\n  - {name: b, dataVolume: {name: db}}\n  - {name: c, ephemeral: {persistentVolumeClaim: {claimName: cc}}}\nstatus:\n  volumeStatus:\n  - {name: b, target: vdb, persistentVolumeClaimInfo: {filesystemOverhead: '0.1', capacity: {storage: 1Gi}}}\n";
        let vmi = api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap();
        let claim = |v: &str, source| Claim {
            volume: v.into(),
            path: PathBuf::from("/x"),
            source,
            read_only: false,
        };
        let args = [
            PvcArg::parse("a=/x,capacity=64Mi").unwrap(),
            PvcArg::parse("b=/x,capacity=2Gi").unwrap(),
            PvcArg::parse("c=/x,preallocated").unwrap(),
        ];
        let claims = [
            claim("a", ClaimSource::Dir),
            claim("b", ClaimSource::File),
            claim("c", ClaimSource::Block),
        ];
        let out = with_claim_status(&vmi, &args, &claims);
        let a = storage::pvc::info(&out, "a").unwrap().unwrap();
        assert_eq!((a.capacity, a.requests), (Some(64 << 20), Some(64 << 20)));
        assert_eq!(a.volume_mode.as_deref(), Some("Filesystem"));
        let b = storage::pvc::info(&out, "b").unwrap().unwrap();
        assert_eq!(b.capacity, Some(2 << 30), "the flag overrides the status");
        assert_eq!(
            b.filesystem_overhead,
            Some(0.1),
            "the status's own facts stay"
        );
        let st = &out.status.as_ref().unwrap()["volumeStatus"];
        assert_eq!(st[0]["target"], "vdb");
        assert_eq!(st[0]["persistentVolumeClaimInfo"]["claimName"], "db");
        assert!(storage::pvc::info(&out, "c").unwrap().unwrap().is_block());
        assert_eq!(st[2]["persistentVolumeClaimInfo"]["claimName"], "cc");
        assert_eq!(
            storage::pvc::preallocated_volumes(&out)
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            ["c"]
        );
    }
}
