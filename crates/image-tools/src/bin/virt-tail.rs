//! `virt-tail` (see [`image_tools::tail`]).

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn main() {
    logging::init("virt-tail", 0);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = image_tools::tail::logfile(&args) else {
        tracing::debug!("logfile flags must be provided");
        std::process::exit(1);
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            tracing::error!(reason = %e, "cannot handle signal {sig}");
            std::process::exit(1);
        }
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = image_tools::tail::follow(Path::new(&file), &stop, &mut out) {
        tracing::debug!("received error: {e}");
        std::process::exit(1);
    }
}
