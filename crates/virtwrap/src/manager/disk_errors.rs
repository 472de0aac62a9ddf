//! The disks libvirt reports an I/O error for (`virDomainGetDiskErrors`),
//! which KubeVirt's notifier reads when a domain is paused for an I/O
//! error. The `virt` binding has no wrapper for the call.
#![allow(unsafe_code)]

use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

impl LibvirtDomainManager {
    /// The disks libvirt reports an I/O error for on the domain called
    /// `name` (`virDomainGetDiskErrors`, KubeVirt's `GetDiskErrors` when
    /// the domain is paused for an I/O error), at most
    /// [`MAX_DISK_ERRORS`]; empty when the domain is gone.
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`].
    pub fn disk_errors(&self, name: &str) -> Result<Vec<DiskError>, ManagerError> {
        Ok(self
            .with_domain(name, |d| {
                // SAFETY: `d` is a live domain handle; NULL with 0 asks for
                // the count only (libvirt's documented form).
                let n =
                    unsafe { sys::virDomainGetDiskErrors(d.as_ptr(), std::ptr::null_mut(), 0, 0) };
                if n < 0 {
                    return Err(virt::error::Error::last_error().into());
                }
                let room = n.unsigned_abs().min(MAX_DISK_ERRORS);
                if room == 0 {
                    return Ok(Vec::new());
                }
                let mut raw = vec![
                    sys::virDomainDiskError {
                        disk: std::ptr::null_mut(),
                        error: 0,
                    };
                    room as usize
                ];
                // SAFETY: `raw` has room for `room` records; libvirt fills
                // at most that many and returns how many it filled.
                let got =
                    unsafe { sys::virDomainGetDiskErrors(d.as_ptr(), raw.as_mut_ptr(), room, 0) };
                if got < 0 {
                    return Err(virt::error::Error::last_error().into());
                }
                let mut out = Vec::new();
                for e in raw.iter().take(got.unsigned_abs() as usize) {
                    if e.disk.is_null() {
                        continue;
                    }
                    // SAFETY: libvirt set `disk` to a NUL-terminated string
                    // the caller owns and frees with free(3).
                    let target = unsafe { std::ffi::CStr::from_ptr(e.disk) }
                        .to_string_lossy()
                        .into_owned();
                    // SAFETY: as above; freed once, not used afterwards.
                    unsafe { free(e.disk.cast()) };
                    let kind = match e.error {
                        x if x == sys::VIR_DOMAIN_DISK_ERROR_NONE as i32 => continue,
                        x if x == sys::VIR_DOMAIN_DISK_ERROR_NO_SPACE as i32 => {
                            DiskErrorKind::NoSpace
                        }
                        _ => DiskErrorKind::Unspecified,
                    };
                    out.push(DiskError { target, kind });
                }
                Ok(out)
            })?
            .unwrap_or_default())
    }
}

/// Most disk errors read per domain (a domain has at most a few hundred
/// disks; bounds the buffer libvirt's count asks for).
pub const MAX_DISK_ERRORS: u32 = 1024;

extern "C" {
    /// The C library's `free(3)`, which libvirt's documentation asks for
    /// on the disk names `virDomainGetDiskErrors` returns (the `virt`
    /// binding has no wrapper for the call).
    fn free(ptr: *mut std::ffi::c_void);
}

/// One disk with an I/O error (`virDomainDiskError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskError {
    /// The disk's target device (`vda`).
    pub target: String,
    /// What failed.
    pub kind: DiskErrorKind,
}

/// `virDomainDiskErrorCode` other than NONE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskErrorKind {
    /// `VIR_DOMAIN_DISK_ERROR_NO_SPACE`: the backing storage is full.
    NoSpace,
    /// `VIR_DOMAIN_DISK_ERROR_UNSPEC` (or a code this build does not know).
    Unspecified,
}
