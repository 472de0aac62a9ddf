//! Benchmark: events per second through the notify path (queue → gRPC over
//! a Unix socket → a minimal in-process receiver), with domain JSON of a
//! realistic size. `cargo run --release -p cmd --example notify_throughput -- [EVENTS]`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmd::notify::{EventType, Notifier};
use cmd::proto::notify::notify_server::{Notify, NotifyServer};
use cmd::proto::notify::{DomainEventRequest, K8sEventRequest, Response};
use cmd::proto::notify_info::notify_info_server::{NotifyInfo, NotifyInfoServer};
use cmd::proto::notify_info::{NotifyInfoRequest, NotifyInfoResponse};

#[derive(Clone, Default)]
struct Sink(Arc<AtomicU64>);

#[tonic::async_trait]
impl Notify for Sink {
    async fn handle_domain_event(
        &self,
        _r: tonic::Request<DomainEventRequest>,
    ) -> Result<tonic::Response<Response>, tonic::Status> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(tonic::Response::new(Response {
            success: true,
            message: String::new(),
        }))
    }
    async fn handle_k8s_event(
        &self,
        _r: tonic::Request<K8sEventRequest>,
    ) -> Result<tonic::Response<Response>, tonic::Status> {
        Ok(tonic::Response::new(Response {
            success: true,
            message: String::new(),
        }))
    }
}

#[tonic::async_trait]
impl NotifyInfo for Sink {
    async fn info(
        &self,
        _r: tonic::Request<NotifyInfoRequest>,
    ) -> Result<tonic::Response<NotifyInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(NotifyInfoResponse {
            supported_notify_versions: vec![1],
        }))
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(20_000);
    let dir = tempfile::tempdir().unwrap();
    let l = tokio::net::UnixListener::bind(dir.path().join("domain-notify-pipe.sock")).unwrap();
    let sink = Sink::default();
    let s2 = sink.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(NotifyServer::new(s2.clone()))
            .add_service(NotifyInfoServer::new(s2))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(l))
            .await
            .unwrap();
    });
    let notifier = Notifier::start(dir.path());
    let json = format!("{{\"kind\":\"Domain\",\"pad\":\"{}\"}}", "x".repeat(6000));
    let t = Instant::now();
    let mut sent = 0;
    while sent < n {
        // Stay below the queue bound, as a live event stream does.
        while notifier.pending() > cmd::notify::MAX_QUEUE / 2 {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        notifier.domain(EventType::Modified, json.clone());
        sent += 1;
    }
    assert!(notifier.flush(Duration::from_secs(120)).await);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "notify: {} events of {} bytes in {:.2}s = {:.0} events/s (delivered {}, dropped {})",
        n,
        json.len(),
        secs,
        n as f64 / secs,
        sink.0.load(Ordering::Relaxed),
        notifier.counts().1
    );
}
