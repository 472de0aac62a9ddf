use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use super::*;

#[test]
fn foreign_directories_are_never_emptied() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("precious"), b"x").unwrap();
    let e = StateDir::acquire(d.path()).unwrap_err();
    assert!(matches!(e, IsolationError::Foreign(_)), "{e}");
    assert!(d.path().join("precious").is_file());
    assert!(matches!(
        StateDir::acquire(Path::new("/")),
        Err(IsolationError::Foreign(_))
    ));
    let file = d.path().join("precious");
    assert!(matches!(
        StateDir::acquire(&file),
        Err(IsolationError::NotADirectory(_))
    ));
    let empty = tempfile::tempdir().unwrap();
    let link = d.path().join("link");
    symlink(empty.path(), &link).unwrap();
    assert!(matches!(
        StateDir::acquire(&link),
        Err(IsolationError::NotADirectory(_))
    ));
}

/// Issue 19's first case: the marker is a link to a root-owned file and
/// `.lock` a directory. The launcher used `is_file()` (which follows the
/// link) and then wrote its marker text over the link's target.
#[test]
fn issue19_a_marker_link_is_never_written_through() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    fs::write(&victim, b"root's data\n").unwrap();
    let state = d.path().join("state");
    fs::create_dir(&state).unwrap();
    symlink(&victim, state.join(MARKER)).unwrap();
    fs::create_dir(state.join(".lock")).unwrap();
    let e = StateDir::acquire(&state).unwrap_err();
    assert!(matches!(e, IsolationError::Foreign(_)), "{e}");
    assert_eq!(fs::read(&victim).unwrap(), b"root's data\n");
    assert!(state.join(".lock").is_dir(), "nothing was emptied");
}

/// Issue 19's second case: `.lock` is a link; root created a file at its
/// target. Refused whether or not the marker is there, nothing created.
#[test]
fn issue19_a_lock_link_creates_nothing_at_its_target() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("created-by-root");
    let state = d.path().join("state");
    fs::create_dir(&state).unwrap();
    symlink(&target, state.join(".lock")).unwrap();
    let e = StateDir::acquire(&state).unwrap_err();
    assert!(matches!(e, IsolationError::Foreign(_)), "{e}");
    assert!(fs::symlink_metadata(&target).is_err());
    // With a (regular) marker, as a launcher of this user left it.
    fs::write(state.join(MARKER), b"x").unwrap();
    let e = StateDir::acquire(&state).unwrap_err();
    assert!(
        matches!(e, IsolationError::Unsafe { .. }),
        "a link as the lock file is refused: {e}"
    );
    assert!(e.to_string().contains(".lock is a symbolic link"), "{e}");
    assert!(
        fs::symlink_metadata(&target).is_err(),
        "nothing at the link's target"
    );
    assert!(fs::symlink_metadata(state.join(".lock"))
        .unwrap()
        .file_type()
        .is_symlink());
}

/// Issue 19's third case: a directory owned by another user was accepted,
/// emptied and used. Refused, and left as it was.
#[test]
fn issue19_a_directory_of_another_user_is_refused_not_emptied() {
    if !nix::unistd::Uid::effective().is_root() {
        panic!("this test needs root (it gives a directory to another user)");
    }
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    fs::create_dir(&state).unwrap();
    fs::write(state.join(MARKER), b"x").unwrap();
    fs::write(state.join("theirs"), b"y").unwrap();
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
    let e = StateDir::acquire(&state).unwrap_err();
    assert!(matches!(e, IsolationError::Unsafe { .. }), "{e}");
    assert!(e.to_string().contains("owned by uid 65534"), "{e}");
    assert!(state.join("theirs").is_file(), "not emptied");
    // Root's own, but writable by others: refused too.
    std::os::unix::fs::chown(&state, Some(0), Some(0)).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o777)).unwrap();
    let e = StateDir::acquire(&state).unwrap_err();
    assert!(e.to_string().contains("mode 0777"), "{e}");
    assert!(state.join("theirs").is_file(), "not emptied");
    // A parent others can write, without the sticky bit: they could
    // swap the directory for their own after the checks.
    let open = d.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let e = StateDir::acquire(&open.join("state")).unwrap_err();
    assert!(e.to_string().contains("no sticky bit"), "{e}");
    assert!(!open.join("state").exists());
    fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
    StateDir::acquire(&open.join("state"))
        .unwrap()
        .remove()
        .unwrap();
}

#[test]
fn clearing_removes_links_never_their_targets() {
    let d = tempfile::tempdir().unwrap();
    let outside = d.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), b"k").unwrap();
    let root = d.path().join("state");
    let s = StateDir::acquire(&root).unwrap();
    let sub = s.subdir("libvirt/run").unwrap();
    symlink(&outside, sub.join("link")).unwrap();
    symlink(&outside, root.join("top-link")).unwrap();
    s.remove().unwrap();
    assert!(!root.exists());
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"k");
    // A subdirectory path through a planted link is refused.
    let s = StateDir::acquire(&root).unwrap();
    symlink(&outside, root.join("lnk")).unwrap();
    assert!(s.subdir("lnk/x").is_err());
    assert!(!outside.join("x").exists());
    assert!(s.subdir("../x").is_err());
    s.remove().unwrap();
}

#[test]
fn removal_at_exit_leaves_nothing_of_the_launchers_own() {
    let d = tempfile::tempdir().unwrap();
    // A directory the launcher creates goes entirely.
    let made = d.path().join("state");
    let s = StateDir::acquire(&made).unwrap();
    fs::create_dir_all(s.subdir("libvirt/run").unwrap()).unwrap();
    fs::write(made.join("libvirt/run/x"), b"x").unwrap();
    s.remove().unwrap();
    assert!(!made.exists());
    // The user's own empty directory stays, empty.
    let mine = d.path().join("mine");
    fs::create_dir(&mine).unwrap();
    let s = StateDir::acquire(&mine).unwrap();
    fs::write(mine.join("y"), b"y").unwrap();
    s.remove().unwrap();
    assert!(mine.is_dir());
    assert_eq!(fs::read_dir(&mine).unwrap().count(), 0);
    // After a removal the directory can be claimed again, once.
    let again = StateDir::acquire(&mine).unwrap();
    assert!(matches!(
        StateDir::acquire(&mine),
        Err(IsolationError::Busy(_))
    ));
    drop(again);
}

#[test]
fn own_directories_are_reused_and_emptied() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("state");
    {
        let s = StateDir::acquire(&root).unwrap();
        fs::write(s.subdir("private").unwrap().join("old"), b"x").unwrap();
        // A second launcher on the same directory is refused while the first holds it.
        assert!(matches!(
            StateDir::acquire(&root),
            Err(IsolationError::Busy(_))
        ));
    }
    let _s = StateDir::acquire(&root).unwrap();
    assert!(!root.join("private").exists(), "stale state is removed");
    assert!(root.join(MARKER).is_file());
    assert_eq!(
        fs::metadata(&root).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

/// Regression (CI at the merge of issue 19's hardening): subdirectories were
/// made 0700, so swtpm, running as `tss`, could not reach
/// `/var/lib/libvirt/swtpm/<uuid>` through the bind mount and every TPM guest
/// failed to start. They are 0755; the root stays 0700.
#[test]
fn subdirectories_are_traversable_by_the_daemons_users() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    let s = StateDir::acquire(&root).unwrap();
    let sub = s.subdir("libvirt/lib/swtpm").unwrap();
    for p in [root.join("libvirt"), root.join("libvirt/lib"), sub] {
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755,
            "{}",
            p.display()
        );
    }
    assert_eq!(
        fs::metadata(&root).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

/// Issue 19: the descriptor `subdir_fd` returns keeps naming the directory
/// it opened when the path is swapped afterwards (renamed away, a link to
/// another directory put in its place), which is what the runtime's bind
/// mounts from it rely on; and opening through such a link is refused.
#[test]
fn issue19_a_subdirectory_descriptor_survives_a_swapped_path() {
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    let s = StateDir::acquire(&t.path().join("st")).unwrap();
    let (fd, path) = s.subdir_fd("libvirt/run").unwrap();
    assert_eq!(path, t.path().join("st/libvirt/run"));
    let ino = fs::metadata(&path).unwrap().ino();
    let elsewhere = t.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::rename(&path, t.path().join("st/libvirt/moved")).unwrap();
    symlink(&elsewhere, &path).unwrap();
    let held = rustix::fs::fstat(&fd).unwrap();
    assert_eq!(held.st_ino, ino);
    assert_ne!(fs::metadata(&path).unwrap().ino(), ino);
    assert!(s.subdir_fd("libvirt/run").is_err());
    assert!(s.subdir_fd("").is_err());
}

/// Issue 19: a path swapped between the creation of a state subdirectory
/// and its bind mount is refused before anything is mounted (a link in
/// its place, or another directory renamed there).
#[test]
fn issue19_a_swapped_subdirectory_is_never_mounted() {
    let t = tempfile::tempdir().unwrap();
    let s = StateDir::acquire(&t.path().join("st")).unwrap();
    let target = t.path().join("target");
    let mut mounts = super::super::Mounts {
        targets: Vec::new(),
    };
    let (fd, path) = s.subdir_fd("etc").unwrap();
    let other = t.path().join("st/other");
    fs::create_dir(&other).unwrap();
    fs::rename(&path, t.path().join("st/moved")).unwrap();
    fs::rename(&other, &path).unwrap();
    let e = mounts.bind_dir_fd(&fd, &path, &target).unwrap_err();
    assert!(e.to_string().contains("no longer the directory"), "{e}");
    fs::remove_dir(&path).unwrap();
    symlink(t.path().join("st/moved"), &path).unwrap();
    assert!(mounts.bind_dir_fd(&fd, &path, &target).is_err());
    assert!(mounts.targets.is_empty());
}

/// A link anywhere on the way (as `/var/run` is on Debian) is refused at
/// once, naming it; nothing is made at its target.
#[test]
fn a_link_on_the_way_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let real = d.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = d.path().join("run-link");
    symlink(&real, &link).unwrap();
    for root in [link.join("sd"), link.join("virt-launcher/sd")] {
        let e = StateDir::acquire(&root).unwrap_err();
        assert!(
            matches!(&e, IsolationError::Unsafe { path, .. } if *path == link),
            "{e}"
        );
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
    }
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0, "nothing made");
}
