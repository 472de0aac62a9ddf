//! The binaries as the pod runs them: `container-disk` making its socket,
//! answering connections and ending when the socket goes or on SIGTERM;
//! `virt-tail` following a serial log that grows, is truncated and is
//! replaced. (virt-freezer and virt-probe run against a real launcher
//! and guest in the e2e agent tests.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const WAIT: Duration = Duration::from_secs(30);

fn wait_for(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "no {what} within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(c: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        assert!(start.elapsed() < WAIT, "still running after {WAIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn container_disk(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_container-disk"))
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn container_disk_makes_its_socket_and_ends_when_it_goes_or_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    // The copy path's directory is made (0777), the socket is <path>.sock.
    let copy = dir.path().join("disks/disk_0");
    let sock = dir.path().join("disks/disk_0.sock");
    let mut c = container_disk(&["--copy-path", copy.to_str().unwrap()]);
    wait_for("socket", || sock.exists());
    let mode = std::fs::metadata(dir.path().join("disks"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o777 & !umask(), "{mode:o}");
    // Connections are accepted and closed: 40 queued at once (within the
    // backlog of 50) are all closed in one round, without a second's
    // sleep between them.
    let conns: Vec<UnixStream> = (0..40)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    for mut s in conns {
        let mut buf = [0u8; 1];
        s.set_read_timeout(Some(WAIT)).unwrap();
        assert_eq!(std::io::Read::read(&mut s, &mut buf).unwrap(), 0);
    }
    assert!(c.try_wait().unwrap().is_none());
    // The socket removed (as virt-handler or the monitor removes it): exit 0.
    std::fs::remove_file(&sock).unwrap();
    let st = wait_exit(&mut c);
    assert_eq!(st.code(), Some(0));
    let mut err = String::new();
    std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains(&format!(
            "error: socket {} does not exist anymore",
            sock.display()
        )),
        "{err}"
    );

    // SIGTERM removes the socket, exit 0.
    let mut c = container_disk(&["-c", copy.to_str().unwrap()]);
    wait_for("socket", || sock.exists());
    kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(wait_exit(&mut c).code(), Some(0));
    assert!(!sock.exists());

    // --no-op, a path too long for sun_path, an unknown option.
    assert_eq!(wait_exit(&mut container_disk(&["--no-op"])).code(), Some(0));
    let long = format!("/{}", "a".repeat(102));
    let mut c = container_disk(&["--copy-path", &long]);
    assert_eq!(wait_exit(&mut c).code(), Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("error: copy path can not be longer than 102 characters"),
        "{err}"
    );
    assert_eq!(wait_exit(&mut container_disk(&["--bogus"])).code(), Some(1));
    // A socket that cannot be bound (it exists already).
    std::fs::write(&sock, b"").unwrap();
    let mut c = container_disk(&["--copy-path", copy.to_str().unwrap()]);
    assert_eq!(wait_exit(&mut c).code(), Some(1));
}

fn umask() -> u32 {
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    nix::sys::stat::umask(old);
    old.bits()
}

/// virt-tail's standard output, line by line, through a channel.
fn tail(log: &Path) -> (Child, mpsc::Receiver<String>) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_virt-tail"))
        .args(["-v", "3", "--logfile", log.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = c.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (c, rx)
}

fn next(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(WAIT).expect("a line from virt-tail")
}

#[test]
fn virt_tail_follows_a_growing_log_through_truncation_and_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("virt-serial0-log");
    // The file does not exist yet: virt-tail waits for it.
    let (mut c, rx) = tail(&log);
    std::thread::sleep(Duration::from_millis(400));
    assert!(c.try_wait().unwrap().is_none());
    let mut f = std::fs::File::create(&log).unwrap();
    f.write_all(b"boot line 1\nboot ").unwrap();
    f.flush().unwrap();
    assert_eq!(next(&rx), "boot line 1");
    // The incomplete line waits for its end.
    assert!(rx.recv_timeout(Duration::from_millis(700)).is_err());
    f.write_all(b"line 2\n\nGUEST-READY\n").unwrap();
    assert_eq!(next(&rx), "boot line 2");
    assert_eq!(next(&rx), "");
    assert_eq!(next(&rx), "GUEST-READY");
    // Truncated (a new QEMU): read again from the start.
    f.set_len(0).unwrap();
    drop(f);
    std::thread::sleep(Duration::from_millis(600));
    std::fs::write(&log, b"after truncation\n").unwrap();
    assert_eq!(next(&rx), "after truncation");
    // Replaced by another file at the same path.
    let new = dir.path().join("new");
    std::fs::write(&new, b"replaced 1\nreplaced 2\n").unwrap();
    std::fs::rename(&new, &log).unwrap();
    assert_eq!(next(&rx), "replaced 1");
    assert_eq!(next(&rx), "replaced 2");
    // SIGTERM: a clean end.
    kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(wait_exit(&mut c).code(), Some(0));

    // No --logfile: exit 1.
    let st = Command::new(env!("CARGO_BIN_EXE_virt-tail"))
        .arg("--other")
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(1));
}
