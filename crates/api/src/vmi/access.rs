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
    /// User passwords set through the guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_password: Option<UserPasswordAccessCredential>,
}

impl AccessCredential {
    /// The secret whose files the guest agent propagates (KubeVirt
    /// `getSecret` of `access_credentials.go`): an `sshPublicKey` or a
    /// `userPassword` credential with `qemuGuestAgent` propagation and a
    /// secret source; `None` for every other credential.
    pub fn guest_agent_secret(&self) -> Option<&str> {
        if let Some(k) = &self.ssh_public_key {
            if k.propagation_method.qemu_guest_agent.is_some() {
                return k.source.secret.as_ref().map(|s| s.secret_name.as_str());
            }
            return None;
        }
        let p = self.user_password.as_ref()?;
        p.propagation_method.qemu_guest_agent.as_ref()?;
        p.source.secret.as_ref().map(|s| s.secret_name.as_str())
    }
}

/// `accessCredentials[].userPassword`: each file of the secret is named
/// after a guest user and holds that user's password.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct UserPasswordAccessCredential {
    /// Where the passwords come from.
    #[serde(default)]
    pub source: AccessCredentialSource,
    /// How they reach the guest (only `qemuGuestAgent` exists).
    #[serde(default)]
    pub propagation_method: UserPasswordPropagationMethod,
}

/// `userPassword.propagationMethod`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct UserPasswordPropagationMethod {
    /// Passwords set by the guest agent (`guest-set-user-password`); an
    /// empty object in KubeVirt's API, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub qemu_guest_agent: Option<Value>,
}

/// `sshPublicKey.propagationMethod.qemuGuestAgent`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct QemuGuestAgentSshPropagation {
    /// The guest users whose `authorized_keys` hold the secret's keys
    /// (KubeVirt requires at least one).
    #[serde(default)]
    pub users: Vec<String>,
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
    /// A Secret (mounted at
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
    /// Keys written by the guest agent into each user's
    /// `~/.ssh/authorized_keys`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_guest_agent: Option<QemuGuestAgentSshPropagation>,
}
