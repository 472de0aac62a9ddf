//! The launcher image's other programs, as KubeVirt v1.6.6's launcher
//! image ships them in `/usr/bin` (`cmd/virt-launcher/BUILD.bazel`), each
//! with KubeVirt's flags and exit codes: [`container_disk`]
//! (`container-disk`, the container-disk sidecar's socket keeper),
//! [`tail`] (`virt-tail`, the `guest-console-log` container), [`freezer`]
//! (`virt-freezer`, backup hooks) and [`probe`] (`virt-probe`, guest-agent
//! probes); [`client`] holds the launcher calls the last two make. The
//! binaries in `src/bin` are thin.

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

pub mod client;
pub mod container_disk;
pub mod freezer;
pub mod probe;
pub mod tail;

/// A boolean flag's value as Go's `strconv.ParseBool` reads it (pflag's
/// `--flag=value`).
///
/// # Errors
/// Any other text.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("strconv.ParseBool: parsing {s:?}: invalid syntax")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn go_booleans() {
        assert_eq!(super::parse_go_bool("T"), Ok(true));
        assert_eq!(super::parse_go_bool("0"), Ok(false));
        assert!(super::parse_go_bool("yes").is_err());
    }
}
