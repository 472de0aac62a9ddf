//! Access credentials through the guest agent on one boot of the test
//! guest (its user `guest`, uid 1000, `/home/guest`; qemu-ga 10 with
//! `guest-ssh-add-authorized-keys`; `/usr/sbin/chpasswd` for
//! `guest-set-user-password`): standalone `--access-credential` directories,
//! the key secret in kubelet's atomic-writer layout (`..data` swapped), the
//! result read from the domain's metadata as virt-handler reads it, the
//! guest's files read back through the agent; last, qemu-ga restarted
//! without the ssh commands, which takes KubeVirt's file-based way. The
//! launcher checks the
//! secrets every second here (`VIRT_LAUNCHER_ACCESS_CREDENTIAL_CHECK_SECONDS`,
//! KubeVirt's 15 s otherwise).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use virtwrap::agent::AgentChannel;

use crate::agent::{ctl_json, raw_agent};
use crate::harness::{give_to_qemu_user, guest_vmi, Launcher, Opts, BOOT_TIMEOUT};

/// How long one change may take to reach the guest (a check a second,
/// agent calls under TCG on a loaded machine).
const APPLY_WAIT: Duration = Duration::from_secs(120);

const KEY1: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EKEY1 one@e2e";
const KEY2: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EKEY2 two@e2e";
const KEY3: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQE2EKEY3 three@e2e";

/// Writes `files` as kubelet's atomic writer does: a fresh `..<stamp>`
/// directory, `..data` swapped to it by a rename, a link `<key> ->
/// ..data/<key>` per key, the old directory and stale links removed.
fn atomic_write(dir: &Path, gen: u32, files: &[(&str, &[u8])]) {
    let stamp = format!("..2026_12_02_12_00_0{gen}.{gen}");
    fs::create_dir(dir.join(&stamp)).unwrap();
    for (k, v) in files {
        fs::write(dir.join(&stamp).join(k), v).unwrap();
    }
    let old = fs::read_link(dir.join("..data")).ok();
    symlink(&stamp, dir.join("..data_tmp")).unwrap();
    fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for e in fs::read_dir(dir).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if !n.starts_with("..") && !files.iter().any(|(k, _)| *k == n) {
            fs::remove_file(e.path()).unwrap();
        }
    }
    for (k, _) in files {
        if fs::symlink_metadata(dir.join(k)).is_err() {
            symlink(format!("..data/{k}"), dir.join(k)).unwrap();
        }
    }
    if let Some(old) = old {
        fs::remove_dir_all(dir.join(old)).unwrap();
    }
    give_to_qemu_user(dir);
}

/// The domain's `AccessCredential` metadata (what virt-handler turns into
/// the `AccessCredentialsSynchronized` condition), `Null` when none.
fn result(l: &Launcher) -> Value {
    ctl_json(l, &["domain"])["Spec"]["Metadata"]["KubeVirt"]["AccessCredential"].clone()
}

fn wait_for(l: &Launcher, what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < APPLY_WAIT,
            "not within {APPLY_WAIT:?}: {what}; last result {}\n--- launcher ---\n{}",
            result(l),
            l.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A guest file's contents through the agent (`guest-file-open/read`), up
/// to 64 KiB; `None` when it cannot be opened.
fn guest_file(l: &Launcher, path: &str) -> Option<String> {
    let a = raw_agent(l);
    let t = Duration::from_secs(30);
    let open = a
        .command(
            &json!({"execute": "guest-file-open", "arguments": {"path": path, "mode": "r"}})
                .to_string(),
            t,
        )
        .ok()?;
    let h = serde_json::from_str::<Value>(&open).unwrap()["return"].clone();
    let read = a
        .command(
            &json!({"execute": "guest-file-read", "arguments": {"handle": h, "count": 65536}})
                .to_string(),
            t,
        )
        .unwrap();
    let _ = a.command(
        &json!({"execute": "guest-file-close", "arguments": {"handle": h}}).to_string(),
        t,
    );
    let b64 = serde_json::from_str::<Value>(&read).unwrap()["return"]["buf-b64"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    Some(String::from_utf8(bytes).unwrap())
}

/// The non-blank lines of `guest`'s authorized_keys.
fn authorized_keys(l: &Launcher) -> Vec<String> {
    guest_file(l, "/home/guest/.ssh/authorized_keys")
        .unwrap_or_default()
        .lines()
        .filter(|k| !k.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `guest`'s hash in the guest's /etc/shadow is the SHA-512 crypt
/// of `password` (checked on the host with `openssl passwd -6`).
fn password_is(l: &Launcher, password: &str) -> bool {
    let shadow = guest_file(l, "/etc/shadow").unwrap_or_default();
    let Some(hash) = shadow
        .lines()
        .find_map(|line| line.strip_prefix("guest:"))
        .and_then(|rest| rest.split(':').next())
    else {
        return false;
    };
    let Some(salt) = hash.strip_prefix("$6$").and_then(|h| h.split('$').next()) else {
        return false;
    };
    let out = Command::new("openssl")
        .args(["passwd", "-6", "-salt", salt, password])
        .output()
        .expect("openssl is needed to check the guest's password hash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim() == hash
}

#[test]
fn keys_and_passwords_reach_the_guest_follow_the_secret_and_bad_input_is_reported() {
    let keys = tempfile::tempdir().unwrap();
    let pw = tempfile::tempdir().unwrap();
    atomic_write(
        keys.path(),
        1,
        &[("id1", format!("{KEY1}\n\n   \n").as_bytes())],
    );
    fs::write(pw.path().join("guest"), "first-pass\n").unwrap();
    give_to_qemu_user(pw.path());
    let yaml = guest_vmi("acred", "virtio").replace(
        "  terminationGracePeriodSeconds: 30\n",
        "  terminationGracePeriodSeconds: 30
  accessCredentials:
  - sshPublicKey:
      source: {secret: {secretName: my-keys}}
      propagationMethod: {qemuGuestAgent: {users: [guest]}}
  - userPassword:
      source: {secret: {secretName: my-pw}}
      propagationMethod: {qemuGuestAgent: {}}
",
    );
    let (ka, pa) = (
        format!("my-keys={}", keys.path().display()),
        format!("my-pw={}", pw.path().display()),
    );
    let one = std::ffi::OsStr::new("1");
    let opts = Opts {
        args: &["--access-credential", &ka, "--access-credential", &pa],
        env: &[("VIRT_LAUNCHER_ACCESS_CREDENTIAL_CHECK_SECONDS", one)],
        ..Opts::default()
    };
    let mut l = Launcher::start(&yaml, &opts);
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);

    // At start: the key (blank lines and the atomic writer's entries
    // ignored) and the password; success reported.
    wait_for(&l, "the first key and password", || {
        result(&l) == json!({"Succeeded": true, "Message": ""})
            && authorized_keys(&l) == [KEY1]
            && password_is(&l, "first-pass")
    });
    // qemu-ga made ~/.ssh and the file the user's, 700 and 600.
    let a = raw_agent(&l);
    let stat = |p: &str| {
        let pid = a
            .command(
                &json!({"execute": "guest-exec", "arguments": {"path": "stat", "arg": ["-c", "%u:%g %a", p], "capture-output": true}}).to_string(),
                Duration::from_secs(30),
            )
            .unwrap();
        let pid = serde_json::from_str::<Value>(&pid).unwrap()["return"]["pid"].clone();
        loop {
            let s = a
                .command(
                    &json!({"execute": "guest-exec-status", "arguments": {"pid": pid}}).to_string(),
                    Duration::from_secs(30),
                )
                .unwrap();
            let s: Value = serde_json::from_str(&s).unwrap();
            if s["return"]["exited"] == true {
                let out = s["return"]["out-data"].as_str().unwrap_or("");
                let out = base64::engine::general_purpose::STANDARD
                    .decode(out)
                    .unwrap();
                return String::from_utf8(out).unwrap().trim().to_owned();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    assert_eq!(stat("/home/guest/.ssh"), "1000:1000 700");
    assert_eq!(stat("/home/guest/.ssh/authorized_keys"), "1000:1000 600");

    // A changed secret (kubelet's ..data swap) and a changed password
    // replace what the guest has.
    atomic_write(
        keys.path(),
        2,
        &[
            ("id1", KEY2.as_bytes()),
            ("id2", format!("{KEY3}\n").as_bytes()),
        ],
    );
    fs::write(pw.path().join("guest"), "second-pass").unwrap();
    wait_for(&l, "the changed keys and password", || {
        authorized_keys(&l) == [KEY2, KEY3] && password_is(&l, "second-pass")
    });
    wait_for(&l, "success after the change", || {
        result(&l) == json!({"Succeeded": true, "Message": ""})
    });

    // A key file of 10 MiB: refused with KubeVirt's words for a failed
    // read; the guest keeps its keys.
    atomic_write(
        keys.path(),
        3,
        &[
            ("id1", KEY2.as_bytes()),
            ("id2", KEY3.as_bytes()),
            ("huge", &vec![b'A'; 10 << 20]),
        ],
    );
    let huge = format!(
        "error occurred while reading the access credential secret file [{}/huge]: larger than 1048576 bytes, the most a Kubernetes Secret holds",
        fs::canonicalize(keys.path()).unwrap().display()
    );
    wait_for(&l, "the 10 MiB key file's error", || {
        result(&l) == json!({"Succeeded": false, "Message": huge})
    });
    assert_eq!(authorized_keys(&l), [KEY2, KEY3]);

    // An empty secret (kubevirt/kubevirt#12562 crashed KubeVirt's launcher
    // here) empties the user's keys; a password for a user the guest does
    // not have fails in KubeVirt's words; guest and launcher keep running.
    atomic_write(keys.path(), 4, &[]);
    fs::write(pw.path().join("nosuchuser"), "x").unwrap();
    give_to_qemu_user(pw.path());
    wait_for(&l, "the unknown user's error", || {
        result(&l)["Message"].as_str().is_some_and(|m| {
            m.starts_with("Error encountered setting password for user [nosuchuser]: virError(Code=113, Domain=10, Message='guest agent command failed: unable to execute QEMU agent command 'guest-set-user-password': child process has failed to set user password")
        })
    });
    assert_eq!(result(&l)["Succeeded"], false);
    wait_for(&l, "the emptied authorized_keys", || {
        authorized_keys(&l).is_empty()
    });
    assert!(
        password_is(&l, "second-pass"),
        "the known user's password stays"
    );
    assert!(l.try_exit().is_none(), "the launcher exited:\n{}", l.log());
    assert!(l.domstate().starts_with("running"), "{}", l.domstate());

    // An agent without guest-ssh-add-authorized-keys (qemu-ga restarted
    // with it blocked): KubeVirt's file-based way writes the file through
    // getent, guest-file-write, mkdir, chown and chmod.
    fs::remove_file(pw.path().join("nosuchuser")).unwrap();
    let restart = "sleep 1; kill $(cat /run/qemu-ga.loop.pid); sleep 1; \
        exec qemu-ga -m virtio-serial -p /dev/virtio-ports/org.qemu.guest_agent.0 \
        -l /var/log/qemu-ga.log -t /run -b guest-ssh-add-authorized-keys,guest-ssh-remove-authorized-keys";
    a.command(
        &json!({"execute": "guest-exec", "arguments": {"path": "/bin/sh", "arg": ["-c", format!("setsid sh -c '{restart}' </dev/null >/dev/null 2>&1 &")]}}).to_string(),
        Duration::from_secs(30),
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    atomic_write(keys.path(), 5, &[("id1", KEY1.as_bytes())]);
    wait_for(&l, "the keys written the file-based way", || {
        result(&l) == json!({"Succeeded": true, "Message": ""}) && authorized_keys(&l) == [KEY1]
    });
    assert!(
        l.log()
            .contains("Detected home directory /home/guest for user guest"),
        "the file-based way was not taken:\n{}",
        l.log()
    );
    assert_eq!(stat("/home/guest/.ssh/authorized_keys"), "1000:1000 600");

    l.stop(Duration::from_secs(120));
}
