//! The hook manager: Collect, then the three callbacks (module docs of the
//! crate).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tonic::Request;

use crate::conn::{dial, status_line, Spoke};
use crate::proto::{info, v1alpha1, v1alpha2, v1alpha3};
use crate::{hook_point, HookError};

/// Most entries read from one directory in one scan (a bound on memory
/// and time; KubeVirt's pod has one socket per sidecar).
const MAX_DIR_ENTRIES: usize = 1024;

/// A protocol version of the callbacks service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    /// `v1alpha1`: OnDefineDomain.
    V1alpha1,
    /// `v1alpha2`: and PreCloudInitIso.
    V1alpha2,
    /// `v1alpha3`: and Shutdown.
    V1alpha3,
}

impl Version {
    /// The name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Version::V1alpha1 => "v1alpha1",
            Version::V1alpha2 => "v1alpha2",
            Version::V1alpha3 => "v1alpha3",
        }
    }

    /// KubeVirt's choice: the highest version of `offered` it supports.
    pub fn choose(offered: &[String]) -> Option<Version> {
        [Version::V1alpha3, Version::V1alpha2, Version::V1alpha1]
            .into_iter()
            .find(|v| offered.iter().any(|o| o == v.name()))
    }
}

/// One collected sidecar socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callback {
    /// Its socket.
    pub socket: PathBuf,
    /// The version chosen for it.
    pub version: Version,
    /// The name it gave in `Info` (for the log).
    pub name: String,
}

impl Callback {
    fn label(&self) -> String {
        self.socket.display().to_string()
    }
}

/// The protocol's timeouts; KubeVirt's by [`Default`] (tests shorten them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Between two scans of the hook directory (1 s).
    pub scan_interval: Duration,
    /// Dialling a socket (1 s).
    pub dial: Duration,
    /// The `Info` call (1 s).
    pub info: Duration,
    /// Each callback (1 min).
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            scan_interval: Duration::from_secs(1),
            dial: Duration::from_secs(1),
            info: Duration::from_secs(1),
            call: Duration::from_secs(60),
        }
    }
}

/// Why the caller's check refused a sidecar's answer
/// ([`Manager::on_define_domain`]): the caller's own error (the launcher's
/// domain XML parse error, a renamed domain), shown in
/// [`HookError::Garbage`].
pub type CheckError = Box<dyn std::error::Error + Send + Sync>;

/// The collected sidecars, by hook point, in KubeVirt's order.
#[derive(Clone, Debug)]
pub struct Manager {
    dir: PathBuf,
    timeouts: Timeouts,
    per_point: BTreeMap<String, Vec<Callback>>,
}

/// Runs `fut` to completion on a runtime of its own, on a thread of its
/// own (so that any caller, also one inside a runtime, may block on it).
///
/// # Errors
/// [`HookError::Runtime`] when no runtime or thread can be made.
fn block_on<F, T>(fut: F) -> Result<T, HookError>
where
    F: Future<Output = Result<T, HookError>> + Send,
    T: Send,
{
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("hook-call".into())
            .spawn_scoped(s, || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| HookError::Runtime(format!("cannot make a runtime: {e}")))
                    .and_then(|rt| rt.block_on(fut))
            })
            .map_err(|e| HookError::Runtime(format!("cannot start a thread: {e}")))?
            .join()
            .map_err(|_| HookError::Runtime("a hook call panicked".into()))?
    })
}

/// What asking one socket for `Info` gave.
enum Probe {
    /// Not ready (no socket, refused, silent): ask again next scan.
    NotReady(String),
    /// Answered.
    Ready(Callback, Vec<String>),
}

async fn probe(socket: &Path, t: Timeouts) -> Result<Probe, HookError> {
    let label = socket.display().to_string();
    let (ch, spoke): (_, Spoke) = match dial(socket, t.dial).await {
        Ok(c) => c,
        Err(e) => return Ok(Probe::NotReady(e)),
    };
    let mut client = info::info_client::InfoClient::new(ch);
    let mut req = Request::new(info::InfoParams {});
    req.set_timeout(t.info);
    let answer = tokio::time::timeout(t.info, client.info(req)).await;
    let res = match answer {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(s)) if spoke.get() => {
            return Err(HookError::Info {
                socket: label,
                message: status_line(&s),
            })
        }
        Ok(Err(s)) => return Ok(Probe::NotReady(status_line(&s))),
        Err(_) if spoke.get() => {
            return Err(HookError::Info {
                socket: label,
                message: format!("DeadlineExceeded: no answer within {:?}", t.info),
            })
        }
        // Never spoke HTTP/2: KubeVirt's blocking dial would have timed out.
        Err(_) => return Ok(Probe::NotReady("the socket never answered".into())),
    };
    let Some(version) = Version::choose(&res.versions) else {
        return Err(HookError::Version {
            socket: label,
            exposed: res.versions,
        });
    };
    let points = res.hook_points.iter().map(|p| p.name.clone()).collect();
    Ok(Probe::Ready(
        Callback {
            socket: socket.to_owned(),
            version,
            name: res.name,
        },
        points,
    ))
}

/// The entries of `dir`, sorted by name (as Go's `os.ReadDir`), with
/// their types (a symbolic link is never followed), at most
/// [`MAX_DIR_ENTRIES`].
fn read_dir_sorted(dir: &Path) -> Result<Vec<(String, std::fs::FileType)>, HookError> {
    let err = |source| HookError::Dir {
        path: dir.display().to_string(),
        source,
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(err)? {
        let e = e.map_err(err)?;
        let ty = e.file_type().map_err(err)?;
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        out.push((name, ty));
        if out.len() >= MAX_DIR_ENTRIES {
            tracing::warn!(dir = %dir.display(), "more than {MAX_DIR_ENTRIES} entries: the rest is ignored");
            break;
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

impl Manager {
    /// A manager for the sockets below `dir` ([`crate::HOOK_SOCKETS_DIR`]
    /// in a pod), with KubeVirt's timeouts and no sidecar collected yet.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Manager {
            dir: dir.into(),
            timeouts: Timeouts::default(),
            per_point: BTreeMap::new(),
        }
    }

    /// The same with `timeouts` (tests).
    #[must_use]
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The sidecars subscribed to `point`, in call order.
    pub fn callbacks(&self, point: &str) -> &[Callback] {
        self.per_point.get(point).map_or(&[], Vec::as_slice)
    }

    /// Whether any sidecar was collected.
    pub fn is_empty(&self) -> bool {
        self.per_point.is_empty()
    }

    /// KubeVirt's Collect: scans the hook directory's subdirectories every
    /// [`Timeouts::scan_interval`] until `wanted` sockets answered `Info`,
    /// then keeps them by hook point in the order they answered. A socket
    /// is known by its file name, as in KubeVirt (a second socket of the
    /// same name in another sidecar's directory is taken for the first).
    /// Symbolic links are skipped. `wanted` 0 returns at once. `stop` is
    /// asked before each socket and each scan: true (a termination signal)
    /// ends the wait (KubeVirt's launcher dies of the signal there).
    ///
    /// # Errors
    /// [`HookError::CollectTimeout`] past `timeout`; [`HookError::Dir`]
    /// when the directory cannot be read; [`HookError::Info`] or
    /// [`HookError::Version`] for a sidecar that answered badly (no retry,
    /// as in KubeVirt); [`HookError::Stopped`] when `stop` said so.
    pub fn collect(
        &mut self,
        wanted: usize,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), HookError> {
        let start = Instant::now();
        let mut processed: BTreeSet<String> = BTreeSet::new();
        let mut per_point: BTreeMap<String, Vec<Callback>> = BTreeMap::new();
        let t = self.timeouts;
        while processed.len() < wanted {
            for (sub, ty) in read_dir_sorted(&self.dir)? {
                if !ty.is_dir() {
                    continue;
                }
                let sub_path = self.dir.join(&sub);
                for (name, ty) in read_dir_sorted(&sub_path)? {
                    if ty.is_dir() || processed.contains(&name) {
                        continue;
                    }
                    if stop() {
                        return Err(HookError::Stopped);
                    }
                    let socket = sub_path.join(&name);
                    if ty.is_symlink() {
                        tracing::warn!(socket = %socket.display(), "a symbolic link in the hook directory: skipped");
                        continue;
                    }
                    let asked = Instant::now();
                    match block_on(probe(&socket, t))? {
                        Probe::NotReady(why) => {
                            tracing::info!(socket = %socket.display(), "Sidecar server might not be ready yet: {why}");
                        }
                        Probe::Ready(cb, points) => {
                            let ms = u64::try_from(asked.elapsed().as_millis()).unwrap_or(u64::MAX);
                            tracing::info!(socket = %socket.display(), name = %cb.name, version = cb.version.name(), hook_points = ?points, ms, "hook sidecar collected");
                            for p in points {
                                per_point.entry(p).or_default().push(cb.clone());
                            }
                            processed.insert(name);
                        }
                    }
                }
            }
            if processed.len() >= wanted {
                break;
            }
            if stop() {
                return Err(HookError::Stopped);
            }
            if start.elapsed() >= timeout {
                return Err(HookError::CollectTimeout {
                    found: processed.len(),
                    wanted,
                    dir: self.dir.display().to_string(),
                    timeout_secs: timeout.as_secs(),
                });
            }
            // Slept in slices, so that `stop` is heard within 50 ms.
            let pause = t.scan_interval.min(timeout.saturating_sub(start.elapsed()));
            let until = Instant::now() + pause;
            while Instant::now() < until && !stop() {
                std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
            }
        }
        if wanted > 0 {
            tracing::info!("Collected all requested hook sidecar sockets");
        }
        self.per_point = per_point;
        Ok(())
    }

    /// KubeVirt's OnDefineDomain: `domain_xml` and `vmi_json` through every
    /// subscriber in order (1 min each), each getting the previous one's
    /// answer; `check` is applied to each answer (the launcher parses it
    /// into its domain model), so a bad one is refused naming its sidecar.
    /// No subscriber: `domain_xml` unchanged.
    ///
    /// # Errors
    /// [`HookError::Dial`], [`HookError::Call`] (an error status, a crash,
    /// the timeout) or [`HookError::Garbage`] (not UTF-8, refused by
    /// `check`), naming the sidecar.
    pub fn on_define_domain(
        &self,
        domain_xml: &str,
        vmi_json: &[u8],
        check: &dyn Fn(&str) -> Result<(), CheckError>,
    ) -> Result<String, HookError> {
        let mut xml = domain_xml.to_owned();
        for cb in self.callbacks(hook_point::ON_DEFINE_DOMAIN) {
            let started = Instant::now();
            let out = block_on(self.define_one(cb, xml.into_bytes(), vmi_json.to_vec()))?;
            let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let garbage = |what: String| HookError::Garbage {
                socket: cb.label(),
                call: hook_point::ON_DEFINE_DOMAIN,
                what,
            };
            xml =
                String::from_utf8(out).map_err(|_| garbage("a domain that is not UTF-8".into()))?;
            check(&xml).map_err(|e| garbage(format!("an invalid domain: {e}")))?;
            tracing::info!(socket = %cb.socket.display(), ms, "OnDefineDomain applied");
        }
        Ok(xml)
    }

    async fn define_one(
        &self,
        cb: &Callback,
        domain_xml: Vec<u8>,
        vmi: Vec<u8>,
    ) -> Result<Vec<u8>, HookError> {
        let (ch, _) = dial(&cb.socket, self.timeouts.dial)
            .await
            .map_err(|message| HookError::Dial {
                socket: cb.label(),
                message,
            })?;
        let t = self.timeouts.call;
        let call_err = |message| HookError::Call {
            socket: cb.label(),
            call: hook_point::ON_DEFINE_DOMAIN,
            message,
        };
        let res = match cb.version {
            Version::V1alpha1 => {
                let mut c = v1alpha1::callbacks_client::CallbacksClient::new(ch);
                let p = v1alpha1::OnDefineDomainParams { domain_xml, vmi };
                timed(t, c.on_define_domain(with_timeout(p, t)))
                    .await
                    .map(|r| r.domain_xml)
            }
            Version::V1alpha2 => {
                let mut c = v1alpha2::callbacks_client::CallbacksClient::new(ch);
                let p = v1alpha2::OnDefineDomainParams { domain_xml, vmi };
                timed(t, c.on_define_domain(with_timeout(p, t)))
                    .await
                    .map(|r| r.domain_xml)
            }
            Version::V1alpha3 => {
                let mut c = v1alpha3::callbacks_client::CallbacksClient::new(ch);
                let p = v1alpha3::OnDefineDomainParams { domain_xml, vmi };
                timed(t, c.on_define_domain(with_timeout(p, t)))
                    .await
                    .map(|r| r.domain_xml)
            }
        };
        res.map_err(call_err)
    }

    /// KubeVirt's PreCloudInitIso: the first subscriber speaking v1alpha2
    /// or v1alpha3 gets the data (KubeVirt's JSON shapes,
    /// [`crate::cloudinit`]) and the VMI, 1 min, and its answer replaces
    /// the data; v1alpha1 subscribers are skipped (logged). No subscriber:
    /// `data` unchanged.
    ///
    /// # Errors
    /// [`HookError::Dial`], [`HookError::Call`] or [`HookError::Garbage`]
    /// (an answer that is not KubeVirt's JSON shape), naming the sidecar.
    pub fn pre_cloud_init_iso(
        &self,
        vmi: &api::VirtualMachineInstance,
        vmi_json: &[u8],
        data: storage::cloudinit::CloudInitData,
    ) -> Result<storage::cloudinit::CloudInitData, HookError> {
        for cb in self.callbacks(hook_point::PRE_CLOUD_INIT_ISO) {
            if cb.version == Version::V1alpha1 {
                tracing::error!(socket = %cb.socket.display(), "Unsupported callback version: {}", cb.version.name());
                continue;
            }
            let (init, nocloud) = crate::cloudinit::to_json(&data);
            let (init, nocloud) =
                block_on(self.cloud_init_one(cb, init, nocloud, vmi_json.to_vec()))?;
            let out =
                crate::cloudinit::from_result(vmi, &data, &init, &nocloud).map_err(|what| {
                    HookError::Garbage {
                        socket: cb.label(),
                        call: hook_point::PRE_CLOUD_INIT_ISO,
                        what,
                    }
                })?;
            tracing::info!(socket = %cb.socket.display(), "PreCloudInitIso applied");
            return Ok(out);
        }
        Ok(data)
    }

    async fn cloud_init_one(
        &self,
        cb: &Callback,
        cloud_init_data: Vec<u8>,
        cloud_init_no_cloud_source: Vec<u8>,
        vmi: Vec<u8>,
    ) -> Result<(Vec<u8>, Vec<u8>), HookError> {
        let (ch, _) = dial(&cb.socket, self.timeouts.dial)
            .await
            .map_err(|message| HookError::Dial {
                socket: cb.label(),
                message,
            })?;
        let t = self.timeouts.call;
        let res = if cb.version == Version::V1alpha2 {
            let mut c = v1alpha2::callbacks_client::CallbacksClient::new(ch);
            let p = v1alpha2::PreCloudInitIsoParams {
                cloud_init_no_cloud_source,
                vmi,
                cloud_init_data,
            };
            timed(t, c.pre_cloud_init_iso(with_timeout(p, t)))
                .await
                .map(|r| (r.cloud_init_data, r.cloud_init_no_cloud_source))
        } else {
            let mut c = v1alpha3::callbacks_client::CallbacksClient::new(ch);
            let p = v1alpha3::PreCloudInitIsoParams {
                cloud_init_no_cloud_source,
                vmi,
                cloud_init_data,
            };
            timed(t, c.pre_cloud_init_iso(with_timeout(p, t)))
                .await
                .map(|r| (r.cloud_init_data, r.cloud_init_no_cloud_source))
        };
        res.map_err(|message| HookError::Call {
            socket: cb.label(),
            call: hook_point::PRE_CLOUD_INIT_ISO,
            message,
        })
    }

    /// KubeVirt's Shutdown: `Shutdown` to each v1alpha3 subscriber in
    /// order, 1 min each (others are skipped, logged); stops at the first
    /// failure, as KubeVirt does.
    ///
    /// # Errors
    /// [`HookError::Dial`] or [`HookError::Call`], naming the sidecar.
    pub fn shutdown(&self) -> Result<(), HookError> {
        for cb in self.callbacks(hook_point::SHUTDOWN) {
            if cb.version != Version::V1alpha3 {
                tracing::error!(socket = %cb.socket.display(), "Unsupported callback version: {}", cb.version.name());
                continue;
            }
            let t = self.timeouts;
            block_on(async {
                let (ch, _) =
                    dial(&cb.socket, t.dial)
                        .await
                        .map_err(|message| HookError::Dial {
                            socket: cb.label(),
                            message,
                        })?;
                let mut c = v1alpha3::callbacks_client::CallbacksClient::new(ch);
                timed(
                    t.call,
                    c.shutdown(with_timeout(v1alpha3::ShutdownParams {}, t.call)),
                )
                .await
                .map_err(|message| HookError::Call {
                    socket: cb.label(),
                    call: hook_point::SHUTDOWN,
                    message,
                })
            })?;
            tracing::info!(socket = %cb.socket.display(), "Shutdown sent");
        }
        Ok(())
    }
}

fn with_timeout<T>(msg: T, t: Duration) -> Request<T> {
    let mut r = Request::new(msg);
    r.set_timeout(t);
    r
}

/// A call bounded by `t` on our side too (a server that ignores the
/// deadline header).
async fn timed<T>(
    t: Duration,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(t, call).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(status_line(&s)),
        Err(_) => Err(format!("DeadlineExceeded: no answer within {t:?}")),
    }
}
