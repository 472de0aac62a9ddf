//! `virt-launcher-monitor`: see the library's documentation.

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

use std::process::ExitCode;

use virt_launcher_monitor::{flags, run};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flags = match flags::parse(&args) {
        Ok(f) => f,
        Err(e) => {
            // pflag's parse errors exit 2.
            logging::stderr_line(&format!("virt-launcher-monitor: {e}"));
            return ExitCode::from(2);
        }
    };
    if flags.help {
        if logging::stdout_text(flags::USAGE).is_err() {
            return ExitCode::from(1);
        }
        return ExitCode::SUCCESS;
    }
    logging::init("virt-launcher-monitor", flags.verbosity);
    if let Ok(v) = std::env::var("VIRT_LAUNCHER_LOG_VERBOSITY") {
        match logging::env_verbosity() {
            Some(n) => tracing::debug!("set log verbosity to {n}"),
            None => tracing::warn!(
                "failed to set log verbosity. The value of logVerbosity label should be an integer, got {v} instead."
            ),
        }
    }
    if let Err(e) = process_subreaper() {
        tracing::warn!(reason = %e, "cannot become a child subreaper: orphans of virt-launcher go to our parent");
    }
    let mut monitor = match run::Monitor::new() {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(reason = %e, "monitoring virt-launcher failed");
            return ExitCode::from(1);
        }
    };
    let cfg = run::Config::kubevirt(
        flags.launcher_args.clone(),
        flags.container_disk_dir.clone(),
    );
    let res = run::run_and_monitor(&mut monitor, &cfg);
    let failed = !matches!(res, Ok(0));
    if flags.keep_after_failure && failed {
        tracing::info!(
            "keeping virt-launcher container alive since --keep-after-failure is set to true"
        );
        loop {
            monitor.handle_signals(None);
        }
    }
    let code = match res {
        Ok(code) => {
            tracing::info!("virt-launcher-monitor: Exiting...");
            code
        }
        Err(e) => {
            tracing::error!(reason = %e, "monitoring virt-launcher failed");
            1
        }
    };
    run::kill_descendants(&mut monitor, &cfg.proc_root);
    // Go's os.Exit(code): -1 (a signal ended the launcher) exits 255.
    ExitCode::from(code.to_le_bytes()[0])
}

fn process_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}
