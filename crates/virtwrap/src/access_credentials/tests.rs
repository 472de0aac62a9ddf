#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::collect::{collect, Collected};
use super::guest::{apply, AGENT_OFFLINE};
use super::*;
use crate::agent::AgentError;

fn vmi(creds: &str) -> VirtualMachineInstance {
    let y = format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: a, namespace: default}}\nspec:\n  domain: {{devices: {{}}}}\n  accessCredentials:\n{creds}"
    );
    api::load_vmi(y.as_bytes(), api::Arch::Amd64).unwrap()
}

const CREDS: &str = "  - sshPublicKey: {source: {secret: {secretName: k1}}, propagationMethod: {qemuGuestAgent: {users: [guest, root]}}}
  - sshPublicKey: {source: {secret: {secretName: k2}}, propagationMethod: {qemuGuestAgent: {users: [guest]}}}
  - sshPublicKey: {source: {secret: {secretName: cloud}}, propagationMethod: {noCloud: {}}}
  - userPassword: {source: {secret: {secretName: pw}}, propagationMethod: {qemuGuestAgent: {}}}
";

fn dirs(root: &Path) -> BTreeMap<String, PathBuf> {
    ["k1", "k2", "pw"]
        .iter()
        .map(|n| {
            let d = root.join(format!("{n}-access-cred"));
            std::fs::create_dir_all(&d).unwrap();
            ((*n).to_owned(), d)
        })
        .collect()
}

#[test]
fn collects_keys_per_user_and_passwords_as_kubevirt() {
    let t = tempfile::tempdir().unwrap();
    let d = dirs(t.path());
    std::fs::write(
        d["k1"].join("a"),
        "ssh-ed25519 AAA one\n\n  ssh-rsa BBB two  \n",
    )
    .unwrap();
    std::fs::create_dir(d["k1"].join("..2026_x")).unwrap();
    std::fs::write(d["k1"].join("..2026_x").join("z"), "ignored").unwrap();
    std::fs::write(d["k2"].join("b"), "ssh-ed25519 CCC three").unwrap();
    std::fs::write(d["pw"].join("guest"), "  s3cret\n").unwrap();
    std::fs::write(d["pw"].join("root"), "\n").unwrap();
    let v = vmi(CREDS);
    let c = collect(&v, &|n| d.get(n).cloned());
    assert_eq!(
        c.keys["guest"],
        [
            "ssh-ed25519 AAA one",
            "ssh-rsa BBB two",
            "ssh-ed25519 CCC three"
        ]
    );
    assert_eq!(c.keys["root"], ["ssh-ed25519 AAA one", "ssh-rsa BBB two"]);
    assert_eq!(
        c.passwords,
        BTreeMap::from([("guest".into(), "s3cret".into())])
    );
    assert!(c.errors.is_empty());

    // kubevirt/kubevirt#12562: an empty secret empties the users' keys.
    std::fs::remove_file(d["k1"].join("a")).unwrap();
    std::fs::remove_file(d["k2"].join("b")).unwrap();
    let c = collect(&v, &|n| d.get(n).cloned());
    assert_eq!(c.keys["guest"], Vec::<String>::new());
    assert_eq!(c.keys["root"], Vec::<String>::new());

    // An unreadable secret is reported; its users are left alone.
    std::fs::write(d["k2"].join("big"), vec![b'a'; (1 << 20) + 1]).unwrap();
    let c = collect(&v, &|n| d.get(n).cloned());
    assert_eq!(c.errors.len(), 1);
    assert!(
        c.errors[0].starts_with("error occurred while reading the access credential secret file ["),
        "{c:?}"
    );
    assert!(!c.keys.contains_key("guest"), "{c:?}");
    assert_eq!(c.keys["root"], Vec::<String>::new());
}

/// A guest: users `root` and `guest`; `ssh` says whether the agent has
/// `guest-ssh-add-authorized-keys`; files and exec'd commands through the
/// raw commands of KubeVirt's file-based way.
#[derive(Default)]
struct Guest {
    offline: bool,
    no_ssh: bool,
    keys: Mutex<BTreeMap<String, Vec<String>>>,
    passwords: Mutex<BTreeMap<String, String>>,
    files: Mutex<BTreeMap<String, String>>,
    execs: Mutex<Vec<String>>,
    open: Mutex<Option<(String, String)>>,
}

impl Guest {
    fn home(user: &str) -> Option<&'static str> {
        match user {
            "root" => Some("root:x:0:0:root:/root:/bin/sh\n"),
            "guest" => Some("guest:x:1000:1000::/home/guest:/bin/sh\n"),
            _ => None,
        }
    }
}

fn ret(v: Value) -> String {
    serde_json::json!({ "return": v }).to_string()
}

impl AgentChannel for Guest {
    fn command(&self, cmd: &str, t: Duration) -> Result<String, AgentError> {
        self.command_vir(cmd, t).map_err(AgentError::Libvirt)
    }
    fn command_vir(&self, cmd: &str, _t: Duration) -> Result<String, String> {
        if self.offline {
            return Err(
                "virError(Code=86, Domain=10, Message='Guest agent is not responding')".into(),
            );
        }
        let v: Value = serde_json::from_str(cmd).unwrap();
        let a = &v["arguments"];
        let b64 = base64::engine::general_purpose::STANDARD;
        Ok(match v["execute"].as_str().unwrap() {
            "guest-ping" => ret(serde_json::json!({})),
            "guest-exec" => {
                let args: Vec<&str> = a["arg"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap())
                    .collect();
                let line = format!("{} {}", a["path"].as_str().unwrap(), args.join(" "));
                self.execs.lock().unwrap().push(line);
                ret(serde_json::json!({"pid": 7}))
            }
            "guest-exec-status" => {
                let last = self.execs.lock().unwrap().last().cloned().unwrap();
                let (code, out) = match last.strip_prefix("getent passwd ") {
                    Some(u) => Guest::home(u).map_or((2, ""), |l| (0, l)),
                    None => (0, ""),
                };
                ret(
                    serde_json::json!({"exited": true, "exitcode": code, "out-data": b64.encode(out)}),
                )
            }
            "guest-file-open" => {
                let p = a["path"].as_str().unwrap().to_owned();
                let m = a["mode"].as_str().unwrap().to_owned();
                if m == "r" && !self.files.lock().unwrap().contains_key(&p) {
                    return Err(format!("virError(Code=1, Domain=10, Message='internal error: unable to execute QEMU agent command 'guest-file-open': Failed to open file '{p}': No such file or directory')"));
                }
                *self.open.lock().unwrap() = Some((p, m));
                ret(serde_json::json!(3))
            }
            "guest-file-read" => {
                let (p, _) = self.open.lock().unwrap().clone().unwrap();
                let d = self.files.lock().unwrap()[&p].clone();
                ret(serde_json::json!({"count": d.len(), "buf-b64": b64.encode(d), "eof": true}))
            }
            "guest-file-write" => {
                let (p, _) = self.open.lock().unwrap().clone().unwrap();
                let d = b64.decode(a["buf-b64"].as_str().unwrap()).unwrap();
                self.files
                    .lock()
                    .unwrap()
                    .insert(p, String::from_utf8(d).unwrap());
                ret(serde_json::json!({"count": 1, "eof": false}))
            }
            "guest-file-close" => ret(serde_json::json!({})),
            other => panic!("unexpected {other}"),
        })
    }
    fn fs_freeze(&self) -> Result<u32, AgentError> {
        unreachable!()
    }
    fn fs_thaw(&self) -> Result<u32, AgentError> {
        unreachable!()
    }
    fn reboot(&self) -> Result<(), AgentError> {
        unreachable!()
    }
    fn set_authorized_keys(&self, user: &str, keys: &[String]) -> Result<(), String> {
        if self.no_ssh {
            return Err("virError(Code=1, Domain=10, Message='internal error: unable to execute QEMU agent command 'guest-ssh-add-authorized-keys': The command guest-ssh-add-authorized-keys has been disabled for this instance')".into());
        }
        if Guest::home(user).is_none() {
            return Err(format!("virError(Code=1, Domain=10, Message='internal error: unable to execute QEMU agent command 'guest-ssh-add-authorized-keys': failed to get passwd entry for user '{user}'')"));
        }
        self.keys.lock().unwrap().insert(user.into(), keys.to_vec());
        Ok(())
    }
    fn set_user_password(&self, user: &str, password: &str) -> Result<(), String> {
        if Guest::home(user).is_none() {
            return Err("virError(Code=113, Domain=10, Message='guest agent command failed: unable to execute QEMU agent command 'guest-set-user-password': child process has failed to set user password')".into());
        }
        self.passwords
            .lock()
            .unwrap()
            .insert(user.into(), password.into());
        Ok(())
    }
}

fn run(g: &Guest, c: &Collected) -> (bool, Vec<(bool, String)>) {
    let mut reports = Vec::new();
    let retry = apply(g, c, &mut |ok, m| reports.push((ok, m)));
    (retry, reports)
}

fn creds(keys: &[(&str, &[&str])], passwords: &[(&str, &str)]) -> Collected {
    Collected {
        keys: keys
            .iter()
            .map(|(u, k)| ((*u).to_owned(), k.iter().map(|s| (*s).to_owned()).collect()))
            .collect(),
        passwords: passwords
            .iter()
            .map(|(u, p)| ((*u).to_owned(), (*p).to_owned()))
            .collect(),
        errors: vec![],
    }
}

#[test]
fn applies_keys_and_passwords_and_reports_in_kubevirts_words() {
    let g = Guest::default();
    let c = creds(&[("guest", &["k1", "k2"])], &[("root", "pw")]);
    assert_eq!(run(&g, &c), (false, vec![(true, String::new())]));
    assert_eq!(g.keys.lock().unwrap()["guest"], ["k1", "k2"]);
    assert_eq!(g.passwords.lock().unwrap()["root"], "pw");

    let offline = Guest {
        offline: true,
        ..Guest::default()
    };
    assert_eq!(
        run(&offline, &c),
        (true, vec![(false, AGENT_OFFLINE.into())])
    );

    let c = creds(&[], &[("nobody", "pw")]);
    let (retry, r) = run(&g, &c);
    assert!(retry);
    assert_eq!(r, vec![(false, "Error encountered setting password for user [nobody]: virError(Code=113, Domain=10, Message='guest agent command failed: unable to execute QEMU agent command 'guest-set-user-password': child process has failed to set user password')".into())]);

    // An unknown user: libvirt's way fails, then the file-based one.
    let c = creds(&[("nobody", &["k"])], &[]);
    let (_, r) = run(&g, &c);
    assert_eq!(r.len(), 1);
    assert!(r[0].1.starts_with("Error encountered writing ssh pub key access credentials for user [nobody]: failed to set SSH keys: error from guest-ssh-add-authorized-keys: virError("), "{r:?}");
    assert!(r[0].1.ends_with("; error from using guest-file-write: Unable to detect home directory of user nobody: exited with error code:2"), "{r:?}");

    let mut c = creds(&[], &[]);
    c.errors.push("error occurred while reading ...".into());
    assert_eq!(
        run(&g, &c),
        (
            true,
            vec![(false, "error occurred while reading ...".into())]
        )
    );
}

#[test]
fn agents_without_the_ssh_commands_get_the_file_written() {
    let g = Guest {
        no_ssh: true,
        ..Guest::default()
    };
    let c = creds(&[("guest", &["k1", "k2"])], &[]);
    assert_eq!(run(&g, &c), (false, vec![(true, String::new())]));
    assert_eq!(
        g.files.lock().unwrap()["/home/guest/.ssh/authorized_keys"],
        "k1\nk2"
    );
    assert_eq!(
        *g.execs.lock().unwrap(),
        [
            "getent passwd guest",
            "mkdir -p /home/guest/.ssh",
            "chown 1000:1000 /home/guest/.ssh",
            "chmod 700 /home/guest/.ssh",
            "chown 1000:1000 /home/guest/.ssh/authorized_keys",
            "chmod 600 /home/guest/.ssh/authorized_keys",
        ]
    );
    // Unchanged: read, compared, not written again.
    g.execs.lock().unwrap().clear();
    assert_eq!(run(&g, &c), (false, vec![(true, String::new())]));
    assert_eq!(*g.execs.lock().unwrap(), ["getent passwd guest"]);
}

#[test]
fn the_watcher_applies_at_start_and_after_each_change_until_stopped() {
    let t = tempfile::tempdir().unwrap();
    let d = dirs(t.path());
    std::fs::write(d["k1"].join("a"), "key-one").unwrap();
    let g = Arc::new(Guest::default());
    let metadata = Arc::new(MetadataCache::new(Box::new(|| {})));
    let w = CredentialWatcher::default();
    let v = vmi(CREDS);
    let setup = || WatchSetup {
        dirs: d.clone(),
        channel: Arc::clone(&g) as Arc<dyn AgentChannel>,
        metadata: Arc::clone(&metadata),
        check_interval: Duration::from_millis(50),
    };
    w.start_once(&v, setup).unwrap();
    w.start_once(&v, setup).unwrap();
    let wait = |f: &dyn Fn() -> bool| {
        let end = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < end, "not in time");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait(&|| {
        g.keys
            .lock()
            .unwrap()
            .get("root")
            .is_some_and(|k| k == &["key-one"])
    });
    assert_eq!(
        metadata.snapshot().access_credential,
        Some(AccessCredentialMetadata {
            succeeded: true,
            message: String::new()
        })
    );
    std::fs::write(d["k1"].join("a"), "key-two").unwrap();
    std::fs::write(d["pw"].join("nobody"), "x").unwrap();
    wait(&|| {
        g.keys
            .lock()
            .unwrap()
            .get("root")
            .is_some_and(|k| k == &["key-two"])
    });
    wait(&|| {
        metadata
            .snapshot()
            .access_credential
            .is_some_and(|a| !a.succeeded && a.message.contains("[nobody]"))
    });
    w.stop();

    // A missing directory fails the start in KubeVirt's words.
    let w = CredentialWatcher::default();
    let mut gone = d.clone();
    gone.insert("k2".into(), t.path().join("gone"));
    let e = w
        .start_once(&v, || WatchSetup {
            dirs: gone,
            ..setup()
        })
        .unwrap_err();
    assert!(
        e.starts_with("Starting qemu agent access credential propagation failed: "),
        "{e}"
    );
}
