//! What the DHCPv6 server tells the guest of a masquerade interface
//! (KubeVirt v1.6.6 `pkg/network/dhcp/server/v6`, kubevirt-facts §6.4),
//! with `dhcproto`'s v6 packets.
//!
//! Stateful and single-client: the guest gets one IA_NA address (the
//! third address of `vmIPv6NetworkCIDR`, `fd10:0:2::2` by default) with
//! preferred and valid lifetimes of 999 days, the IAID it asked with, a
//! server identifier DUID-LL (Ethernet, the bridge's MAC), and in REPLY
//! messages the pod's IPv6 DNS servers (option 23) and search list
//! (option 24). As in KubeVirt: SOLICIT → ADVERTISE (REPLY with Rapid
//! Commit when the client asks for it), REQUEST → REPLY; RENEW and
//! REBIND → REPLY with the same binding (KubeVirt answers them with a
//! bare REPLY; RFC 8415 §18.3.4/§18.3.5 want the IA back, and the lease
//! is the same either way); CONFIRM and RELEASE → a bare REPLY;
//! INFORMATION-REQUEST → REPLY with DNS and search list; anything else
//! → nothing. Messages without a client identifier, or naming another
//! server, are not answered (RFC 8415 §16).
//!
//! Only the guest is answered: DHCPv6 clients send from their link-local
//! address (RFC 8415 §13.1), so a request from any other source is
//! dropped, and a link-local address in modified EUI-64 form (RFC 4291
//! App. A, the kernel's default) must be the one of the guest's MAC. The
//! client DUID is not used: DUID-LLT is generated once and kept, so it
//! names the NIC of the first boot, not this one (RFC 8415 §11.2). A
//! source with a random interface identifier (stable-privacy) cannot be
//! attributed to a MAC; it is answered, as KubeVirt answers every request
//! on the bridge, which holds only the guest's tap.

use std::net::Ipv6Addr;

pub use crate::dhcpv4::PacketError;

use dhcproto::v6::{
    DhcpOption, DhcpOptions, IAAddr, Message, MessageType, OptionCode, UnknownOption, IANA,
};

use crate::dhcpv4::{encode_search_domains, search_list, DhcpError};

/// Preferred and valid lifetime of the address: 999 days in seconds
/// (KubeVirt's `infiniteLease`).
pub const LEASE_SECONDS: u32 = 999 * 24 * 3600;

/// DUID type 3, DUID-LL (RFC 8415 §11.4).
const DUID_LL: u16 = 3;
/// Hardware type 1, Ethernet (IANA ARP hardware types).
const HTYPE_ETHERNET: u16 = 1;

/// Everything the server tells the one guest over DHCPv6.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DhcpV6Config {
    /// The guest's MAC: a request from a link-local address in EUI-64
    /// form must carry this MAC.
    pub client_mac: [u8; 6],
    /// The address given in IA_NA (`fd10:0:2::2` by default).
    pub client_ip: Ipv6Addr,
    /// MAC of the bridge the server runs on (`k6t-eth0`): the server
    /// identifier is DUID-LL of it.
    pub server_mac: [u8; 6],
    /// IPv6 `nameserver`s of the pod's resolv.conf (option 23); empty →
    /// no option 23.
    pub dns: Vec<Ipv6Addr>,
    /// The pod's search list, before [`search_list`] defaults.
    pub search: Vec<String>,
    /// `spec.subdomain`.
    pub subdomain: String,
}

/// A validated DHCPv6 configuration with its fixed options built once.
#[derive(Clone, Debug)]
pub struct ServerV6 {
    /// The configuration.
    pub config: DhcpV6Config,
    server_id: Vec<u8>,
    search: Vec<u8>,
}

/// DUID-LL of an Ethernet MAC: type 3, hardware type 1, the 6 bytes
/// (RFC 8415 §11.4).
pub fn duid_ll(mac: &[u8; 6]) -> Vec<u8> {
    let mut d = Vec::with_capacity(10);
    d.extend_from_slice(&DUID_LL.to_be_bytes());
    d.extend_from_slice(&HTYPE_ETHERNET.to_be_bytes());
    d.extend_from_slice(mac);
    d
}

/// The link-local address the kernel gives `mac` by default:
/// `fe80::` + modified EUI-64 (U/L bit flipped, `ff:fe` in the middle;
/// RFC 4291 App. A).
pub fn eui64_link_local(mac: &[u8; 6]) -> Ipv6Addr {
    let m = mac;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 0x02,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

/// Whether a request from `source` may be the guest's (see the module
/// docs): link-local, and if its interface identifier is in EUI-64 form,
/// the guest's MAC's.
pub fn source_is_guest(source: &Ipv6Addr, mac: &[u8; 6]) -> bool {
    let o = source.octets();
    let link_local = o[0] == 0xfe && (o[1] & 0xc0) == 0x80;
    if !link_local {
        return false;
    }
    let eui64_form = o[11] == 0xff && o[12] == 0xfe;
    !eui64_form || o[8..] == eui64_link_local(mac).octets()[8..]
}

/// Least payload length of the options whose `dhcproto` decoder
/// subtracts a fixed header from the option length (status code 13,
/// vendor class 16, vendor options 17, authentication 11), and of the
/// containers whose nested options [`check_options`] walks (IA_NA 3,
/// IA_TA 4, IAADDR 5, IA_PD 25, IAPREFIX 26), with that header's size.
fn fixed_header(code: u16) -> Option<usize> {
    match code {
        13 => Some(2),
        16 | 17 | 4 => Some(4),
        11 => Some(11),
        3 | 25 => Some(12),
        5 => Some(24),
        26 => Some(25),
        _ => None,
    }
}

/// Walks the option list `data` (and the options nested in IA and vendor
/// options, `depth` levels at most) and refuses a packet `dhcproto`
/// would panic on: an option shorter than the fixed header its decoder
/// subtracts. Hand-rolled because this is exactly the check `dhcproto`
/// 0.15 lacks; the walk reads only TLV headers.
fn check_options(mut data: &[u8], depth: u8) -> Result<(), PacketError> {
    while data.len() >= 4 {
        let code = u16::from_be_bytes([data[0], data[1]]);
        let len = usize::from(u16::from_be_bytes([data[2], data[3]]));
        let Some(body) = data.get(4..4 + len) else {
            // Truncated: dhcproto stops at it without reading further.
            return Ok(());
        };
        if let Some(header) = fixed_header(code) {
            if len < header {
                return Err(PacketError::OptionShorterThanHeader { code, len, header });
            }
            if code != 13 && code != 11 && code != 16 {
                if depth == 0 {
                    return Err(PacketError::NestedTooDeeply);
                }
                check_options(&body[header..], depth - 1)?;
            }
        }
        data = &data[4 + len..];
    }
    Ok(())
}

/// Decodes a datagram as a DHCPv6 client message (not a relay message).
/// Options `dhcproto` would panic on (its decoders subtract a header size
/// from option lengths, which overflows in debug builds) are refused
/// first by a walk over the option headers; a panic that still happens
/// is a refused packet, never a dead server.
///
/// # Errors
/// [`PacketError`]: why the packet was refused.
pub fn decode_packet(data: &[u8]) -> Result<Message, PacketError> {
    use dhcproto::{Decodable, Decoder};
    if data.len() < 4 {
        return Err(PacketError::Short {
            len: data.len(),
            protocol: "DHCPv6",
        });
    }
    if matches!(data[0], 12 | 13) {
        return Err(PacketError::Relay);
    }
    check_options(&data[4..], 8)?;
    match std::panic::catch_unwind(|| Message::decode(&mut Decoder::new(data))) {
        Ok(r) => r.map_err(|e| PacketError::Decode(e.to_string())),
        Err(_) => Err(PacketError::DecoderPanicked),
    }
}

impl DhcpV6Config {
    /// Validates the search list and builds the fixed options.
    ///
    /// # Errors
    /// [`DhcpError::SearchDomain`] / [`DhcpError::SearchListTooLong`] as
    /// for DHCPv4 (the same RFC 1035 encoding, uncompressed as RFC 3646
    /// §4 requires).
    pub fn build(self) -> Result<ServerV6, DhcpError> {
        let list = search_list(&self.search, &self.subdomain);
        let search = encode_search_domains(&list)?;
        Ok(ServerV6 {
            server_id: duid_ll(&self.server_mac),
            search,
            config: self,
        })
    }
}

impl ServerV6 {
    /// The server identifier (DUID-LL of the bridge MAC).
    pub fn server_id(&self) -> &[u8] {
        &self.server_id
    }

    fn with_dns(&self, opts: &mut DhcpOptions) {
        if !self.config.dns.is_empty() {
            opts.insert(DhcpOption::DomainNameServers(self.config.dns.clone()));
        }
        if !self.search.is_empty() {
            opts.insert(DhcpOption::Unknown(UnknownOption::new(
                OptionCode::DomainSearchList,
                self.search.clone(),
            )));
        }
    }

    fn with_address(&self, req: &Message, opts: &mut DhcpOptions) {
        let iaid = match req.opts().get(OptionCode::IANA) {
            Some(DhcpOption::IANA(ia)) => ia.id,
            _ => 0,
        };
        let mut ia_opts = DhcpOptions::new();
        ia_opts.insert(DhcpOption::IAAddr(IAAddr {
            addr: self.config.client_ip,
            preferred_life: LEASE_SECONDS,
            valid_life: LEASE_SECONDS,
            opts: DhcpOptions::new(),
        }));
        opts.insert(DhcpOption::IANA(IANA {
            id: iaid,
            t1: 0,
            t2: 0,
            opts: ia_opts,
        }));
    }

    /// The answer to `req` received from `source` (see the module docs
    /// for which messages get what), or `None`.
    pub fn reply(&self, req: &Message, source: &Ipv6Addr) -> Option<Message> {
        if !source_is_guest(source, &self.config.client_mac) {
            return None;
        }
        let client_id = match req.opts().get(OptionCode::ClientId) {
            Some(DhcpOption::ClientId(id)) if !id.is_empty() => id.clone(),
            _ => return None,
        };
        if let Some(DhcpOption::ServerId(id)) = req.opts().get(OptionCode::ServerId) {
            if *id != self.server_id {
                return None;
            }
        }
        let rapid = req.opts().get(OptionCode::RapidCommit).is_some();
        let (kind, address, dns) = match req.msg_type() {
            MessageType::Solicit if rapid => (MessageType::Reply, true, true),
            MessageType::Solicit => (MessageType::Advertise, true, false),
            MessageType::Request | MessageType::Renew | MessageType::Rebind => {
                (MessageType::Reply, true, true)
            }
            MessageType::InformationRequest => (MessageType::Reply, false, true),
            MessageType::Confirm | MessageType::Release => (MessageType::Reply, false, false),
            _ => return None,
        };
        let mut m = Message::new_with_id(kind, req.xid());
        let opts = m.opts_mut();
        opts.insert(DhcpOption::ClientId(client_id));
        opts.insert(DhcpOption::ServerId(self.server_id.clone()));
        if kind == MessageType::Reply && rapid && req.msg_type() == MessageType::Solicit {
            opts.insert(DhcpOption::RapidCommit);
        }
        if address {
            self.with_address(req, opts);
        }
        if dns {
            self.with_dns(opts);
        }
        Some(m)
    }
}

#[cfg(test)]
mod tests;
