//! `spec.accessCredentials[]`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `spec.accessCredentials[]`: exactly one of its fields is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct AccessCredential {
    /// SSH public keys from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<SshPublicKeyAccessCredential>,
    /// User passwords set through the guest agent (not implemented yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub user_password: Option<Value>,
}

/// `accessCredentials[].sshPublicKey`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SshPublicKeyAccessCredential {
    /// Where the keys come from.
    #[serde(default)]
    pub source: AccessCredentialSource,
    /// How they reach the guest.
    #[serde(default)]
    pub propagation_method: PropagationMethod,
}

/// `sshPublicKey.source`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct AccessCredentialSource {
    /// A Secret whose every entry is a public key (mounted at
    /// `/var/run/kubevirt-private/secret/<secretName>-access-cred/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<AccessCredentialSecret>,
}

/// `sshPublicKey.source.secret`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct AccessCredentialSecret {
    /// Secret name.
    #[serde(default)]
    pub secret_name: String,
}

/// `sshPublicKey.propagationMethod`: exactly one is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct PropagationMethod {
    /// Keys go into the NoCloud meta-data (`public-keys`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub no_cloud: Option<Value>,
    /// Keys go into the config drive meta-data (`public_keys`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub config_drive: Option<Value>,
    /// Keys written by the guest agent (not implemented yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub qemu_guest_agent: Option<Value>,
}
