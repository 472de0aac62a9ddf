//! The subcommands behind the binary's command line: `convert` ([`convert`]),
//! `run`, KubeVirt's pod mode and `pod-network-phase1` ([`run`]).

pub mod convert;
pub mod run;

use std::io::Read;
use std::path::Path;

use crate::error::LauncherError;

/// Largest manifest accepted (a VMI is a few KiB).
const MAX_INPUT: u64 = 16 << 20;

/// Reads a manifest from `path` (`-`: standard input), at most 16 MiB.
///
/// # Errors
/// [`LauncherError::Input`] naming the file: unreadable, not a regular
/// file, or larger than 16 MiB.
pub fn read_input(path: &Path) -> Result<Vec<u8>, LauncherError> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT + 1)
            .read_to_end(&mut buf)
            .map_err(|e| LauncherError::Input(format!("reading standard input: {e}")))?;
        if buf.len() as u64 > MAX_INPUT {
            return Err(LauncherError::Input(
                "standard input: larger than 16 MiB".into(),
            ));
        }
        return Ok(buf);
    }
    let err = |e: std::io::Error| LauncherError::Input(format!("{}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(err)?;
    if !meta.is_file() {
        return Err(LauncherError::Input(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut buf))
        .map_err(err)?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(LauncherError::Input(format!(
            "{}: larger than 16 MiB",
            path.display()
        )));
    }
    Ok(buf)
}

/// Parses a `--vm-rollout-strategy` value.
///
/// # Errors
/// The unknown value, with the known ones.
pub fn parse_rollout_strategy(s: &str) -> Result<api::cluster::VmRolloutStrategy, String> {
    s.parse()
        .map_err(|e: api::cluster::UnknownRolloutStrategy| e.to_string())
}
