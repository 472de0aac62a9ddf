//! `container-disk` (see [`image_tools::container_disk`]).

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

use image_tools::container_disk::{error_log, parse, serve, Action};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match parse(&args) {
        Ok(Action::NoOp) => 0,
        Ok(Action::Serve(copy)) => match serve(&copy) {
            Ok(()) => 0,
            Err(e) => {
                error_log(&e);
                1
            }
        },
        Err(e) => {
            error_log(&e);
            1
        }
    };
    std::process::exit(code);
}
