//! The binary with a standard error (or output) whose reader went away: a
//! pipe without a reader, where every write fails with EPIPE (Rust ignores
//! SIGPIPE). `eprintln!` and tracing-subscriber's error report panic there,
//! which made a refusal exit 101 instead of 2 and a running launcher end
//! at its next log line. No guest, no root needed.

// No reaper runs in this test process: std's own waits are the right ones.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, missing_docs)]

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_virt-launcher");

/// The write end of a pipe whose read end is already closed.
fn readerless_pipe() -> Stdio {
    let (r, w): (OwnedFd, OwnedFd) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    drop(r);
    Stdio::from(w)
}

/// Runs `cmd` with standard error to a pipe without a reader: (exit code,
/// standard output).
fn with_closed_stderr(mut cmd: Command) -> (Option<i32>, String) {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(readerless_pipe())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Refusals keep their exit code (2: input refused) however their message
/// fails to go out: a bad flag, a bad `convert` input, and pod mode's bad
/// `STANDALONE_VMI` (which also logs the error as a JSON line through
/// tracing first).
#[test]
fn refusals_exit_2_with_a_closed_stderr() {
    let mut c = Command::new(BIN);
    c.arg("--no-such-flag");
    assert_eq!(with_closed_stderr(c).0, Some(2), "bad flag");

    let mut c = Command::new(BIN);
    c.args(["convert", "/nonexistent/vmi.yaml"]);
    assert_eq!(
        with_closed_stderr(c).0,
        Some(2),
        "convert of a missing file"
    );

    let mut c = Command::new(BIN);
    c.env("STANDALONE_VMI", "not: [a vmi")
        .env_remove("RUST_LOG");
    assert_eq!(with_closed_stderr(c).0, Some(2), "bad STANDALONE_VMI");

    // --help goes to standard output, which still has a reader.
    let mut c = Command::new(BIN);
    c.arg("--help");
    let (code, out) = with_closed_stderr(c);
    assert_eq!(code, Some(0));
    assert!(out.contains("Usage:"), "{out}");
}

/// `convert` whose reader went away (`| head -c0`) is not a failure: what
/// the reader wanted was written. A closed standard error does not change
/// a good conversion's result either.
#[test]
fn convert_with_closed_stdout_or_stderr_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(
        &vmi,
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec:\n  domain: {devices: {}, memory: {guest: 64Mi}}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("convert")
        .arg(&vmi)
        .stdin(Stdio::null())
        .stdout(readerless_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let mut c = Command::new(BIN);
    c.arg("convert").arg(&vmi);
    let (code, xml) = with_closed_stderr(c);
    assert_eq!(code, Some(0));
    assert!(xml.starts_with("<domain"), "{xml}");
}

/// A long-running command whose log reader is gone keeps working:
/// `migration-proxy` logs each listener it makes and each failed
/// connection, all to the readerless pipe, and still says `ready`, serves
/// a connection (whose forward fails and is logged) and ends with 0 on
/// SIGTERM. Before, its first log line ended it with 101.
#[test]
fn a_running_launcher_survives_its_log_reader() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    let mut child = Command::new(BIN)
        .args(["migration-proxy", "--uid", "u-1"])
        .arg("--source-share")
        .arg(&src)
        .arg("--target-share")
        .arg(&dst)
        .arg("--target-libvirt-socket")
        .arg(dir.path().join("absent-sock"))
        .env("TMPDIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(readerless_pipe())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n", "the proxy ended before it was ready");
    // A connection to the source socket: forwarded to the absent target
    // socket, which fails and is logged (a write to the closed stderr).
    let sock = src.join("migrationproxy/u-1-source.sock");
    let c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let mut buf = [0u8; 1];
    // The proxy closes the connection after its forward failed.
    let _ = std::io::Read::read(&mut &c, &mut buf);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the proxy ended after logging to a closed stderr"
    );
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the proxy did not end on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{status}");
}
