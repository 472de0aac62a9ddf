//! `<metadata>`: KubeVirt's own application metadata in the domain.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// `<metadata>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// KubeVirt's own metadata.
    pub kubevirt: Option<KubeVirtMetadata>,
}

/// `<metadata><kubevirt xmlns="http://kubevirt.io">`: what the launcher
/// needs to recognise a domain as its VMI's after a restart.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeVirtMetadata {
    /// Always `http://kubevirt.io` (libvirt requires namespaced metadata).
    #[serde(rename = "@xmlns")]
    pub xmlns: Option<String>,
    /// VMI UID.
    pub uid: String,
    /// Termination grace period.
    pub graceperiod: Option<GracePeriodMetadata>,
}

/// `<graceperiod>` inside the KubeVirt metadata.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GracePeriodMetadata {
    /// Seconds between shutdown request and kill.
    #[serde(rename = "deletionGracePeriodSeconds")]
    pub deletion_grace_period_seconds: i64,
}
