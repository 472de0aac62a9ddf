//! Issue 18's checks, run on guests other tests boot anyway (no guest of
//! their own): the screenshot (a PNG of the guest's VGA text screen),
//! GetVMStats with every item and with the agent gone, the guest's clock
//! set after Unpause, and the answers KubeVirt gives on a host without
//! SEV and for the commands not built yet.

use std::time::{Duration, Instant};

use cmd::proto::cmd as pb;
use serde_json::Value;

use crate::agent::ctl_json;
use crate::harness::Launcher;

/// VGA text mode 80×25 with the 9×16 font: the screen SeaBIOS, SYSLINUX
/// and the test guest leave (the guest's kernel writes to its serial
/// console only).
const TEXT_MODE: (u32, u32) = (720, 400);

/// `ctl screenshot -f FILE`: a PNG of the guest's resolution with text on
/// it (a blank screen has one colour: the variance of its luminance is
/// 0; SeaBIOS' banner and SYSLINUX' lines make a few percent of the
/// pixels light grey).
pub fn screenshot_shows_the_text_screen(l: &Launcher) {
    let file = l.dir.path().join("screen.png");
    let out = ctl_json(l, &["screenshot", "-f", file.to_str().unwrap()]);
    assert_eq!(out["mime"], "image/png", "{out}");
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(out["bytes"], bytes.len(), "{out}");
    let mut reader = png::Decoder::new(std::io::Cursor::new(&bytes[..]))
        .read_info()
        .expect("a valid PNG");
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).expect("PNG image data");
    assert_eq!((info.width, info.height), TEXT_MODE);
    let channels = info.color_type.samples();
    let lum: Vec<f64> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| p.iter().take(3).map(|&c| f64::from(c)).sum::<f64>() / 3.0)
        .collect();
    let n = lum.len() as f64;
    let mean = lum.iter().sum::<f64>() / n;
    let var = lum.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let lit = lum.iter().filter(|v| **v > 128.0).count() as f64 / n;
    assert!(
        var > 100.0 && (0.005..0.5).contains(&lit),
        "not a screen with text: variance {var:.1}, {:.2} % lit (kept at {})",
        lit * 100.0,
        file.display()
    );
    // Where the text is: the first text row (SeaBIOS' banner) has lit
    // pixels, the bottom row none.
    let row_lit = |row: u32| {
        let (w, y0) = (info.width as usize, row as usize * 16);
        lum[y0 * w..(y0 + 16) * w]
            .iter()
            .filter(|v| **v > 128.0)
            .count()
    };
    assert!(row_lit(0) > 100, "the first text row is empty");
    assert_eq!(row_lit(24), 0, "the last text row is not empty");
}

/// `ctl vmstats` for `items` (as JSON) and whether it succeeded.
fn vmstats(l: &Launcher, items: &[&str]) -> (bool, Value, String) {
    let mut args = vec!["-o", "json", "vmstats"];
    for i in items {
        args.extend(["--item", i]);
    }
    let (ok, out, err) = l.ctl(&args);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("vmstats: {e}: {out} {err}"));
    (ok, v, err)
}

/// GetVMStats with every item: each requested item answered, each agent
/// item with the agent's raw reply; an item not asked is not answered.
pub fn vm_stats_answer_every_item(l: &Launcher) {
    let (ok, v, err) = vmstats(l, &[]);
    assert!(ok, "{err}\n{v:#}");
    assert_eq!(v["response"]["success"], true, "{v:#}");
    assert_eq!(v["domainStats"]["response"]["success"], true, "{v:#}");
    assert_eq!(v["domainStats"]["domainStats"]["Name"], l.domain, "{v:#}");
    assert_eq!(v["dirtyRateStats"]["response"]["success"], true, "{v:#}");
    assert!(v["dirtyRateStats"]["dirtyRateMbs"].as_i64().unwrap() >= 0);
    assert!(v["guestAgentVersion"]["message"]
        .as_str()
        .unwrap()
        .starts_with("10."));
    for c in cmd::server::AGENT_DATA_COMMANDS {
        let item = &v[c];
        assert_eq!(item["success"], true, "{c}: {item}");
        let reply: Value = serde_json::from_str(item["message"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{c}: {e}: {item}"));
        assert!(reply.get("return").is_some(), "{c}: {reply}");
    }
    let os: Value =
        serde_json::from_str(v["guest-get-osinfo"]["message"].as_str().unwrap()).unwrap();
    assert_eq!(os["return"]["id"], "busybox-guest");
    let host: Value =
        serde_json::from_str(v["guest-get-host-name"]["message"].as_str().unwrap()).unwrap();
    assert!(host["return"]["host-name"].is_string(), "{host}");
    // Only what is asked is answered.
    let (ok, one, _) = vmstats(l, &["guest-get-time"]);
    assert!(ok);
    let keys: Vec<&String> = one.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["guest-get-time", "guestAgentVersion", "response"],
        "{one}"
    );
}

/// GetVMStats with the agent gone: every agent item fails with libvirt's
/// reason in KubeVirt's words, the top level joins them, the domain
/// statistics still answer.
pub fn vm_stats_fail_per_item_without_agent(l: &Launcher) {
    let (ok, v, err) = vmstats(l, &["domainStats", "guest-get-load", "guest-get-osinfo"]);
    assert!(!ok, "{v:#}");
    assert_eq!(v["domainStats"]["response"]["success"], true, "{v:#}");
    for c in ["guest-get-load", "guest-get-osinfo"] {
        let m = v[c]["message"].as_str().unwrap();
        assert_eq!(v[c]["success"], false, "{v:#}");
        assert!(
            m.starts_with(&format!("failed to get agent data for {c}: virError(Code=86, Domain=10, Message='Guest agent is not responding: QEMU guest agent is not connected"))
                || m.starts_with(&format!("failed to get agent data for {c}: virError(Code=86")),
            "{m}"
        );
    }
    let top = v["response"]["message"].as_str().unwrap();
    assert!(
        top.starts_with("agent data guest-get-load: failed to get agent data for guest-get-load: ")
            && top.contains("; agent data guest-get-osinfo: "),
        "{top}"
    );
    assert!(err.contains("agent data guest-get-load"), "{err}");
}

/// After the first Unpause the launcher sets the guest's clock through the
/// agent (`guest-set-time`): the guest's clock, put back an hour before
/// the pause, is the host's again.
pub fn unpause_sets_the_guest_clock(l: &Launcher) {
    let guest_now = || -> i64 {
        let r = ctl_json(l, &["exec", "--", "/bin/date", "+%s"]);
        r["stdOut"].as_str().unwrap().trim().parse().unwrap()
    };
    let host_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let r = ctl_json(
        l,
        &[
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "date -s @$(( $(date +%s) - 3600 )) >/dev/null",
        ],
    );
    assert_eq!(r["exitCode"], 0, "{r}");
    let behind = host_now() - guest_now();
    assert!(
        (3590..3610).contains(&behind),
        "the guest is {behind} s behind"
    );
    assert_eq!(ctl_json(l, &["pause"])["ok"], true);
    std::thread::sleep(Duration::from_secs(1));
    let resumed = Instant::now();
    assert_eq!(ctl_json(l, &["unpause"])["ok"], true);
    let start = Instant::now();
    while !l.log().contains("guest VM time sync finished successfully") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no time sync:\n{}",
            l.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // KubeVirt's first try comes a second after the resume.
    assert!(resumed.elapsed() >= Duration::from_secs(1));
    let off = (host_now() - guest_now()).abs();
    assert!(off <= 2, "the guest's clock is {off} s off after the sync");
}

/// The commands whose answer on this host is a refusal: KubeVirt's SEV
/// answers on a host without SEV (libvirt's own errors; KubeVirt's
/// `open : no such file or directory` for the missing SEV loader), the
/// launch secret's option checks, and backup and checkpoints of a VMI
/// without changed block tracking (KubeVirt main's words).
pub fn sev_and_backup_refusals(l: &Launcher) {
    assert!(
        !std::path::Path::new("/usr/share/OVMF/OVMF_CODE.cc.fd").exists(),
        "this host has KubeVirt's SEV loader: the expected answer differs"
    );
    let dom = ctl_json(l, &["domain"]);
    let vmi = pb::Vmi {
        vmi_json: serde_json::json!({"metadata": {
            "name": dom["ObjectMeta"]["name"],
            "namespace": dom["ObjectMeta"]["namespace"],
            "uid": dom["Spec"]["Metadata"]["KubeVirt"]["UID"],
        }})
        .to_string()
        .into_bytes(),
    };
    let socket = l.state.join("share/sockets/launcher-sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = cmd::client::Client::connect(&socket).await.unwrap().cmd;
        let fail = |r: Option<pb::Response>| {
            let r = r.expect("a response");
            assert!(!r.success, "a silent success: {r:?}");
            r.message
        };
        let sev = c
            .get_sev_info(pb::EmptyRequest {})
            .await
            .unwrap()
            .into_inner();
        assert!(sev.sev_info.is_empty());
        let m = fail(sev.response);
        assert!(
            m.starts_with("LibvirtError(Code=84, Domain=10, Message='Operation not supported: "),
            "{m}"
        );
        let lm = c
            .get_launch_measurement(pb::VmiRequest {
                vmi: Some(vmi.clone()),
                options: None,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(fail(lm.response), "open : no such file or directory");
        let inject = |options: &str| pb::InjectLaunchSecretRequest {
            vmi: Some(vmi.clone()),
            options: options.as_bytes().to_vec(),
        };
        let mut msg = Vec::new();
        for o in [
            "not json",
            r#"{"secret":"aA=="}"#,
            r#"{"header":"aA=="}"#,
            r#"{"header":"aA==","secret":"aA=="}"#,
        ] {
            let r = c
                .inject_launch_secret(inject(o))
                .await
                .unwrap()
                .into_inner();
            msg.push(fail(Some(r)));
        }
        assert_eq!(
            msg[0],
            "No valid secret options present in command server request"
        );
        assert_eq!(msg[1], "Header is required");
        assert_eq!(msg[2], "Secret is required");
        assert!(msg[3].starts_with("LibvirtError(Code="), "{}", msg[3]);
        let b = c
            .backup_virtual_machine(pb::BackupRequest {
                vmi: Some(vmi.clone()),
                options: b"{}".to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            fail(Some(b)),
            "Backup failed ChangedBlockTracking is not enabled"
        );
        let rc = c
            .redefine_checkpoint(pb::RedefineCheckpointRequest {
                vmi: Some(vmi.clone()),
                checkpoint: b"{}".to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!rc.checkpoint_invalid);
        assert_eq!(
            fail(rc.response),
            "Redefine checkpoint failed: ChangedBlockTracking is not enabled"
        );
    });
}
