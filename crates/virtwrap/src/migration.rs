//! Live migration's plan (the `migration` crate, re-exported) and the
//! one part of it that is libvirt's own: the migration flags.

pub use migration::*;
use virt::sys;

/// libvirt's migration flags as KubeVirt's `generateMigrationFlags`:
/// LIVE | PEER2PEER | PERSIST_DEST, plus NON_SHARED_INC for block
/// migration, UNSAFE, AUTO_CONVERGE, POSTCOPY, PAUSED (a paused domain
/// stays paused) and PARALLEL as the options say.
pub fn migration_flags(block_migration: bool, paused: bool, o: &MigrationOptions) -> u32 {
    let mut f = sys::VIR_MIGRATE_LIVE | sys::VIR_MIGRATE_PEER2PEER | sys::VIR_MIGRATE_PERSIST_DEST;
    if block_migration {
        f |= sys::VIR_MIGRATE_NON_SHARED_INC;
    }
    if o.unsafe_migration {
        f |= sys::VIR_MIGRATE_UNSAFE;
    }
    if o.allow_auto_converge {
        f |= sys::VIR_MIGRATE_AUTO_CONVERGE;
    }
    if o.allow_post_copy {
        f |= sys::VIR_MIGRATE_POSTCOPY;
    }
    if paused {
        f |= sys::VIR_MIGRATE_PAUSED;
    }
    if o.parallel_connections().is_some() {
        f |= sys::VIR_MIGRATE_PARALLEL;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_the_options() {
        let base =
            sys::VIR_MIGRATE_LIVE | sys::VIR_MIGRATE_PEER2PEER | sys::VIR_MIGRATE_PERSIST_DEST;
        let o = MigrationOptions::default();
        assert_eq!(migration_flags(false, false, &o), base);
        assert_eq!(
            migration_flags(true, true, &o),
            base | sys::VIR_MIGRATE_NON_SHARED_INC | sys::VIR_MIGRATE_PAUSED
        );
        let all = MigrationOptions {
            unsafe_migration: true,
            allow_auto_converge: true,
            allow_post_copy: true,
            parallel_migration_threads: Some(3),
            ..MigrationOptions::default()
        };
        // Post-copy allowed: no parallel connections (KubeVirt).
        assert_eq!(
            migration_flags(false, false, &all),
            base | sys::VIR_MIGRATE_UNSAFE
                | sys::VIR_MIGRATE_AUTO_CONVERGE
                | sys::VIR_MIGRATE_POSTCOPY
        );
        let par = MigrationOptions {
            parallel_migration_threads: Some(3),
            ..MigrationOptions::default()
        };
        assert_eq!(
            migration_flags(false, false, &par),
            base | sys::VIR_MIGRATE_PARALLEL
        );
    }
}
