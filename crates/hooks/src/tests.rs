//! Unit tests of the hook manager against sidecar stand-ins served by
//! tonic on real Unix sockets, with short injected timeouts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::proto::{info, v1alpha1, v1alpha3};
use crate::{hook_point, HookError, Manager, Timeouts, Version};

/// What a stand-in's OnDefineDomain does.
#[derive(Clone, Copy)]
enum Define {
    /// Appends `<!--tag-->` to the XML.
    Append(&'static str),
    /// Answers `<not-closed`.
    Garbage,
    /// Never answers.
    Hang,
    /// Answers an error status.
    Fail,
}

#[derive(Clone)]
struct Sidecar {
    versions: Vec<&'static str>,
    points: Vec<&'static str>,
    define: Define,
    shutdowns: Arc<AtomicUsize>,
    info_fails: bool,
}

impl Sidecar {
    fn new(versions: &[&'static str], points: &[&'static str], define: Define) -> Self {
        Sidecar {
            versions: versions.to_vec(),
            points: points.to_vec(),
            define,
            shutdowns: Arc::default(),
            info_fails: false,
        }
    }
}

#[tonic::async_trait]
impl info::info_server::Info for Sidecar {
    async fn info(
        &self,
        _: Request<info::InfoParams>,
    ) -> Result<Response<info::InfoResult>, Status> {
        if self.info_fails {
            return Err(Status::internal("info broke"));
        }
        Ok(Response::new(info::InfoResult {
            name: "test".into(),
            hook_points: self
                .points
                .iter()
                .map(|p| info::HookPoint {
                    name: (*p).into(),
                    priority: 0,
                })
                .collect(),
            versions: self.versions.iter().map(|v| (*v).into()).collect(),
        }))
    }
}

impl Sidecar {
    async fn transform(&self, xml: Vec<u8>) -> Result<Vec<u8>, Status> {
        match self.define {
            Define::Append(tag) => {
                let mut s = String::from_utf8(xml).unwrap();
                s.push_str(&format!("<!--{tag}-->"));
                Ok(s.into_bytes())
            }
            Define::Garbage => Ok(b"<not-closed".to_vec()),
            Define::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(xml)
            }
            Define::Fail => Err(Status::internal("sidecar broke")),
        }
    }
}

#[tonic::async_trait]
impl v1alpha3::callbacks_server::Callbacks for Sidecar {
    async fn on_define_domain(
        &self,
        r: Request<v1alpha3::OnDefineDomainParams>,
    ) -> Result<Response<v1alpha3::OnDefineDomainResult>, Status> {
        let xml = self.transform(r.into_inner().domain_xml).await?;
        Ok(Response::new(v1alpha3::OnDefineDomainResult {
            domain_xml: xml,
        }))
    }
    async fn pre_cloud_init_iso(
        &self,
        r: Request<v1alpha3::PreCloudInitIsoParams>,
    ) -> Result<Response<v1alpha3::PreCloudInitIsoResult>, Status> {
        // Upper-cases the user data, keeps the rest.
        let p = r.into_inner();
        let mut v: serde_json::Value = serde_json::from_slice(&p.cloud_init_data).unwrap();
        let user = v["UserData"].as_str().unwrap().to_uppercase();
        v["UserData"] = user.into();
        Ok(Response::new(v1alpha3::PreCloudInitIsoResult {
            cloud_init_no_cloud_source: p.cloud_init_no_cloud_source,
            cloud_init_data: serde_json::to_vec(&v).unwrap(),
        }))
    }
    async fn shutdown(
        &self,
        _: Request<v1alpha3::ShutdownParams>,
    ) -> Result<Response<v1alpha3::ShutdownResult>, Status> {
        self.shutdowns.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(v1alpha3::ShutdownResult {}))
    }
}

#[tonic::async_trait]
impl v1alpha1::callbacks_server::Callbacks for Sidecar {
    async fn on_define_domain(
        &self,
        r: Request<v1alpha1::OnDefineDomainParams>,
    ) -> Result<Response<v1alpha1::OnDefineDomainResult>, Status> {
        let xml = self.transform(r.into_inner().domain_xml).await?;
        Ok(Response::new(v1alpha1::OnDefineDomainResult {
            domain_xml: xml,
        }))
    }
}

/// Sidecars served on one runtime; dropped with the test.
struct Pod {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
}

impl Pod {
    fn new() -> Self {
        Pod {
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn socket(&self, sub: &str, name: &str) -> PathBuf {
        let d = self.dir.path().join(sub);
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    /// Serves `s` at `<dir>/<sub>/<name>`.
    fn serve(&self, sub: &str, name: &str, s: &Sidecar) -> PathBuf {
        let path = self.socket(sub, name);
        let _g = self.rt.enter();
        let l = tokio::net::UnixListener::bind(&path).unwrap();
        let router = tonic::transport::Server::builder()
            .add_service(info::info_server::InfoServer::new(s.clone()))
            .add_service(v1alpha3::callbacks_server::CallbacksServer::new(s.clone()));
        let router = if s.versions.contains(&"v1alpha1") && !s.versions.contains(&"v1alpha3") {
            tonic::transport::Server::builder()
                .add_service(info::info_server::InfoServer::new(s.clone()))
                .add_service(v1alpha1::callbacks_server::CallbacksServer::new(s.clone()))
        } else {
            router
        };
        self.rt
            .spawn(router.serve_with_incoming(UnixListenerStream::new(l)));
        path
    }

    /// A socket that accepts connections and never says a word.
    fn silent(&self, sub: &str, name: &str) -> PathBuf {
        let path = self.socket(sub, name);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            let mut keep = Vec::new();
            for c in l.incoming() {
                keep.push(c);
            }
        });
        path
    }

    fn manager(&self) -> Manager {
        Manager::new(self.dir.path()).with_timeouts(fast())
    }
}

fn fast() -> Timeouts {
    Timeouts {
        scan_interval: Duration::from_millis(50),
        dial: Duration::from_millis(300),
        info: Duration::from_millis(300),
        call: Duration::from_millis(500),
    }
}

fn sockets(m: &Manager, point: &str) -> Vec<PathBuf> {
    m.callbacks(point)
        .iter()
        .map(|c| c.socket.clone())
        .collect()
}

fn rel(p: &Path, base: &Path) -> String {
    p.strip_prefix(base).unwrap().display().to_string()
}

#[test]
fn version_choice_is_the_highest_supported() {
    let v = |l: &[&str]| Version::choose(&l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    assert_eq!(
        v(&["v1alpha1", "v1alpha3", "v1alpha2"]),
        Some(Version::V1alpha3)
    );
    assert_eq!(v(&["v1alpha2", "v1alpha1"]), Some(Version::V1alpha2));
    assert_eq!(v(&["v1alpha1", "v2"]), Some(Version::V1alpha1));
    assert_eq!(v(&["v1beta1", ""]), None);
    assert_eq!(v(&[]), None);
}

#[test]
fn collect_orders_by_directory_then_socket_and_keeps_versions() {
    let pod = Pod::new();
    let both = [hook_point::ON_DEFINE_DOMAIN, hook_point::SHUTDOWN];
    pod.serve(
        "hook-sidecar-1",
        "b.sock",
        &Sidecar::new(&["v1alpha3"], &both, Define::Append("1b")),
    );
    pod.serve(
        "hook-sidecar-0",
        "z.sock",
        &Sidecar::new(&["v1alpha1"], &both[..1], Define::Append("0z")),
    );
    pod.serve(
        "hook-sidecar-1",
        "a.sock",
        &Sidecar::new(&["v1alpha2", "v1alpha3"], &both[..1], Define::Append("1a")),
    );
    // A file and a link at the top level, a link below: never dialled.
    std::fs::write(pod.dir.path().join("stray"), b"").unwrap();
    std::os::unix::fs::symlink(
        "/nonexistent",
        pod.dir.path().join("hook-sidecar-1/zz-link"),
    )
    .unwrap();
    let mut m = pod.manager();
    m.collect(3, Duration::from_secs(5), &|| false).unwrap();
    let base = pod.dir.path();
    let order: Vec<String> = sockets(&m, hook_point::ON_DEFINE_DOMAIN)
        .iter()
        .map(|p| rel(p, base))
        .collect();
    assert_eq!(
        order,
        [
            "hook-sidecar-0/z.sock",
            "hook-sidecar-1/a.sock",
            "hook-sidecar-1/b.sock"
        ]
    );
    let versions: Vec<Version> = m
        .callbacks(hook_point::ON_DEFINE_DOMAIN)
        .iter()
        .map(|c| c.version)
        .collect();
    assert_eq!(
        versions,
        [Version::V1alpha1, Version::V1alpha3, Version::V1alpha3]
    );
    assert_eq!(sockets(&m, hook_point::SHUTDOWN).len(), 1);
    // Applied in that order, each on the previous one's answer.
    let out = m.on_define_domain("<domain/>", b"{}", &|_| Ok(())).unwrap();
    assert_eq!(out, "<domain/><!--0z--><!--1a--><!--1b-->");
}

#[test]
fn a_sidecar_that_answers_later_comes_later() {
    let pod = Pod::new();
    // Not there at the first scan: a silent socket named a.sock in the
    // first directory, replaced by a real one after a while.
    let silent = pod.silent("hook-sidecar-0", "a.sock");
    pod.serve(
        "hook-sidecar-1",
        "b.sock",
        &Sidecar::new(
            &["v1alpha3"],
            &[hook_point::ON_DEFINE_DOMAIN],
            Define::Append("b"),
        ),
    );
    let late = Sidecar::new(
        &["v1alpha3"],
        &[hook_point::ON_DEFINE_DOMAIN],
        Define::Append("a"),
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(800));
            std::fs::remove_file(&silent).unwrap();
            pod.serve("hook-sidecar-0", "a.sock", &late);
        });
        let mut m = pod.manager();
        m.collect(2, Duration::from_secs(10), &|| false).unwrap();
        let base = pod.dir.path();
        let order: Vec<String> = sockets(&m, hook_point::ON_DEFINE_DOMAIN)
            .iter()
            .map(|p| rel(p, base))
            .collect();
        assert_eq!(order, ["hook-sidecar-1/b.sock", "hook-sidecar-0/a.sock"]);
    });
}

#[test]
fn collect_times_out_on_a_silent_socket_and_a_missing_sidecar() {
    let pod = Pod::new();
    pod.silent("hook-sidecar-0", "never.sock");
    // A socket file nobody listens on.
    drop(
        std::os::unix::net::UnixListener::bind(pod.socket("hook-sidecar-1", "dead.sock")).unwrap(),
    );
    let mut m = pod.manager();
    let start = Instant::now();
    let e = m
        .collect(2, Duration::from_millis(700), &|| false)
        .unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(
            e,
            HookError::CollectTimeout {
                found: 0,
                wanted: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().starts_with(
            "Failed to collect all expected sidecar hook sockets within given timeout"
        ),
        "{e}"
    );
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(m.is_empty());
}

#[test]
fn collect_of_zero_returns_at_once_and_a_missing_directory_is_an_error() {
    let mut m = Manager::new("/nonexistent/hooks").with_timeouts(fast());
    m.collect(0, Duration::from_secs(60), &|| false).unwrap();
    let e = m
        .collect(1, Duration::from_secs(60), &|| false)
        .unwrap_err();
    assert!(matches!(e, HookError::Dir { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/hooks"), "{e}");
}

#[test]
fn bad_info_answers_fail_collect_at_once() {
    let pod = Pod::new();
    pod.serve(
        "s0",
        "v.sock",
        &Sidecar::new(
            &["v2beta1"],
            &[hook_point::ON_DEFINE_DOMAIN],
            Define::Append("x"),
        ),
    );
    let e = pod
        .manager()
        .collect(1, Duration::from_secs(30), &|| false)
        .unwrap_err();
    assert!(matches!(e, HookError::Version { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("does not expose a supported version"),
        "{e}"
    );
    assert!(e.to_string().contains("s0/v.sock"), "{e}");

    let pod = Pod::new();
    let mut s = Sidecar::new(&["v1alpha3"], &[], Define::Append("x"));
    s.info_fails = true;
    pod.serve("s0", "i.sock", &s);
    let start = Instant::now();
    let e = pod
        .manager()
        .collect(1, Duration::from_secs(30), &|| false)
        .unwrap_err();
    assert!(matches!(e, HookError::Info { .. }), "{e}");
    assert!(e.to_string().contains("info broke"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

fn one(define: Define) -> (Pod, Manager, PathBuf) {
    let pod = Pod::new();
    let p = pod.serve(
        "hook-sidecar-0",
        "s.sock",
        &Sidecar::new(&["v1alpha3"], &[hook_point::ON_DEFINE_DOMAIN], define),
    );
    let mut m = pod.manager();
    m.collect(1, Duration::from_secs(5), &|| false).unwrap();
    (pod, m, p)
}

#[test]
fn on_define_domain_garbage_hang_and_error_name_the_sidecar() {
    let check = |x: &str| -> Result<(), crate::CheckError> {
        if x.ends_with("-->") || x.ends_with("/>") {
            Ok(())
        } else {
            Err("unclosed element".into())
        }
    };
    let (_pod, m, p) = one(Define::Garbage);
    let e = m.on_define_domain("<domain/>", b"{}", &check).unwrap_err();
    assert!(matches!(e, HookError::Garbage { .. }), "{e}");
    assert!(e.to_string().contains(&p.display().to_string()), "{e}");
    assert!(e.to_string().contains("unclosed element"), "{e}");

    let (_pod, m, p) = one(Define::Hang);
    let start = Instant::now();
    let e = m.on_define_domain("<domain/>", b"{}", &check).unwrap_err();
    assert!(matches!(e, HookError::Call { .. }), "{e}");
    assert!(e.to_string().contains(&p.display().to_string()), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "the call timeout bounds it"
    );

    let (_pod, m, _) = one(Define::Fail);
    let e = m.on_define_domain("<domain/>", b"{}", &check).unwrap_err();
    assert!(e.to_string().contains("sidecar broke"), "{e}");

    // The sidecar died after Collect: its socket is gone.
    let (pod, m, p) = one(Define::Append("x"));
    drop(pod);
    let _ = std::fs::remove_file(&p);
    let e = m.on_define_domain("<domain/>", b"{}", &check).unwrap_err();
    assert!(matches!(e, HookError::Dial { .. }), "{e}");
}

#[test]
fn shutdown_goes_to_v1alpha3_subscribers_only() {
    let pod = Pod::new();
    let s3 = Sidecar::new(&["v1alpha3"], &[hook_point::SHUTDOWN], Define::Append("x"));
    let s1 = Sidecar::new(&["v1alpha1"], &[hook_point::SHUTDOWN], Define::Append("x"));
    pod.serve("a", "s3.sock", &s3);
    pod.serve("b", "s1.sock", &s1);
    let mut m = pod.manager();
    m.collect(2, Duration::from_secs(5), &|| false).unwrap();
    m.shutdown().unwrap();
    assert_eq!(s3.shutdowns.load(Ordering::SeqCst), 1);
    assert_eq!(s1.shutdowns.load(Ordering::SeqCst), 0);
}

fn vmi() -> api::VirtualMachineInstance {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "ns", "annotations": {"kubevirt.io/instancetype-name": "small"}},
        "spec": {"domain": {"devices": {}, "firmware": {"uuid": "5d307ca9-b3ef-428c-8861-06e72d69f223"}}}
    }))
    .unwrap()
}

fn data(source: storage::cloudinit::DataSource) -> storage::cloudinit::CloudInitData {
    storage::cloudinit::CloudInitData {
        source,
        volume: "cloudinitdisk".into(),
        user_data: b"#!/bin/sh\necho <hi>\n".to_vec(),
        network_data: Vec::new(),
        meta_data: br#"{"instance-id":"5d307ca9-b3ef-428c-8861-06e72d69f223","local-hostname":"vm1","public-keys":{"0":"ssh-ed25519 AAA"}}"#.to_vec(),
        public_keys: [("0".to_owned(), "ssh-ed25519 AAA".to_owned())].into(),
    }
}

#[test]
fn cloud_init_data_is_kubevirts_json_and_comes_back_unchanged() {
    let d = data(storage::cloudinit::DataSource::NoCloud);
    let (init, nocloud) = crate::cloudinit::to_json(&d);
    let init = String::from_utf8(init).unwrap();
    assert_eq!(
        init,
        r##"{"DataSource":"noCloud","NoCloudMetaData":{"instance-id":"5d307ca9-b3ef-428c-8861-06e72d69f223","local-hostname":"vm1","public-keys":{"0":"ssh-ed25519 AAA"}},"ConfigDriveMetaData":null,"UserData":"#!/bin/sh\necho \u003chi\u003e\n","NetworkData":"","DevicesData":null,"VolumeName":"cloudinitdisk"}"##
    );
    assert_eq!(
        String::from_utf8(nocloud.clone()).unwrap(),
        r##"{"userData":"#!/bin/sh\necho \u003chi\u003e\n"}"##
    );
    let back = crate::cloudinit::from_result(&vmi(), &d, init.as_bytes(), &nocloud).unwrap();
    assert_eq!(back, d);
}

#[test]
fn cloud_init_answers_are_read_as_kubevirt_reads_them() {
    use storage::cloudinit::DataSource;
    let v = vmi();
    let d = data(DataSource::NoCloud);
    // Keys of any case; unknown keys ignored.
    let r = crate::cloudinit::from_result(
        &v,
        &d,
        br#"{"datasource":"noCloud","nocloudmetadata":{"instance-id":"x"},"userdata":"new","Extra":1}"#,
        b"{}",
    )
    .unwrap();
    assert_eq!(r.user_data, b"new");
    assert_eq!(r.meta_data, br#"{"instance-id":"x"}"#);
    // No meta-data: the no-cloud source's data, KubeVirt's minimal meta-data.
    let r =
        crate::cloudinit::from_result(&v, &d, b"null", br#"{"userData":"u","networkData":"n"}"#)
            .unwrap();
    assert_eq!(
        (r.user_data.as_slice(), r.network_data.as_slice()),
        (&b"u"[..], &b"n"[..])
    );
    assert_eq!(
        String::from_utf8(r.meta_data).unwrap(),
        r#"{"instance-type":"small","instance-id":"5d307ca9-b3ef-428c-8861-06e72d69f223"}"#
    );
    assert!(r.public_keys.is_empty());
    let c = data(DataSource::ConfigDrive);
    let r = crate::cloudinit::from_result(&v, &c, b"{}", br#"{"userData":"u"}"#).unwrap();
    assert_eq!(
        String::from_utf8(r.meta_data).unwrap(),
        r#"{"instance_type":"small","instance_id":"vm1.ns","uuid":"5d307ca9-b3ef-428c-8861-06e72d69f223"}"#
    );
    // Garbage, by path.
    for (init, nocloud, want) in [
        (
            &b"not json"[..],
            &b"{}"[..],
            "cloudInitData that is not JSON",
        ),
        (b"[1]", b"{}", "cloudInitData: an object is expected"),
        (br#"{"UserData":5}"#, b"{}", "cloudInitData.UserData"),
        (b"{}", b"null", "neither valid cloudInitData"),
        (
            br#"{"DataSource":"configDrive","UserData":"u","ConfigDriveMetaData":{}}"#,
            b"{}",
            "DataSource",
        ),
        (
            br#"{"DataSource":"noCloud","UserData":"u","NoCloudMetaData":{"public-keys":{"0":1}}}"#,
            b"{}",
            "public-keys.0",
        ),
    ] {
        let e = crate::cloudinit::from_result(&v, &d, init, nocloud).unwrap_err();
        assert!(e.contains(want), "{e} should contain {want}");
    }
}

#[test]
fn pre_cloud_init_iso_goes_to_the_first_subscriber() {
    let pod = Pod::new();
    let p = [hook_point::PRE_CLOUD_INIT_ISO];
    pod.serve(
        "a",
        "first.sock",
        &Sidecar::new(&["v1alpha3"], &p, Define::Append("x")),
    );
    pod.serve(
        "b",
        "second.sock",
        &Sidecar::new(&["v1alpha3"], &p, Define::Hang),
    );
    let mut m = pod.manager();
    m.collect(2, Duration::from_secs(5), &|| false).unwrap();
    let d = data(storage::cloudinit::DataSource::NoCloud);
    let out = m.pre_cloud_init_iso(&vmi(), b"{}", d.clone()).unwrap();
    assert_eq!(out.user_data, b"#!/BIN/SH\nECHO <HI>\n");
    assert_eq!(out.meta_data, d.meta_data);
    // Without subscribers the data is unchanged.
    let none = Manager::new(pod.dir.path());
    assert_eq!(
        none.pre_cloud_init_iso(&vmi(), b"{}", d.clone()).unwrap(),
        d
    );
}

#[test]
fn a_termination_signal_ends_the_wait() {
    let pod = Pod::new();
    pod.silent("hook-sidecar-0", "never.sock");
    let mut m = pod.manager().with_timeouts(Timeouts {
        scan_interval: Duration::from_secs(1),
        ..fast()
    });
    let start = Instant::now();
    let stop = || start.elapsed() > Duration::from_millis(400);
    let e = m.collect(1, Duration::from_secs(60), &stop).unwrap_err();
    assert!(matches!(e, HookError::Stopped), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}
