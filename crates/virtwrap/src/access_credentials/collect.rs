//! What the guest should hold, read from the credentials' secrets
//! (KubeVirt `accessCredentialsInfo.addAccessCredential`): the public keys
//! of each user, the password of each user, and the read failures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use api::VirtualMachineInstance;
use storage::secrets::{read_secret_dir, SecretError};

/// The credentials of one round, from every `qemuGuestAgent` credential of
/// the VMI in spec order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// Each user named by an `sshPublicKey` credential → the keys of all
    /// its secrets, in spec order (KubeVirt's `userSSHMap` joined with
    /// `secretMap`): every non-blank line of every file, trimmed. A user
    /// with no key gets an empty list (the guest's file is emptied).
    pub keys: BTreeMap<String, Vec<String>>,
    /// Each user → its password (`userPassword`: the file named after the
    /// user, trimmed; empty files skipped; a later credential wins).
    pub passwords: BTreeMap<String, String>,
    /// The secrets that could not be read, KubeVirt's words, in spec order.
    pub errors: Vec<String>,
}

/// Reads the secrets of `vmi`'s guest-agent credentials; `dir_of` gives a
/// secret's directory (the pod's mount or the `--access-credential`
/// directory).
///
/// KubeVirt's rules, with one deliberate difference: a secret that cannot
/// be read is reported (in [`Collected::errors`]) and its users' keys are
/// left as the guest has them this round. KubeVirt still sets those users'
/// keys without the failed secret's, which would empty a user's
/// `authorized_keys` because of one unreadable (here: oversized) file.
pub fn collect(
    vmi: &VirtualMachineInstance,
    dir_of: &dyn Fn(&str) -> Option<PathBuf>,
) -> Collected {
    let mut out = Collected::default();
    // KubeVirt's secretMap: one key list per secret (the last read wins).
    let mut secret_keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // userSSHMap: each user's secrets, in spec order.
    let mut user_secrets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut untouched: BTreeSet<String> = BTreeSet::new();
    for c in &vmi.spec.access_credentials {
        let Some(secret) = c.guest_agent_secret() else {
            continue;
        };
        if secret.is_empty() {
            continue;
        }
        let files = dir_of(secret)
            .ok_or_else(|| SecretError::List {
                dir: format!("{secret}-access-cred"),
                reason: "no directory for this secret".into(),
            })
            .and_then(|d| read_secret_dir(&d));
        let users: &[String] = c
            .ssh_public_key
            .as_ref()
            .and_then(|k| k.propagation_method.qemu_guest_agent.as_ref())
            .map_or(&[], |q| q.users.as_slice());
        let files = match files {
            Ok(f) => f,
            Err(e) => {
                out.errors.push(e.to_string());
                untouched.extend(users.iter().cloned());
                continue;
            }
        };
        if c.ssh_public_key.is_some() {
            for u in users {
                user_secrets
                    .entry(u.clone())
                    .or_default()
                    .push(secret.to_owned());
            }
            let keys: Vec<String> = files
                .iter()
                .flat_map(|f| {
                    String::from_utf8_lossy(&f.data)
                        .split('\n')
                        .map(str::trim)
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect();
            if keys.is_empty() {
                secret_keys.remove(secret);
            } else {
                secret_keys.insert(secret.to_owned(), keys);
            }
        } else {
            for f in files {
                let pw = String::from_utf8_lossy(&f.data).trim().to_owned();
                if !pw.is_empty() {
                    out.passwords.insert(f.name, pw);
                }
            }
        }
    }
    for (user, secrets) in user_secrets {
        if untouched.contains(&user) {
            continue;
        }
        let keys = secrets
            .iter()
            .filter_map(|s| secret_keys.get(s))
            .flatten()
            .cloned()
            .collect();
        out.keys.insert(user, keys);
    }
    out
}
