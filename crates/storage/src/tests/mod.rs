//! Preparation against real files and the real tools (qemu-img, and
//! `isoinfo` (genisoimage) and `xorriso` to read the ISO images back; both
//! from .ci/install), one file per concern: image volumes (`images`),
//! `--image-volume` links (`image_volumes`),
//! cloud-init (`cloud_init`), config disks (`config_disks`), claims
//! (`claims`), no tool writing through a planted link (`links`).
//! The helpers they share are here.

mod claims;
mod cloud_init;
mod config_disks;
mod image_volumes;
mod images;
mod links;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use api::Arch;
use converter::{ConvertContext, VirtType};

use crate::*;

pub(crate) struct Env {
    _dir: tempfile::TempDir,
    pub(crate) root: std::path::PathBuf,
    pub(crate) ctx: ConvertContext,
}

pub(crate) fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Qemu);
    let p = |s: &str| root.join(s).to_string_lossy().into_owned();
    ctx.paths.container_disk_dir = p("container-disks");
    ctx.paths.ephemeral_disk_dir = p("ephemeral");
    ctx.paths.private_dir = p("private");
    ctx.paths.empty_disk_dir = p("empty-disks");
    fs::create_dir_all(root.join("container-disks")).unwrap();
    Env {
        _dir: dir,
        root,
        ctx,
    }
}

pub(crate) fn vmi(volumes: &str) -> api::VirtualMachineInstance {
    let doc = format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: s}}\nspec:\n  domain: {{memory: {{guest: 64Mi}}}}\n  volumes:\n{volumes}"
    );
    api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap()
}

pub(crate) fn tool_bytes(prog: &str, args: &[&str]) -> Vec<u8> {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    match process::run(cmd, std::time::Duration::from_secs(30), 16 << 20) {
        Ok(out) => out.stdout,
        Err(process::RunError::Spawn { source, .. }) => {
            panic!("{prog} is required for the ISO checks (bash .ci/install): {source}")
        }
        Err(e) => panic!("{prog} {args:?}: {e}"),
    }
}

pub(crate) fn tool(prog: &str, args: &[&str]) -> String {
    String::from_utf8_lossy(&tool_bytes(prog, args)).into_owned()
}

/// `isoinfo -d`: the primary volume descriptor and the extensions found.
pub(crate) struct IsoInfo {
    volume_id: String,
    joliet: bool,
    rock_ridge: bool,
}

pub(crate) fn isoinfo(iso: &Path) -> IsoInfo {
    let d = tool("isoinfo", &["-d", "-i", iso.to_str().unwrap()]);
    IsoInfo {
        volume_id: d
            .lines()
            .find_map(|l| l.strip_prefix("Volume id: "))
            .unwrap_or_else(|| panic!("no volume id in {d}"))
            .trim()
            .to_owned(),
        joliet: d.contains("Joliet with UCS level 3 found"),
        rock_ridge: d.contains("Rock Ridge signatures version 1 found"),
    }
}

/// Names in the Joliet tree (`isoinfo -J -f`, which prints them in
/// ISO 8859-1), sorted.
pub(crate) fn joliet_names(iso: &Path) -> Vec<String> {
    let latin1: String = tool_bytes("isoinfo", &["-J", "-f", "-i", iso.to_str().unwrap()])
        .into_iter()
        .map(char::from)
        .collect();
    let mut v: Vec<String> = latin1.lines().map(str::to_owned).collect();
    v.sort();
    v
}

/// Extracts the image (Rock Ridge names and modes) with xorriso.
pub(crate) fn extract(iso: &Path) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("x");
    tool(
        "xorriso",
        &[
            "-osirrox",
            "on",
            "-indev",
            iso.to_str().unwrap(),
            "-extract",
            "/",
            out.to_str().unwrap(),
        ],
    );
    (t, out)
}

/// Every file below `dir`: relative path → (mode & 0o777, content; dirs empty).
pub(crate) fn tree(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, (u32, Vec<u8>)>) {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let mode = m.permissions().mode() & 0o777;
            if m.is_dir() {
                out.insert(format!("{rel}/"), (mode, Vec::new()));
                walk(root, &p, out);
            } else {
                assert!(m.is_file(), "{rel} is not a regular file in the image");
                out.insert(rel, (mode, fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

pub(crate) fn load(doc: &str) -> api::VirtualMachineInstance {
    api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap()
}

pub(crate) fn standalone(pairs: &[(&str, &Path)]) -> PrepareOptions {
    PrepareOptions {
        config_sources: ConfigSources::Standalone {
            volumes: pairs
                .iter()
                .map(|(v, d)| ((*v).to_owned(), d.to_path_buf()))
                .collect(),
            secrets: BTreeMap::new(),
        },
        ..PrepareOptions::default()
    }
}

pub(crate) fn nocloud_iso(e: &Env, ns: &str, name: &str) -> PathBuf {
    e.root
        .join(format!("ephemeral/cloud-init-data/{ns}/{name}/noCloud.iso"))
}

/// The error of preparing `v` with the default options (which must fail).
pub(crate) fn storage_err(e: &Env, v: &api::VirtualMachineInstance) -> String {
    prepare(v, &e.ctx, &PrepareOptions::default())
        .unwrap_err()
        .to_string()
}
