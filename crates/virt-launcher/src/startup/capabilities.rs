//! The shipped QEMU capabilities cache at start (`--shipped-capabilities-dir`,
//! see `virtwrap::capscache`): libvirt's cache is seeded from it before the
//! daemon starts when everything matches, and once libvirt has looked its
//! capabilities up the launcher says whether libvirt kept the files. Either
//! way the VM starts: a cache not used only means libvirt probes QEMU.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use virtwrap::capscache::{self, HostNow, Layout, NotUsed, Seeded};
use virtwrap::config::DaemonKind;
use virtwrap::LibvirtDomainManager;

use crate::user::RuntimeUser;

/// Seeds libvirt's capabilities directory (of `user`) from `shipped` for
/// `daemon`; logs once what happened. `None` when nothing was seeded.
pub(crate) fn seed(shipped: &str, user: RuntimeUser, daemon: &DaemonKind) -> Option<Seeded> {
    if shipped.is_empty() {
        return None;
    }
    let shipped = Path::new(shipped);
    let started = Instant::now();
    let (base, rel) = user.capabilities_dir();
    let r = Layout::for_daemon(daemon)
        .map_err(|e| NotUsed::Refused(format!("libvirt's files: {e}")))
        .and_then(|layout| {
            capscache::seed(
                shipped,
                Path::new(base),
                Path::new(rel),
                &layout,
                &HostNow::probe(),
            )
        });
    let ms = super::signals::ms(started);
    match r {
        Ok(s) => {
            if !s.skipped.is_empty() {
                tracing::warn!(
                    "shipped QEMU capabilities not used for {} of the binaries: {}; libvirt probes them",
                    s.skipped.len(),
                    s.skipped.join("; ")
                );
            }
            tracing::info!(
                ms,
                files = s.files.len(),
                already_there = s.already_there.len(),
                dir = %s.dir.display(),
                "QEMU capabilities seeded from the shipped cache"
            );
            Some(s)
        }
        Err(e @ NotUsed::Absent(_)) => {
            tracing::info!(ms, "{e}: libvirt probes QEMU");
            None
        }
        Err(e) => {
            tracing::warn!(
                ms,
                "shipped QEMU capabilities cache not used: {e}; libvirt probes QEMU"
            );
            None
        }
    }
}

/// Once libvirt has made its first capabilities lookup (the QEMU version
/// probe has answered), logs when (`ms` since the launcher's `started`):
/// with `seeded`, whether libvirt kept the seeded files (a file it removed
/// or rewrote means it found it outdated for this host, by a check the
/// launcher leaves to libvirt such as CPUID, and probed).
pub(crate) fn check_later(
    seeded: Option<Seeded>,
    manager: &Arc<LibvirtDomainManager>,
    started: Instant,
) {
    // On the version probe's thread once it answered: a thread of its own
    // waiting for it would leave its stack in glibc's cache (issue 20).
    manager.after_qemu_version(move |version| {
        if let Err(e) = version {
            tracing::warn!("libvirt's QEMU capabilities are not known: {e}");
            return;
        }
        let ms = super::signals::ms(started);
        let Some(seeded) = seeded else {
            tracing::info!(ms, "libvirt's QEMU capabilities ready");
            return;
        };
        let replaced = seeded.replaced();
        if replaced.is_empty() {
            tracing::info!(
                ms,
                files = seeded.files.len(),
                "libvirt used the shipped QEMU capabilities"
            );
        } else {
            tracing::warn!(
                ms,
                files = ?replaced,
                "libvirt replaced shipped QEMU capabilities it found outdated, and probed QEMU"
            );
        }
    });
}
