//! Logs: one JSON object per line as KubeVirt's components write them
//! (`{"component":"virt-launcher","level":"info","msg":...,"pos":...,
//! "timestamp":...}` plus the event's fields), or human-readable lines when
//! standard error is a terminal. Shared by `virt-launcher` and
//! `virt-launcher-monitor`, each with its own `component`.

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

use std::fmt;
use std::io::{IsTerminal, Write};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// KubeVirt's log line format, for the component named.
struct KubeVirtJson {
    component: &'static str,
}

struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(key(field), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(key(field), Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(key(field), Value::from(value));
    }
}

fn key(field: &Field) -> String {
    match field.name() {
        "message" => "msg".to_owned(),
        n => n.to_owned(),
    }
}

impl<S, N> FormatEvent<S, N> for KubeVirtJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut f = Fields(Map::new());
        event.record(&mut f);
        let mut obj = Map::new();
        obj.insert("component".into(), Value::from(self.component));
        let level = match *meta.level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG | Level::TRACE => "debug",
        };
        obj.insert("level".into(), Value::from(level));
        let file = meta.file().and_then(|p| p.rsplit('/').next()).unwrap_or("");
        obj.insert(
            "pos".into(),
            Value::from(format!("{file}:{}", meta.line().unwrap_or(0))),
        );
        let mut ts = String::new();
        SystemTime.format_time(&mut Writer::new(&mut ts))?;
        obj.insert("timestamp".into(), Value::from(ts));
        obj.extend(f.0);
        writeln!(w, "{}", Value::Object(obj))
    }
}

/// Installs the global logger for `component` (KubeVirt's
/// `log.InitializeLogging` name, e.g. `virt-launcher`). Verbosity: KubeVirt's
/// `-v` (or `VIRT_LAUNCHER_LOG_VERBOSITY` when it is an integer); 0-2 info,
/// 3-4 adds debug, 5+ trace. `RUST_LOG` overrides when set. A logger that
/// cannot be installed (one is already) is reported on standard error.
pub fn init(component: &'static str, verbosity: u32) {
    let verbosity = env_verbosity().unwrap_or(verbosity);
    let level = match verbosity {
        0..=2 => "info",
        3..=4 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| TolerantStderr);
    let res = if std::io::stderr().is_terminal() {
        builder.with_target(false).try_init()
    } else {
        builder.event_format(KubeVirtJson { component }).try_init()
    };
    if let Err(e) = res {
        stderr_line(&format!("{component}: cannot initialise logging: {e}"));
    }
}

/// Standard error for the log lines, never failing: a write error (EPIPE
/// when the reader of the container log or of a terminal pipe went away,
/// Rust ignores SIGPIPE) is dropped and the line counted as written.
/// tracing-subscriber's own writer would report the error with `eprintln!`,
/// which panics on the same closed pipe: a VM must not end because its
/// log reader did.
struct TolerantStderr;

impl Write for TolerantStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().lock().write_all(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `text` and a newline to standard error in one write, ignoring
/// errors: `eprintln!` for the binaries, without its panic when standard
/// error is a closed pipe (the message cannot be delivered then; the exit
/// code still tells what happened).
pub fn stderr_line(text: &str) {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    stderr_text(&line);
}

/// Writes `text` to standard error as it is, ignoring errors (see
/// [`stderr_line`]).
pub fn stderr_text(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Writes `text` to standard output and flushes it: `print!` without the
/// panic. A reader that went away (`| head`, EPIPE) is not an error: what
/// it read was what it wanted.
///
/// # Errors
/// Any other write error (a full disk behind a redirection).
pub fn stdout_text(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// `VIRT_LAUNCHER_LOG_VERBOSITY` when it is set to a non-negative integer
/// (surrounding white space allowed); `None` when unset or not an integer.
pub fn env_verbosity() -> Option<u32> {
    std::env::var("VIRT_LAUNCHER_LOG_VERBOSITY")
        .ok()
        .and_then(|v| v.trim().parse().ok())
}
