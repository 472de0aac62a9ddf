//! Why phase 1 (the pod links, the bindings' bridges, taps and rules)
//! failed: [`Phase1Error`].

/// A failure of phase 1 or of a look-up of the pod's links. Its text is
/// one line naming the command, file or link, as the launcher logs it and
/// answers it to virt-handler.
#[derive(Debug, thiserror::Error)]
pub enum Phase1Error {
    /// A program phase 1 runs (`ip`, `nft`) could not be started.
    #[error("{program}: {source} (install iproute2 and nftables)")]
    Missing {
        /// The program.
        program: String,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },
    /// A command failed or ran too long.
    #[error("{command}: {message}")]
    Command {
        /// The command line (`ip link add ...`).
        command: String,
        /// Its standard error on one line, or why it was killed.
        message: String,
    },
    /// A kernel setting (`/proc/sys/...`) or namespace file could not be
    /// written or opened.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A system call failed (`unshare`, `setns`, `if_nametoindex`).
    #[error("{what}: {source}")]
    Sys {
        /// What was being done (`entering the node network namespace`).
        what: String,
        /// The error number.
        #[source]
        source: nix::errno::Errno,
    },
    /// A thread that entered a network namespace panicked.
    #[error("{what}: thread panicked")]
    Panicked {
        /// The namespace's work (`node network namespace`).
        what: &'static str,
    },
    /// `ip -j addr show` gave no usable description of a link.
    #[error("{link}: {reason}")]
    LinkInfo {
        /// The link.
        link: String,
        /// What is missing or malformed.
        reason: String,
    },
    /// The bridge binding has no fake address for this interface index
    /// (KubeVirt's `169.254.75.1<index>` is no IPv4 address).
    #[error("interface index {index}: no fake bridge address for it")]
    NoFakeAddress {
        /// The interface's index in the VMI.
        index: usize,
    },
}

impl Phase1Error {
    /// [`Phase1Error::Command`] of `program args...` from a failed run.
    pub(crate) fn from_run(program: &str, args: &[&str], e: process::RunError) -> Self {
        match e {
            process::RunError::Spawn { source, .. } => Phase1Error::Missing {
                program: program.to_owned(),
                source,
            },
            process::RunError::Failed { stderr, .. } => Phase1Error::Command {
                command: command_line(program, args),
                message: stderr.split_whitespace().collect::<Vec<_>>().join(" "),
            },
            other @ process::RunError::Timeout { .. } => Phase1Error::Command {
                command: command_line(program, args),
                message: other.to_string(),
            },
        }
    }
}

fn command_line(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::Phase1Error;

    #[test]
    fn a_failed_command_is_named_with_its_error_on_one_line() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "echo 'bad\n  thing' >&2; exit 3"]);
        let e = process::run(cmd, std::time::Duration::from_secs(10), 1024).unwrap_err();
        let e = Phase1Error::from_run("sh", &["-c", "x"], e);
        assert!(matches!(e, Phase1Error::Command { .. }), "{e:?}");
        assert_eq!(e.to_string(), "sh -c x: bad thing");
        let e = process::run(
            std::process::Command::new("/nonexistent/ip"),
            std::time::Duration::from_secs(10),
            1024,
        )
        .unwrap_err();
        let e = Phase1Error::from_run("ip", &[], e);
        assert!(matches!(e, Phase1Error::Missing { .. }), "{e:?}");
        assert!(
            e.to_string().ends_with("(install iproute2 and nftables)"),
            "{e}"
        );
    }
}
