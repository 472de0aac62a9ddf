//! Domain states and reasons, named as KubeVirt names them
//! (`pkg/virt-launcher/virtwrap/api` `LifeCycle` and `StateChangeReason`).

/// KubeVirt's name of libvirt domain state `state` (`virDomainState`).
pub fn lifecycle(state: u32) -> &'static str {
    match state {
        1 => "Running",
        2 => "Blocked",
        3 => "Paused",
        4 => "ShuttingDown",
        5 => "Shutoff",
        6 => "Crashed",
        7 => "PMSuspended",
        _ => "NoState",
    }
}

/// KubeVirt's name of `reason` in `state` (the per-state reason enums of
/// libvirt; reasons KubeVirt does not name are `Unknown`).
pub fn reason(state: u32, reason: i32) -> &'static str {
    match (state, reason) {
        (4, 1) => "User",
        (5, 1) => "Shutdown",
        (5, 2) => "Destroyed",
        (5, 3) => "Crashed",
        (5, 4) => "Migrated",
        (5, 5) => "Saved",
        (5, 6) => "Failed",
        (5, 7) => "FromSnapshot",
        (6, 1) => "Panicked",
        (3, 1) => "User",
        (3, 2) => "Migration",
        (3, 3) => "Save",
        (3, 4) => "Dump",
        (3, 5) => "IOError",
        (3, 6) => "Watchdog",
        (3, 7) => "FromSnapshot",
        (3, 8) => "ShuttingDown",
        (3, 9) => "Snapshot",
        (3, 10) => "Crashed",
        (3, 11) => "StartingUp",
        (3, 12) => "Postcopy",
        (3, 13) => "PostcopyFailed",
        _ => "Unknown",
    }
}

/// Reason for a domain that does not exist.
pub const NON_EXISTENT: &str = "NonExistent";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_kubevirt() {
        assert_eq!((lifecycle(1), reason(1, 1)), ("Running", "Unknown"));
        assert_eq!((lifecycle(5), reason(5, 1)), ("Shutoff", "Shutdown"));
        assert_eq!((lifecycle(5), reason(5, 2)), ("Shutoff", "Destroyed"));
        assert_eq!((lifecycle(3), reason(3, 1)), ("Paused", "User"));
        assert_eq!((lifecycle(4), reason(4, 1)), ("ShuttingDown", "User"));
        assert_eq!((lifecycle(6), reason(6, 1)), ("Crashed", "Panicked"));
        assert_eq!((lifecycle(0), lifecycle(99)), ("NoState", "NoState"));
    }
}
