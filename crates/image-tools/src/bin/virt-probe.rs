//! `virt-probe` (see [`image_tools::probe`]).

use clap::Parser;
use image_tools::probe::{run, Flags};

fn main() {
    let flags = Flags::parse();
    logging::init("virt-probe", flags.v.unwrap_or(0));
    let code = run(&flags, &mut std::io::stdout().lock());
    std::process::exit(code);
}
