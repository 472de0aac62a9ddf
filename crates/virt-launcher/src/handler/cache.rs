//! The domain JSON GetDomain answers from, kept fresh by the event bridge
//! and dropped by every command that changes the domain.

use std::sync::Mutex;

/// The domain JSON as last read, kept fresh by the event bridge (which
/// reads it on every libvirt event anyway) and dropped by every command
/// that changes the domain. GetDomain answers from it instead of asking
/// libvirt (five round trips and an XML parse) on every call. A read that
/// started before a change never overwrites what the change stored (a
/// generation counter, bumped by every store and invalidation).
#[derive(Default)]
pub struct DomainCache {
    /// (generation, value). Value `None`: unknown, read libvirt;
    /// `Some(None)`: no domain.
    inner: Mutex<(u64, Option<Option<String>>)>,
}

impl DomainCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, Option<Option<String>>)> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached value, or the generation to pass to [`DomainCache::set_if`]
    /// after reading libvirt.
    pub(crate) fn get(&self) -> Result<Option<String>, u64> {
        let g = self.lock();
        g.1.clone().ok_or(g.0)
    }

    /// Stores what was just read from libvirt.
    pub fn set(&self, v: Option<String>) {
        let mut g = self.lock();
        g.0 += 1;
        g.1 = Some(v);
    }

    /// Stores `v`, read from libvirt after [`DomainCache::get`] returned
    /// `generation`, unless something was stored or invalidated since.
    pub(crate) fn set_if(&self, generation: u64, v: Option<String>) {
        let mut g = self.lock();
        if g.0 == generation {
            g.0 += 1;
            g.1 = Some(v);
        }
    }

    /// Forgets it (the domain is changing).
    pub fn invalidate(&self) {
        let mut g = self.lock();
        g.0 += 1;
        g.1 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_older_than_a_change_never_overwrites_it() {
        let c = DomainCache::default();
        let g = c.get().expect_err("empty at first");
        // The event bridge stores a fresher state while a GetDomain reads.
        c.set(Some("new".into()));
        c.set_if(g, Some("old".into()));
        assert_eq!(c.get(), Ok(Some("new".into())));
        // An invalidation in between also wins.
        c.invalidate();
        let g = c.get().expect_err("invalidated");
        c.invalidate();
        c.set_if(g, Some("old".into()));
        assert!(c.get().is_err());
        // An undisturbed read is kept.
        let g = c.get().expect_err("still empty");
        c.set_if(g, None);
        assert_eq!(c.get(), Ok(None));
    }
}
