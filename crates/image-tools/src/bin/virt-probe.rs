//! `virt-probe` (see [`image_tools::probe`]).

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

use clap::Parser;
use image_tools::probe::{run, Flags};

fn main() {
    let flags = Flags::parse();
    logging::init("virt-probe", flags.v.unwrap_or(0));
    let code = run(&flags, &mut std::io::stdout().lock());
    std::process::exit(code);
}
