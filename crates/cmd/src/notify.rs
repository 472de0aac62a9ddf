//! Reporting domain events to virt-handler (KubeVirt
//! `pkg/virt-launcher/notify-client`, v1.6.6).
//!
//! The launcher dials `<share>/domain-notify-pipe.sock` (or the legacy
//! `domain-notify.sock` when that exists), negotiates the version with
//! `NotifyInfo`, and sends `HandleDomainEvent` / `HandleK8sEvent`. Events go
//! through a queue served by one task: producers never block (a slow or
//! absent virt-handler never stalls libvirt's event loop), order is kept,
//! and an event is retried until it is delivered — for as long as
//! virt-handler is unreachable, and for [`REJECT_RETRY`] when it answers
//! `success=false` (KubeVirt's retry budget). An event that can never be
//! delivered — larger than [`MAX_NOTIFY_MESSAGE`], or refused by the
//! server with a status that a retry cannot change (the message too large,
//! invalid, unimplemented) — is logged as an error and dropped at once, so
//! it never holds up the events behind it. The queue holds at most
//! [`MAX_QUEUE`] events; when full, the oldest MODIFIED event is dropped
//! first (each carries the whole domain, so a later one supersedes it).
//!
//! **A newer MODIFIED supersedes the queued ones.** Each MODIFIED event
//! carries the whole domain, and virt-handler keeps only the newest state
//! it received (its domain informer's store), so when one is queued every
//! earlier MODIFIED update still waiting (not the one being sent) is
//! removed. While virt-handler is away (restarted, upgraded, or absent in
//! standalone mode) the queue then holds one domain state instead of one
//! per change, each up to [`MAX_NOTIFY_MESSAGE`] (before: up to
//! [`MAX_QUEUE`] of them; 7 of them, 160 KiB, were live in an idle
//! standalone launcher). ADDED, ERROR, the final event and Kubernetes
//! events are kept, in order.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tonic::transport::Channel;

use crate::client::unix_channel;
use crate::proto::notify::notify_client::NotifyClient;
use crate::proto::notify::{DomainEventRequest, K8sEventRequest};
use crate::proto::notify_info::notify_info_client::NotifyInfoClient;
use crate::proto::notify_info::NotifyInfoRequest;

/// Events kept while virt-handler is away.
pub const MAX_QUEUE: usize = 1024;
/// Deadline of one send (KubeVirt: 5 s).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts (KubeVirt: 1 s).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// How long an event virt-handler rejects is retried (KubeVirt: 20 s).
pub const REJECT_RETRY: Duration = Duration::from_secs(20);
/// The largest request virt-handler's notify server receives: grpc-go's
/// default receive limit (4 MiB; KubeVirt's server sets none of its own).
/// A larger event can never be delivered: it is reported and dropped
/// before it is sent (issue 19: a guest-inflated domain JSON blocked every
/// later event).
pub const MAX_NOTIFY_MESSAGE: usize = 4 << 20;

/// KubeVirt's domain event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The domain appeared.
    Added,
    /// The domain changed (also the final deletion notice, with a deletion timestamp).
    Modified,
    /// Not sent by the launcher (KubeVirt never does either).
    Deleted,
    /// Something went wrong (e.g. libvirt reconnected); carries a Status.
    Error,
}

impl EventType {
    /// The wire string (`ADDED` ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Error => "ERROR",
        }
    }
}

/// One queued notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `HandleDomainEvent`.
    Domain {
        /// ADDED, MODIFIED, ERROR.
        event_type: EventType,
        /// api.Domain JSON (empty for ERROR).
        domain_json: String,
        /// metav1.Status JSON for ERROR.
        status_json: String,
        /// The last event before exit: never dropped when the queue is full.
        last: bool,
    },
    /// `HandleK8sEvent`: a core/v1 Event JSON.
    K8s {
        /// The Event.
        json: String,
    },
}

/// What became of one attempt to send an event.
enum Outcome {
    /// virt-handler took it.
    Delivered,
    /// virt-handler answered `success=false` (retried for [`REJECT_RETRY`]).
    Rejected,
    /// The connection failed or timed out (retried after reconnecting).
    Failed(String),
    /// It can never be delivered: dropped at once.
    Undeliverable(String),
}

/// gRPC status codes a retry of the same request cannot change (the
/// server decoded the request, or refused its size, and will again).
fn permanent(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::ResourceExhausted
            | tonic::Code::OutOfRange
            | tonic::Code::InvalidArgument
            | tonic::Code::Unimplemented
    )
}

impl Event {
    /// A MODIFIED domain update that a later one makes redundant (not the
    /// final event).
    fn is_update(&self) -> bool {
        matches!(
            self,
            Event::Domain {
                event_type: EventType::Modified,
                last: false,
                ..
            }
        )
    }

    /// The event's kind for logs: `ADDED`, ..., or `k8s`.
    fn kind(&self) -> &'static str {
        match self {
            Event::Domain { event_type, .. } => event_type.as_str(),
            Event::K8s { .. } => "k8s",
        }
    }
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Event>,
    dropped: u64,
    delivered: u64,
}

/// Handle to the notification queue; cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    final_queued: Arc<std::sync::atomic::AtomicBool>,
    queue: Arc<Mutex<Queue>>,
    wake: Arc<Notify>,
    drained: Arc<Notify>,
    /// No virt-handler is expected (standalone): an absent socket is normal.
    standalone: bool,
}

fn socket_path(share_dir: &Path) -> PathBuf {
    let legacy = share_dir.join("domain-notify.sock");
    if legacy.exists() {
        legacy
    } else {
        share_dir.join("domain-notify-pipe.sock")
    }
}

impl Notifier {
    /// Starts the sending task on the current tokio runtime.
    pub fn start(share_dir: &Path) -> Notifier {
        Self::start_with(share_dir, false)
    }

    /// [`Notifier::start`] for a launcher with no virt-handler (standalone
    /// `run`): events are still queued and delivered if something listens
    /// on the notify socket, but its absence is logged at debug level only,
    /// not as a warning, and while it is absent the queue looks for it only
    /// when an event is queued or [`Notifier::flush`] is called, never on a
    /// timer.
    pub fn start_standalone(share_dir: &Path) -> Notifier {
        Self::start_with(share_dir, true)
    }

    fn start_with(share_dir: &Path, standalone: bool) -> Notifier {
        let n = Notifier {
            final_queued: Arc::default(),
            queue: Arc::default(),
            wake: Arc::default(),
            drained: Arc::default(),
            standalone,
        };
        let worker = n.clone();
        let share = share_dir.to_owned();
        tokio::spawn(async move { worker.run(share).await });
        n
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True once the last (deletion) notification has been queued.
    pub fn final_sent(&self) -> bool {
        self.final_queued.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Queues an event (never blocks).
    pub fn send(&self, event: Event) {
        if matches!(event, Event::Domain { last: true, .. }) {
            self.final_queued
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let mut q = self.lock();
        if event.is_update() {
            // The front may be in flight: the sender removes it once sent.
            let mut index = 0;
            q.events.retain(|e| {
                index += 1;
                index == 1 || !e.is_update()
            });
        }
        if q.events.len() >= MAX_QUEUE {
            // Never the front (it may be in flight), unless it is all there is.
            let victim = q
                .events
                .iter()
                .skip(1)
                .position(Event::is_update)
                .map_or(usize::from(q.events.len() > 1), |i| i + 1);
            q.events.remove(victim);
            q.dropped += 1;
            tracing::warn!(
                queued = MAX_QUEUE,
                "notify queue full: dropped the oldest domain update"
            );
        }
        q.events.push_back(event);
        drop(q);
        self.wake.notify_one();
    }

    /// Queues a domain event.
    pub fn domain(&self, event_type: EventType, domain_json: String) {
        self.send(Event::Domain {
            event_type,
            domain_json,
            status_json: String::new(),
            last: false,
        });
    }

    /// Number of events waiting.
    pub fn pending(&self) -> usize {
        self.lock().events.len()
    }

    /// (delivered, dropped) counts so far.
    pub fn counts(&self) -> (u64, u64) {
        let q = self.lock();
        (q.delivered, q.dropped)
    }

    /// Waits until the queue is empty or `timeout` passes; true when empty.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        // A standalone queue waiting for its socket to appear looks again now.
        self.wake.notify_one();
        loop {
            let waiter = self.drained.notified();
            if self.pending() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, waiter).await.is_err() {
                return self.pending() == 0;
            }
        }
    }

    async fn connect(share: &Path) -> Result<NotifyClient<Channel>, String> {
        let path = socket_path(share);
        let ch = unix_channel(&path)
            .await
            .map_err(|e| format!("dial {}: {}", path.display(), crate::client::root_cause(&e)))?;
        let info = tokio::time::timeout(
            SEND_TIMEOUT,
            NotifyInfoClient::new(ch.clone()).info(NotifyInfoRequest {}),
        )
        .await
        .map_err(|_| "version negotiation timed out".to_owned())?
        .map_err(|e| format!("version negotiation: {e}"))?
        .into_inner();
        if !info.supported_notify_versions.contains(&1) {
            return Err(format!(
                "no compatible notify version, server: {:?}, client: [1]",
                info.supported_notify_versions
            ));
        }
        Ok(NotifyClient::new(ch))
    }

    async fn deliver(client: &mut NotifyClient<Channel>, ev: &Event) -> Outcome {
        use prost::Message;
        enum Request {
            Domain(DomainEventRequest),
            K8s(K8sEventRequest),
        }
        let req = match ev {
            Event::Domain {
                event_type,
                domain_json,
                status_json,
                ..
            } => Request::Domain(DomainEventRequest {
                domain_json: domain_json.clone().into_bytes(),
                status_json: status_json.clone().into_bytes(),
                event_type: event_type.as_str().into(),
            }),
            Event::K8s { json } => Request::K8s(K8sEventRequest {
                event_json: json.clone().into_bytes(),
            }),
        };
        let size = match &req {
            Request::Domain(r) => r.encoded_len(),
            Request::K8s(r) => r.encoded_len(),
        };
        if size > MAX_NOTIFY_MESSAGE {
            return Outcome::Undeliverable(format!(
                "the event is {size} bytes, more than virt-handler receives ({MAX_NOTIFY_MESSAGE})"
            ));
        }
        let call = async {
            match req {
                Request::Domain(r) => client.handle_domain_event(r).await,
                Request::K8s(r) => client.handle_k8s_event(r).await,
            }
        };
        match tokio::time::timeout(SEND_TIMEOUT, call).await {
            Err(_) => Outcome::Failed("timed out".into()),
            Ok(Err(status)) if permanent(status.code()) => {
                Outcome::Undeliverable(format!("virt-handler refused it: {}", status.message()))
            }
            Ok(Err(status)) => Outcome::Failed(status.to_string()),
            Ok(Ok(r)) => {
                let r = r.into_inner();
                if r.success {
                    Outcome::Delivered
                } else {
                    tracing::warn!("failed to notify domain event: {}", r.message);
                    Outcome::Rejected
                }
            }
        }
    }

    async fn run(self, share: PathBuf) {
        let mut client: Option<NotifyClient<Channel>> = None;
        let mut rejected_since: Option<Instant> = None;
        let mut logged_away = false;
        loop {
            let front = self.lock().events.front().cloned();
            let Some(ev) = front else {
                self.drained.notify_waiters();
                self.wake.notified().await;
                continue;
            };
            if client.is_none() {
                match Self::connect(&share).await {
                    Ok(c) => {
                        if logged_away {
                            tracing::info!("virt-handler's notify socket is back");
                        }
                        logged_away = false;
                        client = Some(c);
                    }
                    Err(e) => {
                        let absent = self.standalone && !socket_path(&share).exists();
                        if !logged_away {
                            if absent {
                                tracing::debug!(
                                    "no virt-handler notify socket (standalone); events are queued"
                                );
                            } else {
                                tracing::warn!(
                                    "cannot reach virt-handler ({e}); events are queued"
                                );
                            }
                            logged_away = true;
                        }
                        if absent {
                            // Nothing to dial: look again at the next event
                            // or flush, not every second (an idle standalone
                            // launcher never wakes for it).
                            self.wake.notified().await;
                        } else {
                            tokio::time::sleep(RETRY_INTERVAL).await;
                        }
                        continue;
                    }
                }
            }
            let Some(c) = client.as_mut() else { continue };
            match Self::deliver(c, &ev).await {
                Outcome::Undeliverable(why) => {
                    tracing::error!(
                        event = ev.kind(),
                        "cannot ever deliver a notification ({why}); dropping it"
                    );
                    rejected_since = None;
                    let mut q = self.lock();
                    q.events.pop_front();
                    q.dropped += 1;
                }
                Outcome::Delivered => {
                    rejected_since = None;
                    let mut q = self.lock();
                    q.events.pop_front();
                    q.delivered += 1;
                }
                Outcome::Rejected => {
                    let since = *rejected_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= REJECT_RETRY {
                        tracing::error!(
                            "virt-handler kept rejecting an event for {} s; dropping it",
                            REJECT_RETRY.as_secs()
                        );
                        let mut q = self.lock();
                        q.events.pop_front();
                        q.dropped += 1;
                        rejected_since = None;
                    } else {
                        tokio::time::sleep(RETRY_INTERVAL).await;
                    }
                }
                Outcome::Failed(e) => {
                    tracing::warn!("notify failed ({e}); reconnecting");
                    client = None;
                    tokio::time::sleep(RETRY_INTERVAL).await;
                }
            }
        }
    }
}

/// A Kubernetes `core/v1` Event about the VMI, as KubeVirt records them
/// (`involvedObject` = the VMI; type `Warning` or `Normal`).
pub fn k8s_event(
    name: &str,
    namespace: &str,
    uid: &str,
    event_type: &str,
    reason: &str,
    message: &str,
) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": namespace, "generateName": format!("{name}.")},
        "involvedObject": {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "name": name,
            "namespace": namespace,
            "uid": uid
        },
        "type": event_type,
        "reason": reason,
        "message": message,
        "source": {"component": "virt-launcher"}
    })
    .to_string()
}

/// KubeVirt's ERROR notification body: a metav1.Status.
pub fn error_status(message: &str) -> String {
    serde_json::json!({"status": "Failure", "message": message}).to_string()
}
