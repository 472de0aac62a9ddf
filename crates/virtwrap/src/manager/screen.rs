//! GetScreenshot on the manager's connection ([`crate::screenshot`]).

use virt::domain::Domain as VirtDomain;

use super::{LibvirtDomainManager, ManagerError};
use crate::screenshot::{capture, to_png, Png};

impl LibvirtDomainManager {
    /// The primary display of the domain `name` as a PNG (KubeVirt main
    /// `GetScreenshot`, whose lookup and libvirt errors it keeps).
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`]: no such domain, no display (`Requested
    /// operation is not valid: no screens to take screenshot from`), a
    /// domain not running; [`ManagerError::Screenshot`].
    pub fn screenshot(&self, name: &str) -> Result<Png, ManagerError> {
        let (mime, data) = self.with_conn(|conn| {
            let d = VirtDomain::lookup_by_name(conn, name)?;
            capture(conn, &d)
        })?;
        Ok(to_png(&mime, data)?)
    }
}
