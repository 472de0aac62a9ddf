//! `--image-volume`: the disk's resolution inside its image volume
//! (links inside the image, escapes, missing, two files, a FIFO, loops)
//! and the links the launcher makes, then prepared as any container disk.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use crate::image_volume::{self, ImageVolumeRoots};

use super::*;

/// An image volume layout in a temporary directory: `roots` with
/// `disk_0` made, and a file `secret.img` beside the roots (outside
/// every image) that no resolution may reach.
struct Images {
    e: Env,
    roots: ImageVolumeRoots,
}

impl Images {
    fn new() -> Images {
        let e = env();
        let roots = ImageVolumeRoots {
            image_volume_dir: e.root.join("image-volume"),
            kernel_boot_dir: e.root.join("kernel-boot"),
        };
        fs::create_dir_all(roots.disk_root(0).join("disk")).unwrap();
        fs::create_dir_all(&roots.kernel_boot_dir).unwrap();
        fs::write(e.root.join("secret.img"), b"outside").unwrap();
        Images { e, roots }
    }

    fn disk0(&self) -> std::path::PathBuf {
        self.roots.disk_root(0)
    }
}

fn raw_image(p: &Path) {
    let f = fs::File::create(p).unwrap();
    f.set_len(1 << 20).unwrap();
}

fn resolve_err(root: &Path, rel: &str) -> String {
    image_volume::resolve(root, rel).expect_err(rel)
}

#[test]
fn links_inside_the_image_resolve_inside_it() {
    let t = Images::new();
    let d = t.disk0();
    raw_image(&d.join("disk/real.img"));
    // An absolute link means the image's own root, a relative one its
    // directory; a link to a directory, then `..`, is walked as the kernel
    // walks it.
    symlink("/disk/real.img", d.join("disk/abs.img")).unwrap();
    symlink("real.img", d.join("disk/rel.img")).unwrap();
    symlink("../disk/./abs.img", d.join("disk/chain.img")).unwrap();
    fs::create_dir_all(d.join("a/b")).unwrap();
    symlink("/a/b", d.join("blink")).unwrap();
    symlink("/disk/real.img", d.join("a/r.img")).unwrap();
    let real = d.join("disk/real.img");
    for rel in [
        "/disk/real.img",
        "disk/real.img",
        "/disk/abs.img",
        "/disk/rel.img",
        "//disk/./chain.img",
        "/blink/../r.img",
        "/disk/../disk/real.img",
    ] {
        assert_eq!(image_volume::resolve(&d, rel).unwrap(), real, "{rel}");
    }
}

#[test]
fn escapes_through_dotdot_or_links_are_refused_and_nothing_outside_is_read() {
    let t = Images::new();
    let d = t.disk0();
    // secret.img exists two levels up: reaching it would need an escape.
    for rel in ["../../secret.img", "/disk/../../../secret.img", ".."] {
        let err = resolve_err(&d, rel);
        assert!(err.contains("leads out of"), "{rel}: {err}");
    }
    symlink("../../../secret.img", d.join("disk/up.img")).unwrap();
    let err = resolve_err(&d, "/disk/up.img");
    assert!(err.contains("leads out of"), "{err}");
    // An absolute link to a host path stays in the image, where it is
    // missing.
    let host = t.e.root.join("secret.img");
    symlink(&host, d.join("disk/host.img")).unwrap();
    let err = resolve_err(&d, "/disk/host.img");
    assert!(
        err.starts_with(&format!("{}/", d.display())) && err.contains("No such file"),
        "{err}"
    );
    // Another volume's image is outside this one's root.
    fs::create_dir_all(t.roots.disk_root(1)).unwrap();
    raw_image(&t.roots.disk_root(1).join("other.img"));
    let err = resolve_err(&d, "../disk_1/other.img");
    assert!(err.contains("leads out of"), "{err}");
}

#[test]
fn missing_files_fifos_directories_and_loops_are_refused() {
    let t = Images::new();
    let d = t.disk0();
    let err = resolve_err(&d, "/disk/none.img");
    assert!(
        err.contains("disk/none.img") && err.contains("No such file"),
        "{err}"
    );
    nix::unistd::mkfifo(&d.join("disk/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = resolve_err(&d, "/disk/fifo");
    assert!(err.ends_with("disk/fifo is not a regular file"), "{err}");
    let err = resolve_err(&d, "/disk");
    assert!(err.ends_with("is not a regular file"), "{err}");
    // A file used as a directory.
    raw_image(&d.join("disk/f.img"));
    let err = resolve_err(&d, "/disk/f.img/x");
    assert!(err.contains("Not a directory"), "{err}");
    // Loops: two links pointing at each other, a link to itself, a link
    // to its own directory repeated.
    symlink("b", d.join("disk/a")).unwrap();
    symlink("a", d.join("disk/b")).unwrap();
    symlink("/disk/self", d.join("disk/self")).unwrap();
    symlink(".", d.join("disk/dot")).unwrap();
    for rel in ["/disk/a", "/disk/self"] {
        let err = resolve_err(&d, rel);
        assert_eq!(err, "more than 256 path elements evaluated", "{rel}");
    }
    let deep = format!("/disk{}/f.img", "/dot".repeat(300));
    assert_eq!(
        resolve_err(&d, &deep),
        "more than 256 path elements evaluated"
    );
}

#[test]
fn without_a_path_the_single_file_under_disk_is_the_disk() {
    let t = Images::new();
    let folder = t.disk0().join("disk");
    let err = image_volume::disk_source(&t.roots, 0, "").unwrap_err();
    assert_eq!(
        err,
        format!(
            "no file found in folder {}, no disk present",
            folder.display()
        )
    );
    raw_image(&folder.join("one.qcow2"));
    assert_eq!(
        image_volume::disk_source(&t.roots, 0, "").unwrap(),
        folder.join("one.qcow2")
    );
    raw_image(&folder.join("two.img"));
    let err = image_volume::disk_source(&t.roots, 0, "").unwrap_err();
    assert_eq!(
        err,
        format!(
            "more than one file found in folder {}, only one disk is allowed",
            folder.display()
        )
    );
    // No /disk at all (KubeVirt: failed to check ImageVolume path).
    let err = image_volume::disk_source(&t.roots, 3, "").unwrap_err();
    assert!(
        err.starts_with(&format!(
            "failed to check ImageVolume path {}: ",
            t.roots.disk_root(3).join("disk").display()
        )),
        "{err}"
    );
    // A /disk that is a link leading out of the image.
    fs::create_dir_all(t.roots.disk_root(2)).unwrap();
    symlink("../..", t.roots.disk_root(2).join("disk")).unwrap();
    let err = image_volume::disk_source(&t.roots, 2, "").unwrap_err();
    assert!(err.contains("leads out of"), "{err}");
}

#[test]
fn link_makes_the_container_disk_and_kernel_boot_links_then_prepare_reads_them() {
    let t = Images::new();
    let d = t.disk0();
    let real = d.join("disk/real.img");
    raw_image(&real);
    symlink("/disk/real.img", d.join("disk/boot.img")).unwrap();
    fs::create_dir_all(t.roots.kernel_boot_dir.join("boot")).unwrap();
    fs::write(t.roots.kernel_boot_dir.join("boot/vmlinuz-6"), b"k").unwrap();
    symlink("vmlinuz-6", t.roots.kernel_boot_dir.join("boot/vmlinuz")).unwrap();
    fs::write(t.roots.kernel_boot_dir.join("initrd.img"), b"i").unwrap();
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: s}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    firmware:\n      kernelBoot:\n        container: {image: k, kernelPath: /boot/vmlinuz, initrdPath: initrd.img}\n  volumes:\n  - name: root\n    containerDisk: {image: x, path: /disk/boot.img}\n";
    let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
    image_volume::link(&v, &t.e.ctx.paths, &t.roots).unwrap();
    let cd = t.e.root.join("container-disks");
    assert_eq!(fs::read_link(cd.join("disk_0.img")).unwrap(), real);
    assert_eq!(
        fs::read_link(cd.join("kernel-boot/vmlinuz")).unwrap(),
        t.roots.kernel_boot_dir.join("boot/vmlinuz-6")
    );
    assert_eq!(
        fs::read_link(cd.join("kernel-boot/initrd.img")).unwrap(),
        t.roots.kernel_boot_dir.join("initrd.img")
    );
    // A later sync keeps the links; the volume prepares through them.
    image_volume::link(&v, &t.e.ctx.paths, &t.roots).unwrap();
    let v = vmi("  - name: root\n    containerDisk: {image: x, path: /disk/boot.img}\n");
    let p = prepare(&v, &t.e.ctx, &PrepareOptions::default()).unwrap();
    assert_eq!(
        p.container_disk_formats["root"],
        converter::ImageFormat::Raw
    );
    // Something else where the link goes is refused, never replaced.
    fs::remove_file(cd.join("disk_0.img")).unwrap();
    symlink(t.e.root.join("secret.img"), cd.join("disk_0.img")).unwrap();
    let err = image_volume::link(&v, &t.e.ctx.paths, &t.roots)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "spec.volumes[0].containerDisk: error creating symlink for containerDisk: "
        ) && err.contains("exists and is not the link to"),
        "{err}"
    );
}

#[test]
fn link_errors_carry_kubevirts_words_and_the_field() {
    let t = Images::new();
    let v = vmi("  - name: a\n    emptyDisk: {capacity: 1Mi}\n  - name: root\n    containerDisk: {image: x}\n");
    fs::create_dir_all(t.roots.disk_root(1).join("disk")).unwrap();
    let err = image_volume::link(&v, &t.e.ctx.paths, &t.roots)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "spec.volumes[1].containerDisk: failed to find disk file from ImageVolume: no file found in folder {}, no disk present",
            t.roots.disk_root(1).join("disk").display()
        )
    );
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: s}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    firmware:\n      kernelBoot:\n        container: {image: k, kernelPath: ../../secret.img}\n";
    let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
    let err = image_volume::link(&v, &t.e.ctx.paths, &t.roots)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("spec.domain.firmware.kernelBoot.container.kernelPath: error getting kernel boot artifact path from ImageVolume: ")
            && err.contains("leads out of"),
        "{err}"
    );
    assert!(!t
        .e
        .root
        .join("container-disks/kernel-boot/secret.img")
        .exists());
}
