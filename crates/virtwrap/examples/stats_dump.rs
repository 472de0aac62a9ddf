//! Prints KubeVirt's `GetDomainStats` JSON of one domain.
//!
//! ```text
//! cargo run -p virtwrap --example stats_dump -- <libvirt-uri> <domain-name>
//! ```

use std::process::ExitCode;

use virt::connect::Connect;
use virt::domain::Domain;

fn run(uri: &str, name: &str) -> Result<String, String> {
    virt::error::clear_error_callback();
    let conn = Connect::open(Some(uri)).map_err(|e| format!("connect {uri}: {e}"))?;
    let dom = Domain::lookup_by_name(&conn, name).map_err(|e| format!("lookup {name}: {e}"))?;
    let stats = virtwrap::stats::collect(&dom).map_err(|e| format!("collect: {e}"))?;
    serde_json::to_string_pretty(&stats).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, uri, name] = args.as_slice() else {
        eprintln!("usage: stats_dump <libvirt-uri> <domain-name>");
        return ExitCode::from(2);
    };
    match run(uri, name) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stats_dump: {e}");
            ExitCode::FAILURE
        }
    }
}
