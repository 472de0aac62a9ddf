//! virt-handler's JSON: what the launcher puts inside the command
//! socket's protobuf messages and the notifications, in the shapes of
//! KubeVirt v1.6.6's Go types as `encoding/json` writes them.
//!
//! - [`api_domain`]: the `api.Domain` of `GetDomain` and every domain
//!   notification, from the domain XML ([`domain::Domain`]), the state,
//!   the guest agent's report and the launcher's runtime metadata;
//! - [`stats`]: the `stats.DomainStats` of `GetDomainStats`;
//! - [`guest_info`]: the guest agent's data of `GetGuestInfo`, `GetUsers`
//!   and `GetFilesystems` (`kubevirt.io/api/core/v1` shapes);
//! - [`backup`]: BackupVirtualMachine's options and RedefineCheckpoint's
//!   checkpoint (KubeVirt main's `backup/v1alpha1`);
//! - [`interfaces_status`]: virt-handler's join of that JSON into
//!   `vmi.status.interfaces` (for `virt-launcher ctl` and tests).
//!
//! The protobuf messages themselves are the `cmd` crate's; the libvirt
//! calls that fill these shapes are `virtwrap`'s.

pub mod api_domain;
pub mod backup;
pub mod guest_info;
pub mod interfaces_status;
pub mod stats;
