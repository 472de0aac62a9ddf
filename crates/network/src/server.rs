//! The DHCPv4 and DHCPv6 server loops: one UDP socket each (port 67;
//! port 547 joined to `ff02::1:2`) bound to the pod bridge
//! (`SO_BINDTODEVICE`), one guest answered.
//!
//! Bounded by construction: one receive buffer, no per-client state, at
//! most one reply per request, and requests beyond [`MAX_REPLIES_PER_SEC`]
//! in a second are dropped, so a flood costs at most that many encodes.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use dhcproto::Encodable;
use socket2::{Domain, Protocol, Socket, Type};

use crate::dhcpv4::ServerOptions;
use crate::dhcpv6::ServerV6;

/// DHCP server port.
pub const SERVER_PORT: u16 = 67;
/// DHCP client port.
pub const CLIENT_PORT: u16 = 68;
/// Replies sent per second at most (a guest needs 2 per lease).
pub const MAX_REPLIES_PER_SEC: u32 = 1000;
/// Ends the server loops ([`serve`], [`serve_v6`]) sharing it. The loops
/// sleep in `poll(2)` on their socket and this stop's pipe, with no
/// timeout: an idle server never wakes (they used to look at a flag every
/// 200 ms; KubeVirt's DHCP server blocks in its receive too).
#[derive(Debug)]
pub struct Stop {
    stopped: AtomicBool,
    /// Readable once [`Stop::stop`] wrote to `w`.
    r: OwnedFd,
    w: OwnedFd,
}

impl Stop {
    /// A stop not yet given.
    ///
    /// # Errors
    /// The `pipe2` error (out of descriptors).
    pub fn new() -> io::Result<Stop> {
        let (r, w) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        Ok(Stop {
            stopped: AtomicBool::new(false),
            r,
            w,
        })
    }

    /// Stops every loop using it (each returns after the request it is
    /// answering, if any).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Nothing reads the pipe: one byte keeps it readable for all loops.
        let _ = nix::unistd::write(&self.w, &[1]);
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Waits until `socket` has a datagram (true) or the stop is given (false).
    fn wait(&self, socket: &UdpSocket) -> io::Result<bool> {
        loop {
            if self.stopped() {
                return Ok(false);
            }
            let mut fds = [
                PollFd::new(socket.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.r.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {
                    if fds[0].any().unwrap_or(false) {
                        return Ok(true);
                    }
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Counters of one server run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams `dhcproto` could not decode.
    pub malformed: u64,
    /// Replies sent.
    pub replied: u64,
    /// Requests dropped by the rate limit.
    pub throttled: u64,
}

/// Opens the server socket on `device` (`k6t-eth0`), port `port`.
///
/// # Errors
/// The socket error, e.g. no such device or port 67 without
/// `CAP_NET_BIND_SERVICE`.
pub fn bind(device: &str, port: u16) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_broadcast(true)?;
    s.bind_device(Some(device.as_bytes()))?;
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).into())?;
    Ok(s.into())
}

/// Answers requests on `socket` until `stop` is given. Replies go to the
/// broadcast address on the bound device (the guest has no address yet)
/// unless the client already has one (`ciaddr`, renewals), port
/// `client_port`.
///
/// # Errors
/// A receive or send error other than a timeout or interruption.
pub fn serve(
    socket: &UdpSocket,
    options: &ServerOptions,
    client_port: u16,
    stop: &Stop,
) -> io::Result<Stats> {
    let mut stats = Stats::default();
    let mut buf = [0u8; 1536];
    let mut limit = RateLimit::default();
    while stop.wait(socket)? {
        let n = match socket.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if is_poll_timeout(&e) => continue,
            Err(e) => return Err(e),
        };
        stats.received += 1;
        let data = &buf[..n];
        let req = match crate::dhcpv4::decode_packet(data) {
            Ok(m) => m,
            Err(e) => {
                stats.malformed += 1;
                tracing::debug!(error = %e, "malformed DHCP packet ignored");
                continue;
            }
        };
        let Some(reply) = options.reply(&req) else {
            continue;
        };
        tracing::debug!(xid = req.xid(), "DHCPv4 request answered");
        if !limit.allow() {
            stats.throttled += 1;
            continue;
        }
        let bytes = reply
            .to_vec()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let dest = if req.ciaddr().is_unspecified() {
            Ipv4Addr::BROADCAST
        } else {
            req.ciaddr()
        };
        match socket.send_to(&bytes, SocketAddrV4::new(dest, client_port)) {
            Ok(_) => stats.replied += 1,
            // The socket is non-blocking: a full send buffer loses this
            // reply (the client retransmits), as a blocking send would
            // have delayed it.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                tracing::debug!("DHCPv4 reply not sent: {e}");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(stats)
}

/// DHCPv6 server port.
pub const SERVER_PORT_V6: u16 = 547;
/// DHCPv6 client port.
pub const CLIENT_PORT_V6: u16 = 546;
/// `All_DHCP_Relay_Agents_and_Servers` (RFC 8415 §7.1).
pub const ALL_DHCP_SERVERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 2);

/// Opens the DHCPv6 server socket on `device`, port `port`, joined to
/// [`ALL_DHCP_SERVERS`] on that device.
///
/// # Errors
/// The socket error, e.g. no such device, IPv6 disabled, or port 547
/// without `CAP_NET_BIND_SERVICE`.
pub fn bind_v6(device: &str, port: u16) -> io::Result<UdpSocket> {
    let index = nix::net::if_::if_nametoindex(device).map_err(io::Error::from)?;
    let s = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_only_v6(true)?;
    s.set_reuse_address(true)?;
    s.bind_device(Some(device.as_bytes()))?;
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0)).into())?;
    s.join_multicast_v6(&ALL_DHCP_SERVERS, index)?;
    Ok(s.into())
}

/// A receive that found nothing after all (the socket is non-blocking) or
/// was interrupted: the loop waits again.
fn is_poll_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// At most [`MAX_REPLIES_PER_SEC`] replies per one-second window.
struct RateLimit {
    window: Instant,
    in_window: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            window: Instant::now(),
            in_window: 0,
        }
    }
}

impl RateLimit {
    /// Counts one reply; false when this window's budget is spent.
    fn allow(&mut self) -> bool {
        if self.window.elapsed() >= Duration::from_secs(1) {
            self.window = Instant::now();
            self.in_window = 0;
        }
        if self.in_window >= MAX_REPLIES_PER_SEC {
            return false;
        }
        self.in_window += 1;
        true
    }
}

/// Answers DHCPv6 requests on `socket` until `stop` is given; each reply
/// goes back to the sender's link-local address and port (`client_port`
/// is only used when the sender's is 0). Same bounds as [`serve`].
///
/// # Errors
/// A receive or send error other than a timeout or interruption.
pub fn serve_v6(
    socket: &UdpSocket,
    options: &ServerV6,
    client_port: u16,
    stop: &Stop,
) -> io::Result<Stats> {
    let mut stats = Stats::default();
    let mut buf = [0u8; 1536];
    let mut limit = RateLimit::default();
    while stop.wait(socket)? {
        let (n, peer) = match socket.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if is_poll_timeout(&e) => continue,
            Err(e) => return Err(e),
        };
        stats.received += 1;
        let SocketAddr::V6(peer) = peer else {
            continue;
        };
        let req = match crate::dhcpv6::decode_packet(&buf[..n]) {
            Ok(m) => m,
            Err(e) => {
                stats.malformed += 1;
                tracing::debug!(error = %e, "malformed DHCPv6 packet ignored");
                continue;
            }
        };
        let Some(reply) = options.reply(&req, peer.ip()) else {
            tracing::debug!(kind = ?req.msg_type(), %peer, "DHCPv6 request not answered");
            continue;
        };
        tracing::debug!(kind = ?req.msg_type(), reply = ?reply.msg_type(), %peer, "DHCPv6 request");
        if !limit.allow() {
            stats.throttled += 1;
            continue;
        }
        let bytes = reply
            .to_vec()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let port = if peer.port() == 0 {
            client_port
        } else {
            peer.port()
        };
        let dest = SocketAddrV6::new(*peer.ip(), port, 0, peer.scope_id());
        // A failed send (e.g. the guest's address not resolvable yet) is
        // one lost reply, which the client retransmits, not a dead server.
        match socket.send_to(&bytes, dest) {
            Ok(_) => stats.replied += 1,
            Err(e) => tracing::debug!(%dest, "DHCPv6 reply not sent: {e}"),
        }
    }
    Ok(stats)
}
