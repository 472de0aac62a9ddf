//! `virt-freezer` (see [`image_tools::freezer`]).

use clap::Parser;
use image_tools::freezer::{run, Flags, SOCKET};

fn main() {
    logging::init("freezer", 0);
    let flags = Flags::parse();
    std::process::exit(run(&flags, std::path::Path::new(SOCKET)));
}
