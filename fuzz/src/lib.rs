//! The property both fuzz targets check, and the host facts they convert
//! with.
//!
//! Property: conversion never panics; an `Ok` domain serialises, and its XML
//! parses back with our own domain model (what GetDomain and the launcher do
//! with libvirt's XML) into the same domain. With `FUZZ_VALIDATE=1` (slow,
//! used by `bench/fuzz.sh` on the corpus), every `Ok` XML must also pass
//! `virt-xml-validate FILE domain`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use api::{Arch, VirtualMachineInstance};
use converter::numa::HostNumaCell;
use converter::{convert, ConvertContext, VirtType};

/// The four architectures KubeVirt builds launchers for.
pub const ARCHES: [Arch; 4] = [Arch::Amd64, Arch::Arm64, Arch::Ppc64le, Arch::S390x];

/// A context with the host facts the launcher probes filled in, so the paths
/// that need them (dedicated CPUs, NUMA passthrough) are reachable: a pod
/// cpuset of 64 CPUs on two host NUMA nodes of 32.
pub fn host_context(arch: Arch, virt: VirtType) -> ConvertContext {
    let mut ctx = ConvertContext::new(arch, virt);
    ctx.pod_cpuset = Some((0..64).collect());
    ctx.host_numa = Some(vec![
        HostNumaCell {
            id: 0,
            cpus: (0..32).collect(),
        },
        HostNumaCell {
            id: 1,
            cpus: (32..64).collect(),
        },
    ]);
    ctx
}

fn validate_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("FUZZ_VALIDATE").is_some_and(|v| v == "1"))
}

/// How far inputs get: runs, VMIs that decoded and validated (reached the
/// converter), conversions that succeeded.
static RUNS: AtomicU64 = AtomicU64::new(0);
static CONVERTED: AtomicU64 = AtomicU64::new(0);
static OK: AtomicU64 = AtomicU64::new(0);

/// `FUZZ_STATS`: 0 (default) quiet, 1 counts, 2 also every conversion error
/// (to see what stops inputs: `... 2>&1 | grep fuzz-error | sort | uniq -c`).
fn stats_level() -> u8 {
    static LEVEL: OnceLock<u8> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        std::env::var("FUZZ_STATS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// Counts one run of a target. With `FUZZ_STATS=1` prints, at every power
/// of two, how many conversions were tried (`vmi_bytes`: one per arch the
/// input decodes for) and how many succeeded:
/// `fuzz-stats: runs=N converter=N ok=N`.
pub fn count_run() {
    let n = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
    if stats_level() >= 1 && n.is_power_of_two() {
        eprintln!(
            "fuzz-stats: runs={n} converter={} ok={}",
            CONVERTED.load(Ordering::Relaxed),
            OK.load(Ordering::Relaxed)
        );
    }
}

/// Converts `vmi` with `ctx` and checks the property; returns the XML of an
/// `Ok` conversion. Panics (a finding) when the property does not hold.
pub fn check(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> Option<String> {
    CONVERTED.fetch_add(1, Ordering::Relaxed);
    let dom = match convert(vmi, ctx) {
        Ok(d) => d,
        Err(e) => {
            if stats_level() >= 2 {
                eprintln!("fuzz-error: {e}");
            }
            return None;
        }
    };
    OK.fetch_add(1, Ordering::Relaxed);
    let xml = match dom.to_xml() {
        Ok(x) => x,
        Err(e) => panic!("converted domain does not serialise: {e}\n{dom:#?}"),
    };
    let back = match domain::Domain::from_xml(&xml) {
        Ok(d) => d,
        Err(e) => panic!("domain XML does not parse back: {e}\n{xml}"),
    };
    if back != dom {
        panic!(
            "domain XML parses back into a different domain\nXML:\n{xml}\nparsed:\n{back:#?}\nconverted:\n{dom:#?}"
        );
    }
    if validate_enabled() {
        virt_xml_validate(&xml);
    }
    Some(xml)
}

/// Runs `virt-xml-validate FILE domain`; panics with its output on failure
/// or when the tool is missing.
pub fn virt_xml_validate(xml: &str) {
    let dir = std::env::temp_dir().join(format!("vl-fuzz-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("domain.xml");
    std::fs::write(&file, xml).expect("write XML");
    let out = std::process::Command::new("virt-xml-validate")
        .arg(&file)
        .arg("domain")
        .output()
        .expect("virt-xml-validate (libvirt-clients) is needed for FUZZ_VALIDATE=1");
    if !out.status.success() {
        panic!(
            "virt-xml-validate rejects the XML:\n{}{}\n{xml}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// ---------------------------------------------------------------------------
// Helpers of the packet targets (dhcpv4, dhcpv6).

/// Splits a packet target's input: a 2-byte little-endian length, that
/// many bytes of packet (fewer when the input ends), then the rest (what
/// the target reads its configuration from).
pub fn split_packet(data: &[u8]) -> (&[u8], &[u8]) {
    if data.len() < 2 {
        return (data, &[]);
    }
    let len = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let body = &data[2..];
    let end = len.min(body.len());
    (&body[..end], &body[end..])
}

thread_local! {
    static CATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, a call of ours that catches panics itself (the DHCP decoders
/// catch one in `dhcproto` and refuse the packet, as the servers do), with
/// a panic hook that lets such a panic be caught. libfuzzer-sys' own hook
/// aborts on every panic, caught or not; outside `f` it still does. Each
/// place a caught panic came from is printed once
/// (`fuzz-caught: <message> at <file:line>`).
pub fn catching<T>(f: impl FnOnce() -> T) -> T {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let outer = std::panic::take_hook();
        let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(std::cell::Cell::get) {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                if seen.lock().map(|mut s| s.insert(at.clone())).unwrap_or(false) {
                    eprintln!("fuzz-caught: {msg:?} at {at} (caught, packet refused)");
                }
                return;
            }
            outer(info);
        }));
    });
    CATCHING.with(|c| c.set(true));
    let r = f();
    CATCHING.with(|c| c.set(false));
    r
}

/// The command socket's messages: the messages-only files of `cmd`'s
/// checked-in generated code (`crates/protogen` writes them, its test keeps
/// them current), the same definitions as `cmd::proto` without the tonic
/// services. Depending on `cmd` would build tonic, hyper and tokio with
/// libFuzzer's instrumentation for code the target never runs; generating
/// them here would build protox and prost-build.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    /// `kubevirt.cmd.v1`.
    pub mod cmd {
        include!("../../crates/cmd/src/generated/kubevirt.cmd.v1.rs");
    }
    /// `kubevirt.cmd.info`.
    pub mod cmd_info {
        include!("../../crates/cmd/src/generated/kubevirt.cmd.info.rs");
    }
    /// `kubevirt.notify.v1`.
    pub mod notify {
        include!("../../crates/cmd/src/generated/kubevirt.notify.v1.rs");
    }
}
