//! The dumper end to end on real directories: the record, one dump at a
//! time, and links planted before and during a dump never written through.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use std::os::unix::fs::PermissionsExt;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;
use wire::api_domain::RuntimeMetadata;

fn clock() -> String {
    "2025-01-01T00:00:00Z".into()
}

/// A dumper whose metadata changes are recorded in order.
fn dumper() -> (
    MemoryDumper,
    Arc<MetadataCache>,
    Arc<Mutex<Vec<RuntimeMetadata>>>,
) {
    let seen: Arc<Mutex<Vec<RuntimeMetadata>>> = Arc::default();
    let cache = Arc::new_cyclic(|weak: &std::sync::Weak<MetadataCache>| {
        let weak = weak.clone();
        let seen = Arc::clone(&seen);
        MetadataCache::new(Box::new(move || {
            if let Some(c) = weak.upgrade() {
                seen.lock().unwrap().push(c.snapshot());
            }
        }))
    });
    (MemoryDumper::new(Arc::clone(&cache), clock), cache, seen)
}

fn wait_idle(d: &MemoryDumper) {
    let start = std::time::Instant::now();
    while d.in_progress() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "dump never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_dump_records_start_then_completion_and_removes_earlier_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("vm-vol-20240101-000000.memory.dump");
    let keep = dir.path().join("notes.txt");
    std::fs::write(&old, b"old").unwrap();
    std::fs::write(&keep, b"keep").unwrap();
    let (d, cache, seen) = dumper();
    let path = dir.path().join("vm-vol-20250101-000000.memory.dump");
    let r = d
        .request(
            &path,
            Box::new(|p: &Path| std::fs::write(p, b"\x7fELF").map_err(Into::into)),
        )
        .unwrap();
    assert_eq!(r, Request::Started);
    wait_idle(&d);
    assert!(!old.exists(), "the earlier dump is removed");
    assert!(keep.exists(), "other files stay");
    assert_eq!(std::fs::read(&path).unwrap(), b"\x7fELF");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[0].memory_dump,
        Some(MemoryDumpMetadata {
            file_name: "vm-vol-20250101-000000.memory.dump".into(),
            start_timestamp: Some(clock()),
            ..MemoryDumpMetadata::default()
        })
    );
    assert_eq!(
        seen[1].memory_dump,
        Some(MemoryDumpMetadata {
            file_name: "vm-vol-20250101-000000.memory.dump".into(),
            start_timestamp: Some(clock()),
            end_timestamp: Some(clock()),
            completed: true,
            failed: false,
            failure_reason: String::new(),
        })
    );
    assert_eq!(cache.snapshot(), seen[1]);
}

#[test]
fn a_failed_dump_is_completed_failed_with_kubevirts_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (d, cache, _) = dumper();
    let path = dir.path().join("x.memory.dump");
    d.request(
        &path,
        Box::new(|_: &Path| Err("LibvirtError(Code=38, Domain=10, Message='boom')".into())),
    )
    .unwrap();
    wait_idle(&d);
    let m = cache.snapshot().memory_dump.unwrap();
    assert!(m.completed && m.failed, "{m:?}");
    assert_eq!(
        m.failure_reason,
        "Domain memory dump failed: LibvirtError(Code=38, Domain=10, Message='boom')"
    );
    assert!(m.end_timestamp.is_some());
}

#[test]
fn one_dump_at_a_time_and_never_the_same_file_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (d, cache, seen) = dumper();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let first = dir.path().join("a.memory.dump");
    let r = d
        .request(
            &first,
            Box::new(move |_: &Path| {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Ok(())
            }),
        )
        .unwrap();
    assert_eq!(r, Request::Started);
    started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // While it runs, any request (another file or the same) does nothing.
    let called = Arc::new(AtomicBool::new(false));
    for p in ["b.memory.dump", "a.memory.dump"] {
        let c = Arc::clone(&called);
        let r = d
            .request(
                &dir.path().join(p),
                Box::new(move |_: &Path| {
                    c.store(true, Ordering::SeqCst);
                    Ok(())
                }),
            )
            .unwrap();
        assert_eq!(r, Request::InProgress);
    }
    release_tx.send(()).unwrap();
    wait_idle(&d);
    assert!(!called.load(Ordering::SeqCst));
    assert_eq!(seen.lock().unwrap().len(), 2);
    // Done: the same file name again is skipped, its record kept.
    let before = cache.snapshot();
    let c = Arc::clone(&called);
    let r = d
        .request(
            &first,
            Box::new(move |_: &Path| {
                c.store(true, Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap();
    assert_eq!(r, Request::AlreadyDumped);
    assert!(!d.in_progress(), "a skipped request leaves the gate open");
    assert!(!called.load(Ordering::SeqCst));
    assert_eq!(cache.snapshot(), before);
    // Another file name dumps again.
    let r = d
        .request(
            &dir.path().join("b.memory.dump"),
            Box::new(|_: &Path| Ok(())),
        )
        .unwrap();
    assert_eq!(r, Request::Started);
    wait_idle(&d);
    assert_eq!(
        cache.snapshot().memory_dump.unwrap().file_name,
        "b.memory.dump"
    );
}

#[test]
fn a_panicking_dump_opens_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let (d, _, _) = dumper();
    d.request(
        &dir.path().join("p.memory.dump"),
        Box::new(|_: &Path| panic!("dump panicked")),
    )
    .unwrap();
    wait_idle(&d);
}

#[test]
fn a_link_planted_after_the_check_fails_the_dump_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let path = dir.path().join("target.bin");
    check_dump_path(path.to_str().unwrap(), None).unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let (d, cache, _) = dumper();
    let called = Arc::new(AtomicBool::new(false));
    let c = Arc::clone(&called);
    d.request(
        &path,
        Box::new(move |_: &Path| {
            c.store(true, Ordering::SeqCst);
            Ok(())
        }),
    )
    .unwrap();
    wait_idle(&d);
    assert!(!called.load(Ordering::SeqCst));
    let m = cache.snapshot().memory_dump.unwrap();
    assert!(m.failed, "{m:?}");
    assert!(
        m.failure_reason
            .starts_with("Domain memory dump failed: dumpPath: ")
            && m.failure_reason
                .ends_with("is a symbolic link (never written through)"),
        "{}",
        m.failure_reason
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
}

/// A dump that writes `content` through the path it is given, as
/// libvirt does (`O_CREAT|O_TRUNC`, following links).
fn writes(content: &'static [u8]) -> DumpFn {
    Box::new(move |p: &Path| std::fs::write(p, content).map_err(Into::into))
}

/// The entries of `dir` named like a private dump directory.
fn tmp_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(TMP_DIR_PREFIX))
        .collect()
}

#[test]
fn a_hard_link_at_the_destination_keeps_the_other_files_content() {
    let root = tempfile::tempdir().unwrap();
    let (dumps, elsewhere) = (root.path().join("dumps"), root.path().join("elsewhere"));
    std::fs::create_dir(&dumps).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    let victim = elsewhere.join("v2");
    std::fs::write(&victim, b"keep").unwrap();
    let path = dumps.join("hard.bin");
    std::fs::hard_link(&victim, &path).unwrap();
    check_dump_path(path.to_str().unwrap(), None).unwrap();
    let (d, cache, _) = dumper();
    d.request(&path, writes(b"\x7fELF")).unwrap();
    wait_idle(&d);
    let m = cache.snapshot().memory_dump.unwrap();
    assert!(m.completed && !m.failed, "{m:?}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert_eq!(std::fs::read(&path).unwrap(), b"\x7fELF");
    assert!(tmp_dirs(&dumps).is_empty(), "{:?}", tmp_dirs(&dumps));
}

#[test]
fn a_private_directory_swapped_for_another_with_a_link_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let path = dir.path().join("swap.memory.dump");
    let (d, cache, _) = dumper();
    let victim_c = victim.clone();
    d.request(
        &path,
        Box::new(move |p: &Path| {
            // Whoever may write the target's directory renames the
            // private directory away and puts one of their own, with
            // a link at the dump's name, in its place.
            let private = std::fs::canonicalize(p.parent().unwrap()).unwrap();
            let mut moved = private.clone().into_os_string();
            moved.push(".moved");
            std::fs::rename(&private, &moved).unwrap();
            std::fs::create_dir(&private).unwrap();
            std::os::unix::fs::symlink(&victim_c, private.join(p.file_name().unwrap())).unwrap();
            std::fs::write(p, b"\x7fELF").map_err(Into::into)
        }),
    )
    .unwrap();
    wait_idle(&d);
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    let m = cache.snapshot().memory_dump.unwrap();
    assert!(!m.failed, "{m:?}");
    assert_eq!(std::fs::read(&path).unwrap(), b"\x7fELF");
}

#[test]
fn a_link_planted_while_libvirt_dumps_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let path = dir.path().join("target.memory.dump");
    let (d, cache, _) = dumper();
    let (final_path, victim_c, dir_c) = (path.clone(), victim.clone(), dir.path().to_owned());
    d.request(
        &path,
        Box::new(move |p: &Path| {
            // Given a file in a fresh private directory next to the
            // target, reached through this process's descriptor of it.
            assert!(p.starts_with(format!("/proc/{}/fd/", std::process::id())));
            let private = std::fs::read_link(p.parent().unwrap()).unwrap();
            let private = private.as_path();
            assert_eq!(private.parent().unwrap(), dir_c);
            assert!(private
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(TMP_DIR_PREFIX));
            let mode = std::fs::metadata(private).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{mode:o}");
            assert_eq!(p.file_name(), final_path.file_name());
            // The window: a link planted after every check, then the
            // write, which follows links.
            std::os::unix::fs::symlink(&victim_c, &final_path).unwrap();
            std::fs::write(p, b"\x7fELF").map_err(Into::into)
        }),
    )
    .unwrap();
    wait_idle(&d);
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    let m = cache.snapshot().memory_dump.unwrap();
    assert!(m.failed, "{m:?}");
    assert!(
        m.failure_reason
            .ends_with("is a symbolic link (never written through)"),
        "{}",
        m.failure_reason
    );
    assert!(path.is_symlink());
    assert!(
        tmp_dirs(dir.path()).is_empty(),
        "the partial dump is removed"
    );
}

#[test]
fn stale_private_dirs_are_removed_before_a_dump_and_a_failed_dump_leaves_none() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let stale = dir.path().join(format!("{TMP_DIR_PREFIX}abc123"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("old.memory.dump"), b"partial").unwrap();
    // A link named like one is not followed into its target.
    std::fs::write(outside.path().join("keep"), b"keep").unwrap();
    let link = dir.path().join(format!("{TMP_DIR_PREFIX}link"));
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let (d, cache, _) = dumper();
    d.request(
        &dir.path().join("x.memory.dump"),
        Box::new(|p: &Path| {
            std::fs::write(p, b"part").unwrap();
            Err("boom".into())
        }),
    )
    .unwrap();
    wait_idle(&d);
    assert!(cache.snapshot().memory_dump.unwrap().failed);
    assert!(!stale.exists());
    assert!(link.is_symlink());
    assert_eq!(std::fs::read(outside.path().join("keep")).unwrap(), b"keep");
    assert_eq!(tmp_dirs(dir.path()), vec![format!("{TMP_DIR_PREFIX}link")]);
    assert!(!dir.path().join("x.memory.dump").exists());
}

#[test]
fn the_same_file_name_in_another_directory_dumps_again() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (d, _, _) = dumper();
    let first = a.path().join("same.memory.dump");
    assert_eq!(d.request(&first, writes(b"a")).unwrap(), Request::Started);
    wait_idle(&d);
    let other = b.path().join("same.memory.dump");
    assert_eq!(d.request(&other, writes(b"b")).unwrap(), Request::Started);
    wait_idle(&d);
    assert_eq!(std::fs::read(&other).unwrap(), b"b");
    // The path just dumped (virt-handler asks again): skipped.
    assert_eq!(
        d.request(&other, writes(b"c")).unwrap(),
        Request::AlreadyDumped
    );
    assert_eq!(std::fs::read(&other).unwrap(), b"b");
}

#[test]
fn the_record_is_set_when_the_request_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (d, cache, _) = dumper();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    d.request(
        &dir.path().join("a.memory.dump"),
        Box::new(move |_: &Path| {
            // Hold the dump thread before it does anything.
            entered_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            Err("released".into())
        }),
    )
    .unwrap();
    let m = cache.snapshot().memory_dump.expect("record set");
    assert_eq!(m.file_name, "a.memory.dump");
    assert!(!m.completed && m.start_timestamp.is_some(), "{m:?}");
    entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    release_tx.send(()).unwrap();
    wait_idle(&d);
}
