//! The glibc tunables virt-launcher runs with (issue 20, item 3).
//!
//! glibc keeps the stacks of exited threads for reuse, up to 40 MiB of
//! them (`glibc.pthread.stack_cache_size`), each with the pages its thread
//! touched last (its TLS and top frames, 16–24 KiB here). The launcher's
//! start-up runs about twenty short-lived threads (libvirt version and
//! capability checks, VMI syncs, start-up helpers); measured on the release
//! build (vmi-sata, TCG, 15 s after GUEST-READY), five dead stacks stayed
//! cached for the launcher's life: 16 stack mappings, 280 KiB resident,
//! against 11 and 180 KiB with the cache off (RssAnon 3,260 → 3,168 KiB).
//! A thread started later costs an `mmap` of its stack instead, a few
//! microseconds; the launcher starts threads rarely once the VM runs.
//!
//! glibc reads tunables once, when the program is loaded, from the
//! `GLIBC_TUNABLES` environment variable, so whoever starts the launcher
//! sets them: virt-launcher-monitor in a pod, the outer process of
//! `virt-launcher run` standalone ([`launcher_glibc_tunables`]). The
//! daemons the launcher starts inherit them (libvirt clears QEMU's
//! environment); a setting the operator already made is kept.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The name of glibc's tunables variable.
pub const GLIBC_TUNABLES: &str = "GLIBC_TUNABLES";

/// The tunables the launcher runs with, `name=value` (see the module
/// docs for each one's measurement).
pub const LAUNCHER_TUNABLES: &[(&str, &str)] = &[("glibc.pthread.stack_cache_size", "0")];

/// The value of `GLIBC_TUNABLES` to start the launcher with, from the
/// calling process's own, taken as bytes (a value that is not UTF-8 is
/// still the operator's: [`launcher_glibc_tunables`]).
pub fn for_launcher() -> OsString {
    let existing = std::env::var_os(GLIBC_TUNABLES);
    OsString::from_vec(launcher_glibc_tunables(
        existing.as_deref().map(OsStrExt::as_bytes),
    ))
}

/// The longest environment string the kernel passes to a new program,
/// `NAME=value` and its NUL (`MAX_ARG_STRLEN`, 32 pages): a longer one
/// makes `execve` fail with E2BIG.
const MAX_ENV_STRING: usize = 32 * 4096;

/// The value of `GLIBC_TUNABLES` to start the launcher with: `existing`
/// (the starter's own value, colon-separated `name=value` items, as bytes)
/// with each of [`LAUNCHER_TUNABLES`] appended that `existing` does not
/// already set. When the appended value would be longer than the kernel
/// passes to a program ([`MAX_ENV_STRING`]), `existing` is kept as it is:
/// the launcher then starts with glibc's defaults rather than not at all.
pub fn launcher_glibc_tunables(existing: Option<&[u8]>) -> Vec<u8> {
    let existing = existing.unwrap_or_default();
    let items: Vec<&[u8]> = existing
        .split(|&b| b == b':')
        .filter(|item| !item.is_empty())
        .collect();
    let set = |name: &str| {
        items.iter().any(|item| {
            item.split(|&b| b == b'=').next() == Some(name.as_bytes()) && item.contains(&b'=')
        })
    };
    let mut out: Vec<u8> = items.join(&b':');
    for (name, value) in LAUNCHER_TUNABLES {
        if !set(name) {
            if !out.is_empty() {
                out.push(b':');
            }
            out.extend_from_slice(format!("{name}={value}").as_bytes());
        }
    }
    if GLIBC_TUNABLES.len() + 1 + out.len() + 1 > MAX_ENV_STRING {
        return existing.to_vec();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(existing: Option<&[u8]>) -> String {
        String::from_utf8_lossy(&launcher_glibc_tunables(existing)).into_owned()
    }

    #[test]
    fn the_launcher_tunables_are_added_to_nothing() {
        assert_eq!(with(None), "glibc.pthread.stack_cache_size=0");
        assert_eq!(with(Some(b"")), "glibc.pthread.stack_cache_size=0");
    }

    #[test]
    fn an_operator_setting_is_kept_and_others_are_kept_in_order() {
        assert_eq!(
            with(Some(b"glibc.malloc.check=3")),
            "glibc.malloc.check=3:glibc.pthread.stack_cache_size=0"
        );
        assert_eq!(
            with(Some(
                b"glibc.pthread.stack_cache_size=1048576:glibc.malloc.check=3"
            )),
            "glibc.pthread.stack_cache_size=1048576:glibc.malloc.check=3"
        );
    }

    #[test]
    fn a_value_that_is_not_utf8_is_still_the_operators() {
        let v: &[u8] = b"glibc.pthread.stack_cache_size=4096:x=\xff";
        assert_eq!(launcher_glibc_tunables(Some(v)), v);
        assert_eq!(
            launcher_glibc_tunables(Some(b"x=\xff")),
            b"x=\xff:glibc.pthread.stack_cache_size=0"
        );
    }

    #[test]
    fn a_value_the_kernel_would_not_pass_is_kept_as_it_is() {
        // "GLIBC_TUNABLES=" + value + NUL at the kernel's limit once the
        // launcher's item is added: kept unchanged, so exec still works.
        let fits = MAX_ENV_STRING - GLIBC_TUNABLES.len() - 2;
        let long = vec![b'a'; fits - "x=:glibc.pthread.stack_cache_size=0".len()];
        let v = [b"x=".as_slice(), &long].concat();
        assert_eq!(launcher_glibc_tunables(Some(&v)).len(), fits);
        let v = [v, b"a".to_vec()].concat();
        assert_eq!(launcher_glibc_tunables(Some(&v)), v);
    }
}
