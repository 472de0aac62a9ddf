//! `virt-freezer` (see [`image_tools::freezer`]).

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

use clap::Parser;
use image_tools::freezer::{run, Flags, SOCKET};

fn main() {
    logging::init("freezer", 0);
    let flags = Flags::parse();
    std::process::exit(run(&flags, std::path::Path::new(SOCKET)));
}
