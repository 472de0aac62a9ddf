//! The subcommands behind the binary's command line: `convert` ([`convert`]),
//! `run`, KubeVirt's pod mode and `pod-network-phase1` ([`run`]), the
//! image's QEMU capabilities cache ([`capscache`]).

pub mod capscache;
pub mod convert;
pub mod run;

/// Parses a `--vm-rollout-strategy` value.
///
/// # Errors
/// The unknown value, with the known ones.
pub fn parse_rollout_strategy(s: &str) -> Result<api::cluster::VmRolloutStrategy, String> {
    s.parse()
        .map_err(|e: api::cluster::UnknownRolloutStrategy| e.to_string())
}
