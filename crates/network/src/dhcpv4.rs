//! DHCPv4 answers for the one guest behind a pod interface (KubeVirt
//! v1.6.6 `pkg/network/dhcp/server`, facts in kubevirt-facts §6.3).
//!
//! Packets are parsed and built with `dhcproto`; this module decides what
//! goes in them. Every value is validated when the [`DhcpV4Config`] is
//! turned into [`ServerOptions`], once, before the server starts: a search
//! list, hostname or option that cannot be encoded is an error then, never
//! a malformed packet later.

use std::net::Ipv4Addr;

use dhcproto::v4::{
    DhcpOption, DhcpOptions, Flags, Message, MessageType, Opcode, OptionCode, UnknownOption,
};
use ipnet::Ipv4Net;

/// Lease time KubeVirt gives: 999 days, in seconds.
pub const LEASE_SECONDS: u32 = 999 * 24 * 60 * 60;
/// Search list used when resolv.conf has none.
pub const DEFAULT_SEARCH_DOMAIN: &str = "cluster.local";
/// DNS server used when resolv.conf has no IPv4 nameserver.
pub const DEFAULT_DNS: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
/// Longest DNS label (RFC 1035 §2.3.4) and so the longest hostname sent.
pub const MAX_LABEL: usize = 63;

/// Why a DHCP configuration cannot be served.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DhcpError {
    /// A search domain that is not a valid RFC 1035 name (KubeVirt's words).
    #[error("Search domain is not valid: {0:?}")]
    SearchDomain(String),
    /// The search list does not fit in one option (255 bytes).
    #[error("search domain list needs {0} bytes, more than the 255 of DHCP option 119")]
    SearchListTooLong(usize),
    /// The hostname is not a DNS label.
    #[error("hostname {0:?} is not a valid DNS label (letters, digits, '-', at most 63)")]
    Hostname(String),
    /// An NTP server that is not an IPv4 address (KubeVirt's words).
    #[error("Could not parse NTP server as IPv4 address: {0:?}")]
    NtpServer(String),
    /// A `dhcpOptions` value that cannot be sent.
    #[error("{field}: {reason}")]
    Option {
        /// Field path under `dhcpOptions`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// Why a datagram was refused as a DHCPv4 or DHCPv6 request
/// ([`decode_packet`], [`crate::dhcpv6::decode_packet`]); the server logs
/// it and counts the packet as malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Fewer bytes than the fixed header.
    #[error("{len} bytes is shorter than a {protocol} header")]
    Short {
        /// The datagram's length.
        len: usize,
        /// `DHCP` or `DHCPv6`.
        protocol: &'static str,
    },
    /// Bytes 236..240 are not [`MAGIC_COOKIE`] (a BOOTP-only packet).
    #[error("wrong magic cookie")]
    MagicCookie,
    /// `hlen` over 16 (the size of `chaddr`).
    #[error("hardware address length {0} is over 16")]
    HardwareAddressLength(u8),
    /// A DHCPv4 option code at the end of the packet, without its length.
    #[error("option {0} has no length")]
    OptionWithoutLength(u8),
    /// A DHCPv4 option of fixed length with another length.
    #[error("option {code} has length {len}, not {expected}")]
    OptionLength {
        /// The option code.
        code: u8,
        /// Its length byte.
        len: u8,
        /// The length its definition fixes.
        expected: u8,
    },
    /// A DHCPv6 option shorter than the fixed header its decoder reads.
    #[error("option {code} has {len} bytes, fewer than its {header}-byte header")]
    OptionShorterThanHeader {
        /// The option code.
        code: u16,
        /// Its length field.
        len: usize,
        /// The header's size in bytes.
        header: usize,
    },
    /// DHCPv6 options nested deeper than the walk goes.
    #[error("options nested too deeply")]
    NestedTooDeeply,
    /// A DHCPv6 relay message (`RELAY-FORW`, `RELAY-REPL`).
    #[error("relay messages are not served")]
    Relay,
    /// `dhcproto` refused the packet (its message).
    #[error("{0}")]
    Decode(String),
    /// `dhcproto` panicked on the packet (caught).
    #[error("the decoder rejected the packet (panic)")]
    DecoderPanicked,
}

/// What the pod's `/etc/resolv.conf` gives the guest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvConf {
    /// IPv4 `nameserver` entries, in order.
    pub nameservers: Vec<Ipv4Addr>,
    /// IPv6 `nameserver` entries, in order (for DHCPv6).
    pub nameservers6: Vec<std::net::Ipv6Addr>,
    /// The `search` list (last `search`/`domain` line wins, as in libc),
    /// lower-cased, order kept.
    pub search: Vec<String>,
}

/// Parses resolv.conf text. Unknown lines are skipped; nameservers go
/// to the IPv4 or IPv6 list by family (a zone index, `fe80::1%eth0`,
/// cannot be given to the guest and is skipped); search entries are lower-cased (KubeVirt's
/// `ParseSearchDomains`, case 001), validity is checked at encoding.
pub fn parse_resolv_conf(text: &str) -> ResolvConf {
    let mut out = ResolvConf::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => match words.next().map(str::parse::<std::net::IpAddr>) {
                Some(Ok(std::net::IpAddr::V4(ip))) => out.nameservers.push(ip),
                Some(Ok(std::net::IpAddr::V6(ip))) => out.nameservers6.push(ip),
                _ => {}
            },
            Some("search" | "domain") => {
                out.search = words
                    .take_while(|w| !w.starts_with('#') && !w.starts_with(';'))
                    .map(str::to_ascii_lowercase)
                    .collect();
            }
            _ => {}
        }
    }
    out
}

/// The search list the guest gets: `search`, or [`DEFAULT_SEARCH_DOMAIN`]
/// when empty; with `subdomain`, `<subdomain>.<longest entry containing
/// ".svc.">` first (KubeVirt's subdomain rule).
pub fn search_list(search: &[String], subdomain: &str) -> Vec<String> {
    let mut list: Vec<String> = if search.is_empty() {
        vec![DEFAULT_SEARCH_DOMAIN.into()]
    } else {
        search.to_vec()
    };
    if !subdomain.is_empty() {
        if let Some(svc) = list
            .iter()
            .filter(|d| d.contains(".svc."))
            .max_by_key(|d| d.len())
        {
            list.insert(0, format!("{}.{svc}", subdomain.to_ascii_lowercase()));
        }
    }
    list
}

fn valid_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= MAX_LABEL
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// Encodes a search list as DHCP option 119's payload (RFC 3397): each
/// name as RFC 1035 labels, 0-terminated, no compression.
///
/// Hand-rolled because `dhcproto` emits names through hickory's encoder,
/// which compresses repeated suffixes; KubeVirt sends them uncompressed,
/// and clients are compared byte for byte against it (case 001).
///
/// # Errors
/// [`DhcpError::SearchDomain`] for a name with an empty label, a label
/// over 63 bytes, a character outside `[a-z0-9-]`, a leading/trailing
/// `-`, or more than 253 characters; [`DhcpError::SearchListTooLong`]
/// when the payload exceeds 255 bytes.
pub fn encode_search_domains(domains: &[String]) -> Result<Vec<u8>, DhcpError> {
    let mut out = Vec::new();
    for domain in domains {
        let name = domain.strip_suffix('.').unwrap_or(domain);
        if name.is_empty() || name.len() > 253 || !name.split('.').all(valid_label) {
            return Err(DhcpError::SearchDomain(domain.clone()));
        }
        for label in name.split('.') {
            // valid_label bounds the length to 63.
            out.push(label.len() as u8);
            out.extend_from_slice(label.as_bytes());
        }
        out.push(0);
    }
    if out.len() > 255 {
        return Err(DhcpError::SearchListTooLong(out.len()));
    }
    Ok(out)
}

/// The DHCP magic cookie (RFC 2131 §3) at bytes 236..240.
pub const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];

/// Decodes a datagram as a DHCP message. `dhcproto` checks neither the
/// magic cookie nor `hlen`, so a BOOTP-only or garbage packet is refused
/// here.
///
/// # Errors
/// [`PacketError`]: why the packet was refused.
pub fn decode_packet(data: &[u8]) -> Result<Message, PacketError> {
    use dhcproto::{Decodable, Decoder};
    if data.len() < 240 {
        return Err(PacketError::Short {
            len: data.len(),
            protocol: "DHCP",
        });
    }
    if data[236..240] != MAGIC_COOKIE {
        return Err(PacketError::MagicCookie);
    }
    // `dhcproto` keeps `hlen` as sent and panics in `chaddr()` when it is
    // over 16 (found by the fuzz test): refuse such packets here.
    if data[2] > 16 {
        return Err(PacketError::HardwareAddressLength(data[2]));
    }
    // dhcproto has `debug_assert!`s on option lengths (option 94, client
    // network interface id, must be 3 bytes): refuse such packets before
    // decoding. Options moved into `sname`/`file` by option 52 are not
    // walked here; for them, and anything unknown, a panic in decoding is
    // a refused packet — the guest must not be able to kill the server.
    let mut i = 240;
    while i < data.len() {
        let code = data[i];
        match code {
            0 => i += 1,
            255 => break,
            _ => {
                let Some(&len) = data.get(i + 1) else {
                    return Err(PacketError::OptionWithoutLength(code));
                };
                if code == 94 && len != 3 {
                    return Err(PacketError::OptionLength {
                        code,
                        len,
                        expected: 3,
                    });
                }
                i += 2 + usize::from(len);
            }
        }
    }
    match std::panic::catch_unwind(|| Message::decode(&mut Decoder::new(data))) {
        Ok(r) => r.map_err(|e| PacketError::Decode(e.to_string())),
        Err(_) => Err(PacketError::DecoderPanicked),
    }
}

/// One pod route for option 121: `dst` `None` = default route, `gw`
/// `None` = on-link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Destination network.
    pub dst: Option<Ipv4Net>,
    /// Next hop.
    pub gw: Option<Ipv4Addr>,
}

/// Orders routes for option 121 (RFC 3442): non-default routes in their
/// order, then the default route(s) last, so the guest can reach a
/// default gateway through an earlier route (case 003). On-link routes
/// get gateway 0.0.0.0.
pub fn classless_routes(routes: &[Route]) -> Vec<(Ipv4Net, Ipv4Addr)> {
    let unspecified = Ipv4Addr::UNSPECIFIED;
    let default = Ipv4Net::default();
    let entry = |r: &Route| {
        let dst = r.dst.map(|d| d.trunc()).unwrap_or(default);
        (dst, r.gw.unwrap_or(unspecified))
    };
    let is_default = |r: &&Route| r.dst.is_none_or(|d| d.prefix_len() == 0);
    let mut out: Vec<_> = routes
        .iter()
        .filter(|r| !is_default(r))
        .map(entry)
        .collect();
    out.extend(routes.iter().filter(is_default).map(entry));
    out
}

/// `interfaces[].dhcpOptions` of a VMI.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtraOptions {
    /// Option 67.
    pub boot_file_name: Option<String>,
    /// Option 66.
    pub tftp_server_name: Option<String>,
    /// Option 42, IPv4 addresses as text.
    pub ntp_servers: Vec<String>,
    /// Options 224–254: (code, value).
    pub private_options: Vec<(i64, String)>,
}

/// Everything the server tells the one guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DhcpV4Config {
    /// Only this client MAC is answered.
    pub client_mac: [u8; 6],
    /// `yiaddr`.
    pub client_ip: Ipv4Addr,
    /// Prefix length for the subnet mask (option 1).
    pub prefix_len: u8,
    /// Server identifier (54) and `siaddr`.
    pub server_ip: Ipv4Addr,
    /// Router (3).
    pub router: Option<Ipv4Addr>,
    /// DNS servers (6); empty → [`DEFAULT_DNS`].
    pub dns: Vec<Ipv4Addr>,
    /// Search list (119) before [`search_list`] defaults.
    pub search: Vec<String>,
    /// `spec.subdomain`.
    pub subdomain: String,
    /// Hostname (12).
    pub hostname: String,
    /// Interface MTU (26); 0 = not sent.
    pub mtu: u16,
    /// Routes for option 121; empty → no option.
    pub routes: Vec<Route>,
    /// Lease time (51), seconds.
    pub lease_seconds: u32,
    /// `dhcpOptions`.
    pub extra: ExtraOptions,
}

/// A validated configuration with its options built once.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The configuration.
    pub config: DhcpV4Config,
    options: DhcpOptions,
}

fn opt_text(field: &str, value: &str) -> Result<Vec<u8>, DhcpError> {
    let err = |reason: &str| DhcpError::Option {
        field: field.into(),
        reason: reason.into(),
    };
    if value.is_empty() {
        return Err(err("is empty"));
    }
    if value.len() > 255 {
        return Err(err("is longer than the 255 bytes of a DHCP option"));
    }
    if value.bytes().any(|b| b == 0) {
        return Err(err("contains a NUL byte"));
    }
    Ok(value.as_bytes().to_vec())
}

impl DhcpV4Config {
    /// Validates and builds the options (all but message type and server
    /// identifier, which depend on the request).
    ///
    /// # Errors
    /// [`DhcpError`] for the first value that cannot be encoded.
    pub fn build(self) -> Result<ServerOptions, DhcpError> {
        let mut o = DhcpOptions::new();
        let net = Ipv4Net::new(self.client_ip, self.prefix_len.min(32)).map_err(|e| {
            DhcpError::Option {
                field: "prefix".into(),
                reason: e.to_string(),
            }
        })?;
        o.insert(DhcpOption::SubnetMask(net.netmask()));
        if let Some(r) = self.router {
            o.insert(DhcpOption::Router(vec![r]));
        }
        let dns = if self.dns.is_empty() {
            vec![DEFAULT_DNS]
        } else {
            self.dns.clone()
        };
        o.insert(DhcpOption::DomainNameServer(dns));
        let search = search_list(&self.search, &self.subdomain);
        let bytes = encode_search_domains(&search)?;
        o.insert(DhcpOption::Unknown(UnknownOption::new(
            OptionCode::DomainSearch,
            bytes,
        )));
        if let Some(longest) = search.iter().max_by_key(|d| d.len()) {
            o.insert(DhcpOption::DomainName(longest.clone()));
        }
        if !valid_label(&self.hostname.to_ascii_lowercase()) {
            return Err(DhcpError::Hostname(self.hostname.clone()));
        }
        o.insert(DhcpOption::Hostname(self.hostname.clone()));
        if self.mtu != 0 {
            o.insert(DhcpOption::InterfaceMtu(self.mtu));
        }
        let routes = classless_routes(&self.routes);
        if !routes.is_empty() {
            o.insert(DhcpOption::ClasslessStaticRoute(routes));
        }
        o.insert(DhcpOption::AddressLeaseTime(self.lease_seconds));
        let x = &self.extra;
        if let Some(b) = &x.boot_file_name {
            o.insert(DhcpOption::BootfileName(opt_text(
                "dhcpOptions.bootFileName",
                b,
            )?));
        }
        if let Some(t) = &x.tftp_server_name {
            o.insert(DhcpOption::TFTPServerName(opt_text(
                "dhcpOptions.tftpServerName",
                t,
            )?));
        }
        if !x.ntp_servers.is_empty() {
            let ips = x
                .ntp_servers
                .iter()
                .map(|s| s.parse().map_err(|_| DhcpError::NtpServer(s.clone())))
                .collect::<Result<Vec<Ipv4Addr>, _>>()?;
            o.insert(DhcpOption::NtpServers(ips));
        }
        for (i, (code, value)) in x.private_options.iter().enumerate() {
            let field = format!("dhcpOptions.privateOptions[{i}]");
            let code = u8::try_from(*code)
                .ok()
                .filter(|c| (224..=254).contains(c))
                .ok_or_else(|| DhcpError::Option {
                    field: format!("{field}.option"),
                    reason: format!("{code} is not a private option code (224-254)"),
                })?;
            let data = opt_text(&format!("{field}.value"), value)?;
            o.insert(DhcpOption::Unknown(UnknownOption::new(code.into(), data)));
        }
        Ok(ServerOptions {
            config: self,
            options: o,
        })
    }
}

impl ServerOptions {
    /// The options every OFFER/ACK carries (without 53 and 54).
    pub fn options(&self) -> &DhcpOptions {
        &self.options
    }

    /// The answer to `req`: OFFER to a DISCOVER, ACK to a REQUEST for our
    /// address (NAK to a REQUEST for another one, RFC 2131 §4.3.2), none
    /// to anything else, to a reply, or to another client's MAC.
    pub fn reply(&self, req: &Message) -> Option<Message> {
        let c = &self.config;
        if req.opcode() != Opcode::BootRequest || req.chaddr() != c.client_mac {
            return None;
        }
        let kind = match req.opts().msg_type()? {
            MessageType::Discover => MessageType::Offer,
            MessageType::Request => {
                let asked = match req.opts().get(OptionCode::RequestedIpAddress) {
                    Some(DhcpOption::RequestedIpAddress(ip)) => Some(*ip),
                    _ if !req.ciaddr().is_unspecified() => Some(req.ciaddr()),
                    _ => None,
                };
                if asked.is_some_and(|ip| ip != c.client_ip) {
                    MessageType::Nak
                } else {
                    MessageType::Ack
                }
            }
            _ => return None,
        };
        let nak = kind == MessageType::Nak;
        let yiaddr = if nak {
            Ipv4Addr::UNSPECIFIED
        } else {
            c.client_ip
        };
        let mut m = Message::new_with_id(
            req.xid(),
            Ipv4Addr::UNSPECIFIED,
            yiaddr,
            if nak {
                Ipv4Addr::UNSPECIFIED
            } else {
                c.server_ip
            },
            req.giaddr(),
            &c.client_mac,
        );
        m.set_opcode(Opcode::BootReply)
            .set_htype(req.htype())
            .set_flags(req.flags());
        if nak {
            m.set_flags(Flags::default().set_broadcast());
            let opts = m.opts_mut();
            opts.insert(DhcpOption::MessageType(kind));
            opts.insert(DhcpOption::ServerIdentifier(c.server_ip));
            return Some(m);
        }
        m.set_opts(self.options.clone());
        m.opts_mut().insert(DhcpOption::MessageType(kind));
        m.opts_mut()
            .insert(DhcpOption::ServerIdentifier(c.server_ip));
        Some(m)
    }
}

#[cfg(test)]
mod tests;
