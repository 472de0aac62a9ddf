//! A veth pair across two network namespaces made by the caller's test or
//! bench: `k6t-eth0` (10.0.2.1/24) on the "pod" side, `guest0` on the
//! "guest" side. Namespaces are per thread and `ip` children inherit the
//! calling thread's, so each side is a thread; in one namespace the kernel
//! would drop the replies as martians. Shared by `tests/server.rs`,
//! `tests/server6.rs` and the DHCP bench examples (included with
//! `#[path]`; each uses one of the client sockets, hence the
//! `dead_code` allowances). No reaper runs in
//! these test and bench processes, so waiting on `ip` directly is safe.
#![allow(clippy::disallowed_methods)]

use std::process::Command;
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Runs `ip ARGS` in the calling thread's namespace; panics on failure.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("iproute2 `ip` must be installed (see .ci/install)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `dev` (in the calling thread's namespace) is operationally
/// up: the kernel activates a device's queue only then (linkwatch, up to a
/// second after `ip link set up`), and drops what is sent before.
pub fn wait_up(dev: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Command::new("ip")
            .args(["-o", "link", "show", "dev", dev])
            .output()
            .expect("iproute2 `ip` must be installed (see .ci/install)");
        if String::from_utf8_lossy(&out.stdout).contains("state UP") {
            return;
        }
        assert!(Instant::now() < deadline, "{dev} never came up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unshare_net() {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("unshare(CLONE_NEWNET) needs root / CAP_SYS_ADMIN");
}

/// The guest side, waiting for [`Guest::run`].
pub struct Guest {
    go: Sender<()>,
    thread: JoinHandle<()>,
}

impl Guest {
    /// Lets the guest side run and waits for it (its panic is re-raised).
    pub fn run(self) {
        self.go.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

/// Makes the pair and runs `pod` on the pod side once both ends are
/// operationally up; `guest` runs on the guest side when `pod` calls
/// [`Guest::run`]. Returns when `pod` returns; panics of either side fail.
pub fn veth_pair(guest: impl FnOnce() + Send + 'static, pod: impl FnOnce(Guest) + Send + 'static) {
    let (tid_tx, tid_rx) = channel();
    let (moved_tx, moved_rx) = channel::<()>();
    let (up_tx, up_rx) = channel::<()>();
    let (go_tx, go_rx) = channel::<()>();
    let thread = std::thread::spawn(move || {
        unshare_net();
        tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
        moved_rx.recv().unwrap();
        ip(&["link", "set", "lo", "up"]);
        ip(&["link", "set", "guest0", "up"]);
        wait_up("guest0");
        up_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        guest();
    });
    std::thread::spawn(move || {
        unshare_net();
        ip(&["link", "set", "lo", "up"]);
        ip(&[
            "link", "add", "k6t-eth0", "type", "veth", "peer", "name", "guest0",
        ]);
        ip(&["addr", "add", "10.0.2.1/24", "dev", "k6t-eth0"]);
        ip(&["link", "set", "k6t-eth0", "up"]);
        let tid: i32 = tid_rx.recv().unwrap();
        ip(&["link", "set", "guest0", "netns", &tid.to_string()]);
        moved_tx.send(()).unwrap();
        up_rx.recv().unwrap();
        wait_up("k6t-eth0");
        pod(Guest { go: go_tx, thread });
    })
    .join()
    .unwrap();
}

/// A DHCPv4 client socket on `guest0`: port 1068 (not the well-known 68,
/// so no DHCP client of the host can interfere), broadcast allowed,
/// `timeout` on reads.
#[allow(dead_code)]
pub fn client4(timeout: Duration) -> std::net::UdpSocket {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .unwrap();
    s.set_reuse_address(true).unwrap();
    s.set_broadcast(true).unwrap();
    s.bind_device(Some(b"guest0")).unwrap();
    let any = std::net::SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 1068);
    s.bind(&std::net::SocketAddr::from(any).into()).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.into()
}

/// A DHCPv6 client socket on `guest0` bound to `addr` (added to `guest0`
/// without DAD), port 1546 (not 546, so no DHCPv6 client of the host can
/// interfere), multicast out of `guest0` (`index`), `timeout` on reads.
#[allow(dead_code)]
pub fn client6(addr: std::net::Ipv6Addr, index: u32, timeout: Duration) -> std::net::UdpSocket {
    ip(&[
        "addr",
        "add",
        &format!("{addr}/64"),
        "dev",
        "guest0",
        "nodad",
    ]);
    let s = socket2::Socket::new(
        socket2::Domain::IPV6,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .unwrap();
    s.set_only_v6(true).unwrap();
    let at = std::net::SocketAddrV6::new(addr, 1546, 0, index);
    s.bind(&std::net::SocketAddr::from(at).into()).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_multicast_if_v6(index).unwrap();
    s.into()
}
