//! The monitor's command line.
//!
//! KubeVirt's monitor (`cmd/virt-launcher-monitor`, v1.6.6) reads three flags
//! of its own with pflag (`--container-disk-dir`, `--keep-after-failure`,
//! `--uid`) plus the Go flag `-v`, ignores every other flag (pflag's
//! `ParseErrorsWhitelist{UnknownFlags: true}`), and passes the whole command
//! line to `virt-launcher` with every argument that is exactly
//! `--keep-after-failure` removed (so `--keep-after-failure=true` would
//! reach the launcher, as in KubeVirt; virt-controller renders the bare form).
//!
//! pflag's rules followed here: `--name value` and `--name=value`; a boolean
//! takes no separate value (`--b=false` turns it off); an unknown
//! `--flag` without `=` consumes the next argument as its value unless that
//! starts with `-`; `--` ends the flags; single-dash flags are shorthands
//! (`-v 3`, `-v=3`, `-v3`); Go's `-v` is also spelt `--v`.

use std::fmt;
use std::path::PathBuf;

/// KubeVirt's default of `--container-disk-dir`.
pub const DEFAULT_CONTAINER_DISK_DIR: &str = "/var/run/kubevirt/container-disks";

/// The flag that the monitor keeps for itself (never passed to the launcher).
pub const KEEP_AFTER_FAILURE: &str = "--keep-after-failure";

/// What the monitor reads from its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    /// `--container-disk-dir`: where the `*.sock` files are removed on exit.
    pub container_disk_dir: PathBuf,
    /// `--keep-after-failure`: block forever after a failed launcher.
    pub keep_after_failure: bool,
    /// `--uid`: the VMI's UID (read, as KubeVirt does, and not used).
    pub uid: String,
    /// `-v`: the log verbosity (KubeVirt's default 0 here; the monitor's
    /// own lines are info or above).
    pub verbosity: u32,
    /// The launcher's arguments: all of them minus `--keep-after-failure`.
    pub launcher_args: Vec<String>,
    /// `-h` or `--help` before `--`: pflag prints the usage and exits 0.
    pub help: bool,
}

/// The monitor's usage (its own flags; the others are the launcher's).
pub const USAGE: &str = "Usage of virt-launcher-monitor:
      --container-disk-dir string   Base directory for container disk data (default \"/var/run/kubevirt/container-disks\")
      --keep-after-failure          virt-launcher will be kept alive after failure for debugging if set to true
      --uid string                  UID of the VirtualMachineInstance
  -v, --v Level                     number for the log level verbosity
Every other argument is passed to virt-launcher.
";

/// A command line the monitor refuses (pflag exits 2 on these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagError {
    /// The flag, as written (`--uid`).
    pub flag: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag, self.message)
    }
}

impl std::error::Error for FlagError {}

fn err(flag: &str, message: impl Into<String>) -> FlagError {
    FlagError {
        flag: flag.to_owned(),
        message: message.into(),
    }
}

/// pflag's boolean spellings (`strconv.ParseBool`).
fn parse_bool(flag: &str, v: &str) -> Result<bool, FlagError> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(err(flag, format!("invalid boolean value {v:?}"))),
    }
}

fn parse_verbosity(flag: &str, v: &str) -> Result<u32, FlagError> {
    v.parse().map_err(|_| {
        err(
            flag,
            format!("invalid verbosity {v:?}: want a non-negative integer"),
        )
    })
}

/// Parses the arguments after the program name (see the module docs).
///
/// # Errors
/// A [`FlagError`] naming the flag: a known flag without its value, a bad
/// boolean or verbosity.
pub fn parse(args: &[String]) -> Result<Flags, FlagError> {
    let mut flags = Flags {
        container_disk_dir: PathBuf::from(DEFAULT_CONTAINER_DISK_DIR),
        keep_after_failure: false,
        uid: String::new(),
        verbosity: 0,
        launcher_args: args
            .iter()
            .filter(|a| a.as_str() != KEEP_AFTER_FAILURE)
            .cloned()
            .collect(),
        help: false,
    };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if arg == "--" {
            break;
        }
        let (name, inline) = if let Some(long) = arg.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            }
        } else if let Some(short) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            if short == "h" {
                flags.help = true;
                continue;
            }
            // Shorthands: only `-v` is the monitor's; `-vN` and `-v=N`.
            if let Some(rest) = short.strip_prefix('v') {
                let inline = rest.strip_prefix('=').unwrap_or(rest);
                let v = if inline.is_empty() {
                    let v = args.get(i).ok_or_else(|| err("-v", "needs an argument"))?;
                    i += 1;
                    v.as_str()
                } else {
                    inline
                };
                flags.verbosity = parse_verbosity("-v", v)?;
            }
            // Another shorthand is unknown to the monitor: pflag skips it
            // (and its value only when given with `=` or attached).
            continue;
        } else {
            // A positional argument (e.g. a subcommand): passed on.
            continue;
        };
        let mut value = |flag: &str| -> Result<String, FlagError> {
            if let Some(v) = inline {
                return Ok(v.to_owned());
            }
            let v = args
                .get(i)
                .ok_or_else(|| err(flag, "flag needs an argument"))?;
            i += 1;
            Ok(v.clone())
        };
        match name {
            "container-disk-dir" => {
                flags.container_disk_dir = PathBuf::from(value("--container-disk-dir")?);
            }
            "uid" => flags.uid = value("--uid")?,
            "help" if inline.is_none() => flags.help = true,
            "v" => flags.verbosity = parse_verbosity("--v", &value("--v")?)?,
            "keep-after-failure" => {
                flags.keep_after_failure = match inline {
                    Some(v) => parse_bool("--keep-after-failure", v)?,
                    None => true,
                };
            }
            _ => {
                // Unknown: pflag takes the next argument as its value when
                // none was given inline and the next does not look like a flag.
                if inline.is_none() && args.get(i).is_some_and(|n| !n.starts_with('-')) {
                    i += 1;
                }
            }
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn virt_controllers_command_line() {
        let a = args(
            "--qemu-timeout 251s --name vmi --uid 1234-5678 --namespace default \
             --kubevirt-share-dir /var/run/kubevirt --ephemeral-disk-dir /var/run/kubevirt-ephemeral-disks \
             --container-disk-dir /var/run/kubevirt/container-disks --grace-period-seconds 45 \
             --hook-sidecars 0 --ovmf-path /usr/share/OVMF --disk-memory-limit 2097152000 \
             --run-as-nonroot --allow-emulation --keep-after-failure --simulate-crash",
        );
        let f = parse(&a).expect("parses");
        assert_eq!(f.uid, "1234-5678");
        assert_eq!(
            f.container_disk_dir,
            PathBuf::from("/var/run/kubevirt/container-disks")
        );
        assert!(f.keep_after_failure);
        let mut want = a.clone();
        want.retain(|x| x != "--keep-after-failure");
        assert_eq!(f.launcher_args, want);
        assert_eq!(f.launcher_args.len(), a.len() - 1);
    }

    #[test]
    fn defaults() {
        let f = parse(&[]).expect("parses");
        assert_eq!(
            f.container_disk_dir,
            PathBuf::from(DEFAULT_CONTAINER_DISK_DIR)
        );
        assert!(!f.keep_after_failure);
        assert_eq!(f.uid, "");
        assert_eq!(f.verbosity, 0);
        assert!(f.launcher_args.is_empty());
    }

    #[test]
    fn inline_values_and_bool_spellings() {
        let f = parse(&args(
            "--container-disk-dir=/x --uid=u --keep-after-failure=false",
        ))
        .expect("parses");
        assert_eq!(f.container_disk_dir, PathBuf::from("/x"));
        assert_eq!(f.uid, "u");
        assert!(!f.keep_after_failure);
        // Only the exact bare flag is removed, as KubeVirt's removeArg does.
        assert!(f
            .launcher_args
            .contains(&"--keep-after-failure=false".to_owned()));
        let f = parse(&args("--keep-after-failure=T")).expect("parses");
        assert!(f.keep_after_failure);
    }

    #[test]
    fn unknown_flags_consume_their_value_like_pflag() {
        // The next argument starts with '-': not the unknown flag's value.
        let f = parse(&args("--name --uid u")).expect("parses");
        assert_eq!(f.uid, "u");
        // It does not: it is the unknown flag's value.
        let f = parse(&args("--name vmi --uid u2")).expect("parses");
        assert_eq!(f.uid, "u2");
        // Even when it looks like a known flag's name without dashes.
        let f = parse(&args("--namespace uid --uid u3")).expect("parses");
        assert_eq!(f.uid, "u3");
        // `--name=--uid` carries its value inline: `u4` is then positional.
        let f = parse(&args("--name=--uid u4")).expect("parses");
        assert_eq!(f.uid, "");
    }

    #[test]
    fn verbosity_spellings() {
        for s in ["-v 4", "-v=4", "-v4", "--v 4", "--v=4"] {
            assert_eq!(parse(&args(s)).expect(s).verbosity, 4, "{s}");
        }
        let e = parse(&args("-v x")).expect_err("bad verbosity");
        assert_eq!(e.flag, "-v");
        assert!(e.to_string().contains("\"x\""), "{e}");
    }

    #[test]
    fn double_dash_ends_the_flags() {
        let f = parse(&args("-- --uid u --keep-after-failure")).expect("parses");
        assert_eq!(f.uid, "");
        assert!(!f.keep_after_failure);
        // KubeVirt removes the flag wherever it is.
        assert_eq!(f.launcher_args, args("-- --uid u"));
    }

    #[test]
    fn missing_values_name_the_flag() {
        for (s, flag) in [
            ("--uid", "--uid"),
            ("--container-disk-dir", "--container-disk-dir"),
            ("-v", "-v"),
        ] {
            let e = parse(&args(s)).expect_err(s);
            assert_eq!(e.flag, flag);
        }
        let e = parse(&args("--keep-after-failure=maybe")).expect_err("bad bool");
        assert_eq!(e.flag, "--keep-after-failure");
    }

    #[test]
    fn help_before_the_double_dash() {
        assert!(parse(&args("--name x --help")).expect("parses").help);
        assert!(parse(&args("-h")).expect("parses").help);
        assert!(!parse(&args("-- --help")).expect("parses").help);
        assert!(!parse(&args("--uid u")).expect("parses").help);
    }

    #[test]
    fn positional_arguments_pass_through() {
        let f = parse(&args("run vmi.yaml --uid u --use-emulation")).expect("parses");
        assert_eq!(f.uid, "u");
        assert_eq!(
            f.launcher_args,
            args("run vmi.yaml --uid u --use-emulation")
        );
    }
}
