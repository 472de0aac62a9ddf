//! `container-disk`: what KubeVirt's container-disk sidecar runs
//! (v1.6.6 `cmd/container-disk-v2alpha/main.c`, installed as
//! `/usr/bin/container-disk` and copied by an init container into the
//! containerDisk's own image, which may be `FROM scratch`: the image build
//! links it statically).
//!
//! `container-disk --copy-path P` creates the directory of `P` (mode 0777)
//! when missing, listens on the Unix socket `P.sock` (backlog 50,
//! non-blocking) and waits: each second it checks that the socket file
//! still exists (virt-handler or the monitor removing it ends the
//! container: exit 0) and accepts and closes any connection, without
//! sleeping while connections are queued. SIGTERM removes the socket and
//! exits 0. `--no-op` exits 0 at once. Exit 1: a copy path over 102 bytes
//! (`P.sock` must fit `sun_path`), an unknown option or a missing
//! argument, a directory or socket that cannot be made, an `accept`
//! error. Options follow `getopt_long`: `--copy-path P`,
//! `--copy-path=P`, `-c P`, `-cP`, unambiguous prefixes (`--copy`),
//! operands ignored. Errors go to standard error as the C program writes
//! them: the time (`asctime`, here in UTC: a scratch image has no time
//! zone), then `error: <message>`.
//!
//! One difference: without `--copy-path` KubeVirt's program reads an
//! uninitialised directory name; here it exits 1 naming the option.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest copy path: `P.sock` and its NUL must fit the 108 bytes of
/// `sun_path`.
pub const MAX_COPY_PATH: usize = 102;
/// `listen`'s backlog (KubeVirt's `LISTEN_BACKLOG`).
pub const LISTEN_BACKLOG: i32 = 50;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// `--no-op`: exit 0.
    NoOp,
    /// Serve the socket of this copy path.
    Serve(PathBuf),
}

/// Parses the options as `getopt_long("c:", {copy-path: required, no-op})`
/// does; `--no-op` acts where it appears (options after it are not read).
///
/// # Errors
/// The message to log (exit 1).
pub fn parse(args: &[String]) -> Result<Action, String> {
    let mut copy: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let matches: Vec<&str> = ["copy-path", "no-op"]
                .into_iter()
                .filter(|o| o.starts_with(name) && !name.is_empty())
                .collect();
            let opt = match matches.as_slice() {
                [one] => *one,
                [] => return Err(format!("unrecognized option '--{name}'")),
                _ => return Err(format!("option '--{name}' is ambiguous")),
            };
            if opt == "no-op" {
                if value.is_some() {
                    return Err("option '--no-op' doesn't allow an argument".into());
                }
                return Ok(Action::NoOp);
            }
            let v = match value {
                Some(v) => v,
                None if i < args.len() => {
                    i += 1;
                    args[i - 1].clone()
                }
                None => return Err("option '--copy-path' requires an argument".into()),
            };
            copy = Some(check_len(v)?);
        } else if let Some(short) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            match chars.next() {
                Some('c') => {
                    let rest: String = chars.collect();
                    let v = if !rest.is_empty() {
                        rest
                    } else if i < args.len() {
                        i += 1;
                        args[i - 1].clone()
                    } else {
                        return Err("option requires an argument -- 'c'".into());
                    };
                    copy = Some(check_len(v)?);
                }
                Some(c) => return Err(format!("invalid option -- '{c}'")),
                None => {}
            }
        }
        // Anything else is an operand: getopt_long moves it aside.
    }
    copy.map(|c| Action::Serve(PathBuf::from(c)))
        .ok_or_else(|| "--copy-path is required".into())
}

fn check_len(v: String) -> Result<String, String> {
    if v.len() > MAX_COPY_PATH {
        return Err(format!(
            "copy path can not be longer than {MAX_COPY_PATH} characters"
        ));
    }
    Ok(v)
}

/// The socket of copy path `copy`: `<copy>.sock`.
pub fn socket_path(copy: &Path) -> PathBuf {
    let mut s = copy.as_os_str().to_owned();
    s.push(".sock");
    PathBuf::from(s)
}

/// Writes `message` to standard error as KubeVirt's `error_log` does.
pub fn error_log(message: &str) {
    logging::stderr_text(&format!(
        "{}\nerror: {message}\n",
        asctime_utc(std::time::SystemTime::now())
    ));
}

/// `asctime`'s text for `t` in UTC, without its newline:
/// `Wed Jun 30 21:49:08 1993`.
pub fn asctime_utc(t: std::time::SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {year}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Creates the socket of `copy` (and its directory) and keeps it until
/// the socket file disappears (returns `Ok`) or SIGTERM (which removes
/// it and exits 0 from the signal thread).
///
/// # Errors
/// The message to log (exit 1).
pub fn serve(copy: &Path) -> Result<(), String> {
    let sock = socket_path(copy);
    let on_term = sock.clone();
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM])
        .map_err(|_| "failed to register SIGTERM callback".to_owned())?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = std::fs::remove_file(&on_term);
            std::process::exit(0);
        }
    });
    let dir = copy
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if std::fs::metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .mode(0o777)
            .create(dir)
            .map_err(|_| format!("failed to create disk directory {}", dir.display()))?;
    }
    let listener = listen(&sock).map_err(|e| e.to_string())?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("failed to listen socket {}: {e}", sock.display()))?;
    let mut received = false;
    loop {
        if !received {
            std::thread::sleep(Duration::from_secs(1));
        }
        if std::fs::metadata(&sock).is_err() {
            error_log(&format!("socket {} does not exist anymore", sock.display()));
            return Ok(());
        }
        match listener.accept() {
            // The only thing to do with a connection is to close it.
            Ok((conn, _)) => {
                drop(conn);
                received = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => received = false,
            Err(e) => {
                return Err(format!(
                    "failed to accept connections on the socket: {}",
                    e.raw_os_error().unwrap_or(0)
                ))
            }
        }
    }
}

/// Binds and listens with KubeVirt's backlog (std's `bind` listens with
/// its own; a second `listen(2)` on a listening socket only changes it).
fn listen(sock: &Path) -> Result<UnixListener, String> {
    let l = UnixListener::bind(sock)
        .map_err(|_| format!("failed to bind socket {}", sock.display()))?;
    rustix::net::listen(&l, LISTEN_BACKLOG)
        .map_err(|_| format!("failed to listen socket {}", sock.display()))?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_are_read_as_getopt_long_reads_them() {
        let p = |a: &[&str]| parse(&args(a));
        let serve = |s: &str| Ok(Action::Serve(PathBuf::from(s)));
        assert_eq!(p(&["--copy-path", "/d/disk_0"]), serve("/d/disk_0"));
        assert_eq!(p(&["--copy-path=/d/x"]), serve("/d/x"));
        assert_eq!(p(&["--copy", "/d/x"]), serve("/d/x"));
        assert_eq!(p(&["-c", "/d/x"]), serve("/d/x"));
        assert_eq!(p(&["-c/d/x"]), serve("/d/x"));
        assert_eq!(p(&["operand", "-c", "/d/x"]), serve("/d/x"));
        assert_eq!(p(&["--no-op"]), Ok(Action::NoOp));
        assert_eq!(p(&["--no"]), Ok(Action::NoOp));
        // --no-op acts where it is: a bad option after it is never read.
        assert_eq!(p(&["--no-op", "--bad"]), Ok(Action::NoOp));
        assert_eq!(p(&["--bad"]), Err("unrecognized option '--bad'".into()));
        assert_eq!(p(&["-x"]), Err("invalid option -- 'x'".into()));
        assert_eq!(
            p(&["--copy-path"]),
            Err("option '--copy-path' requires an argument".into())
        );
        assert_eq!(p(&["-c"]), Err("option requires an argument -- 'c'".into()));
        assert_eq!(p(&[]), Err("--copy-path is required".into()));
        let long = format!("/{}", "a".repeat(MAX_COPY_PATH));
        assert_eq!(
            p(&["--copy-path", &long]),
            Err("copy path can not be longer than 102 characters".into())
        );
        let fits = format!("/{}", "a".repeat(MAX_COPY_PATH - 1));
        assert_eq!(p(&["-c", &fits]), serve(&fits));
    }

    #[test]
    fn asctime_is_cs_layout() {
        let t = std::time::UNIX_EPOCH + Duration::from_secs(741_476_948);
        assert_eq!(asctime_utc(t), "Wed Jun 30 21:49:08 1993");
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_709_251_199);
        assert_eq!(asctime_utc(t), "Thu Feb 29 23:59:59 2024");
        assert_eq!(
            asctime_utc(std::time::UNIX_EPOCH),
            "Thu Jan  1 00:00:00 1970"
        );
    }
}
