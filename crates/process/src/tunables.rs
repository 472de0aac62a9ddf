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

/// The name of glibc's tunables variable.
pub const GLIBC_TUNABLES: &str = "GLIBC_TUNABLES";

/// The tunables the launcher runs with, `name=value` (see the module
/// docs for each one's measurement).
pub const LAUNCHER_TUNABLES: &[(&str, &str)] = &[("glibc.pthread.stack_cache_size", "0")];

/// The value of `GLIBC_TUNABLES` to start the launcher with, from the
/// calling process's own ([`launcher_glibc_tunables`]).
pub fn for_launcher() -> String {
    launcher_glibc_tunables(std::env::var(GLIBC_TUNABLES).ok().as_deref())
}

/// The value of `GLIBC_TUNABLES` to start the launcher with: `existing`
/// (the starter's own value, colon-separated `name=value` items) with each
/// of [`LAUNCHER_TUNABLES`] appended that `existing` does not already set.
pub fn launcher_glibc_tunables(existing: Option<&str>) -> String {
    let existing = existing.unwrap_or("");
    let set: Vec<&str> = existing
        .split(':')
        .filter_map(|item| item.split_once('=').map(|(name, _)| name))
        .collect();
    let mut items: Vec<String> = existing
        .split(':')
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect();
    for (name, value) in LAUNCHER_TUNABLES {
        if !set.contains(name) {
            items.push(format!("{name}={value}"));
        }
    }
    items.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_tunables_are_added_to_nothing() {
        assert_eq!(
            launcher_glibc_tunables(None),
            "glibc.pthread.stack_cache_size=0"
        );
        assert_eq!(
            launcher_glibc_tunables(Some("")),
            "glibc.pthread.stack_cache_size=0"
        );
    }

    #[test]
    fn an_operator_setting_is_kept_and_others_are_kept_in_order() {
        assert_eq!(
            launcher_glibc_tunables(Some("glibc.malloc.check=3")),
            "glibc.malloc.check=3:glibc.pthread.stack_cache_size=0"
        );
        assert_eq!(
            launcher_glibc_tunables(Some(
                "glibc.pthread.stack_cache_size=1048576:glibc.malloc.check=3"
            )),
            "glibc.pthread.stack_cache_size=1048576:glibc.malloc.check=3"
        );
    }
}
