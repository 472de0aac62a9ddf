//! AMD SEV's three commands as KubeVirt v1.6.6 answers them
//! (`manager.go` `GetSEVInfo`, `GetLaunchMeasurement`,
//! `InjectLaunchSecret`): each asks libvirt, so on a host (or for a
//! domain) without SEV the answer is libvirt's own refusal, never a
//! silent success. libvirt's typed parameters are read and written
//! through libvirt's own accessors (`virTypedParamsGet*`,
//! `virTypedParamsAddString`), the arrays freed with `virTypedParamsFree`.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::os::raw::c_int;

use serde::Serialize;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

/// KubeVirt's SEV loader file name (v1.6.6 `efi.EFICodeSEV`), in the
/// EFI firmware directory.
pub const EFI_CODE_SEV: &str = "OVMF_CODE.cc.fd";

/// KubeVirt's `v1.SEVPlatformInfo` (JSON of GetSEVInfo).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SevPlatformInfo {
    /// Base64 platform Diffie-Hellman key.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pdh: String,
    /// Base64 SEV certificate chain.
    #[serde(rename = "certChain", skip_serializing_if = "String::is_empty")]
    pub cert_chain: String,
}

/// KubeVirt's `v1.SEVMeasurementInfo` (JSON of GetLaunchMeasurement).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SevMeasurementInfo {
    /// Base64 launch measurement.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub measurement: String,
    /// SEV API major version.
    #[serde(skip_serializing_if = "is_zero")]
    pub api_major: u32,
    /// SEV API minor version.
    #[serde(skip_serializing_if = "is_zero")]
    pub api_minor: u32,
    /// SEV build ID.
    #[serde(rename = "buildID", skip_serializing_if = "is_zero")]
    pub build_id: u32,
    /// The guest's SEV policy.
    #[serde(skip_serializing_if = "is_zero")]
    pub policy: u32,
    /// SHA-256 (hex) of the SEV loader.
    #[serde(rename = "loaderSHA", skip_serializing_if = "String::is_empty")]
    pub loader_sha: String,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// A typed parameter array libvirt allocated, freed on drop.
struct Params {
    ptr: sys::virTypedParameterPtr,
    n: c_int,
}

impl Params {
    fn string(&self, name: &str) -> Option<String> {
        let name = CString::new(name).ok()?;
        let mut out: *const std::os::raw::c_char = std::ptr::null();
        // SAFETY: `ptr`/`n` are the array libvirt returned; `out` points
        // into it and is copied before the array is freed.
        let r = unsafe { sys::virTypedParamsGetString(self.ptr, self.n, name.as_ptr(), &mut out) };
        if r != 1 || out.is_null() {
            return None;
        }
        // SAFETY: libvirt's string is NUL-terminated.
        Some(
            unsafe { CStr::from_ptr(out) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    fn uint(&self, name: &str) -> Option<u32> {
        let name = CString::new(name).ok()?;
        let mut out: std::os::raw::c_uint = 0;
        // SAFETY: as in `string`.
        let r = unsafe { sys::virTypedParamsGetUInt(self.ptr, self.n, name.as_ptr(), &mut out) };
        (r == 1).then_some(out)
    }
}

impl Drop for Params {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the array and count libvirt gave (or built).
            unsafe { sys::virTypedParamsFree(self.ptr, self.n) };
        }
    }
}

/// SHA-256 (lower-case hex) of the file at `path`, read in 1 MiB pieces
/// (a loader is a few MiB; nothing is held in memory).
fn file_sha256_hex(path: &std::path::Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn last_error() -> ManagerError {
    virt::error::Error::last_error().into()
}

impl LibvirtDomainManager {
    /// GetSEVInfo: `virNodeGetSEVInfo`'s PDH and certificate chain.
    ///
    /// # Errors
    /// libvirt's refusal on a host without SEV (libvirt 11.3 with this
    /// QEMU: `LibvirtError(Code=84, Domain=10, Message='Operation not
    /// supported: QEMU does not support SEV guest')`).
    pub fn sev_info(&self) -> Result<SevPlatformInfo, ManagerError> {
        self.with_conn(|conn| {
            let mut p = Params {
                ptr: std::ptr::null_mut(),
                n: 0,
            };
            // SAFETY: libvirt allocates the array into `p`, freed on drop.
            let r = unsafe { sys::virNodeGetSEVInfo(conn.as_ptr(), &mut p.ptr, &mut p.n, 0) };
            if r < 0 {
                return Err(last_error());
            }
            Ok(SevPlatformInfo {
                pdh: p.string("pdh").unwrap_or_default(),
                cert_chain: p.string("cert-chain").unwrap_or_default(),
            })
        })
    }

    /// GetLaunchMeasurement of the domain `name`: libvirt's launch
    /// security parameters (none for a domain without SEV), then the
    /// SHA-256 of KubeVirt's SEV loader ([`EFI_CODE_SEV`] in the EFI
    /// directory). Where that loader is missing KubeVirt opens an empty
    /// path, and so answers `open : no such file or directory`; so does
    /// this launcher.
    ///
    /// # Errors
    /// libvirt's (e.g. no such domain), the loader's.
    pub fn launch_measurement(&self, name: &str) -> Result<SevMeasurementInfo, ManagerError> {
        let mut info = self.with_conn(|conn| {
            let d = VirtDomain::lookup_by_name(conn, name)?;
            let mut p = Params {
                ptr: std::ptr::null_mut(),
                n: 0,
            };
            // SAFETY: as in `sev_info`.
            let r =
                unsafe { sys::virDomainGetLaunchSecurityInfo(d.as_ptr(), &mut p.ptr, &mut p.n, 0) };
            if r < 0 {
                return Err(last_error());
            }
            Ok(SevMeasurementInfo {
                measurement: p.string("sev-measurement").unwrap_or_default(),
                api_major: p.uint("sev-api-major").unwrap_or(0),
                api_minor: p.uint("sev-api-minor").unwrap_or(0),
                build_id: p.uint("sev-build-id").unwrap_or(0),
                policy: p.uint("sev-policy").unwrap_or(0),
                loader_sha: String::new(),
            })
        })?;
        let present = self
            .host
            .ovmf_files
            .as_ref()
            .is_some_and(|f| f.contains(EFI_CODE_SEV));
        if !present {
            return Err(ManagerError::Failed(
                "open : no such file or directory".into(),
            ));
        }
        let loader = std::path::Path::new(&self.host.paths.ovmf_dir).join(EFI_CODE_SEV);
        info.loader_sha = file_sha256_hex(&loader)
            .map_err(|e| ManagerError::Failed(format!("open {}: {e}", loader.display())))?;
        Ok(info)
    }

    /// InjectLaunchSecret into the domain `name`:
    /// `virDomainSetLaunchSecurityState` with `sev-secret-header` and
    /// `sev-secret` (base64 text, checked non-empty by the caller).
    ///
    /// # Errors
    /// libvirt's (no such domain; a domain without SEV is refused).
    pub fn inject_launch_secret(
        &self,
        name: &str,
        header: &str,
        secret: &str,
    ) -> Result<(), ManagerError> {
        let (Ok(header), Ok(secret)) = (CString::new(header), CString::new(secret)) else {
            return Err(ManagerError::Failed(
                "the launch secret or its header contains NUL".into(),
            ));
        };
        self.with_conn(|conn| {
            let d = VirtDomain::lookup_by_name(conn, name)?;
            let mut p = Params {
                ptr: std::ptr::null_mut(),
                n: 0,
            };
            let mut max: c_int = 0;
            for (field, value) in [(c"sev-secret-header", &header), (c"sev-secret", &secret)] {
                // SAFETY: libvirt grows the array it owns in `p`.
                let r = unsafe {
                    sys::virTypedParamsAddString(
                        &mut p.ptr,
                        &mut p.n,
                        &mut max,
                        field.as_ptr(),
                        value.as_ptr(),
                    )
                };
                if r < 0 {
                    return Err(last_error());
                }
            }
            // SAFETY: a live domain and the array built above.
            let r = unsafe { sys::virDomainSetLaunchSecurityState(d.as_ptr(), p.ptr, p.n, 0) };
            if r < 0 {
                return Err(last_error());
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_kubevirts() {
        assert_eq!(
            serde_json::to_string(&SevPlatformInfo {
                pdh: "p".into(),
                cert_chain: "c".into()
            })
            .unwrap(),
            r#"{"pdh":"p","certChain":"c"}"#
        );
        assert_eq!(
            serde_json::to_string(&SevMeasurementInfo {
                measurement: "m".into(),
                api_major: 1,
                api_minor: 2,
                build_id: 3,
                policy: 4,
                loader_sha: "ab".into()
            })
            .unwrap(),
            r#"{"measurement":"m","apiMajor":1,"apiMinor":2,"buildID":3,"policy":4,"loaderSHA":"ab"}"#
        );
        // Go's omitempty: nothing set, nothing written.
        assert_eq!(
            serde_json::to_string(&SevMeasurementInfo::default()).unwrap(),
            "{}"
        );
    }
}
