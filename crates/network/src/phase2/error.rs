//! Why phase 2 refused an interface or could not prepare it:
//! [`Phase2Error`].

use crate::cache::CacheError;
use crate::dhcpv4::DhcpError;
use crate::phase1::Phase1Error;
use crate::plan::PlanError;

/// A failure of phase 2's preparation ([`super::prepare`]), of its checks
/// ([`super::check_spec`]) or of the start of its DHCP servers
/// ([`super::DhcpServers::start`]). One line naming the interface field
/// (`spec.domain.devices.interfaces[<i>]…`), the network or the bridge; the
/// launcher answers it to virt-handler as it is.
#[derive(Debug, thiserror::Error)]
pub enum Phase2Error {
    /// The interface's spec is one phase 2 does not serve: no network of
    /// its name, a network without source, a binding not wired, a
    /// masquerade interface off the pod network.
    #[error("{field}: {reason}")]
    Refused {
        /// The field (`spec.domain.devices.interfaces[0].masquerade`,
        /// `spec.networks[name=x]`).
        field: String,
        /// Why.
        reason: String,
    },
    /// `macAddress` is not a MAC a guest may have.
    #[error("{field}.macAddress: {source}")]
    MacAddress {
        /// The interface (`spec.domain.devices.interfaces[<i>]`).
        field: String,
        /// What is wrong with it.
        #[source]
        source: api::mac::MacError,
    },
    /// A masquerade address plan (`vmNetworkCIDR`, `vmIPv6NetworkCIDR`).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A pod link could not be read or looked up.
    #[error("{field}: {source}")]
    Link {
        /// The interface.
        field: String,
        /// Phase 1's look-up error, naming the link.
        #[source]
        source: Phase1Error,
    },
    /// None of the pod link names the network may have exists.
    #[error("{field}: pod link {candidates} is missing ({reason})")]
    LinkMissing {
        /// The interface.
        field: String,
        /// The names looked for, `a or b`.
        candidates: String,
        /// The look-up error of the first name.
        reason: String,
    },
    /// Phase 1's cache of the bridge binding could not be read.
    #[error("{field}: {source}")]
    Cache {
        /// The interface.
        field: String,
        /// The cache error, naming the file.
        #[source]
        source: CacheError,
    },
    /// A field of phase 1's cache is invalid.
    #[error("{field}: network cache {file}: {reason}")]
    CacheField {
        /// The interface.
        field: String,
        /// The cache file.
        file: String,
        /// Which value is wrong and why.
        reason: String,
    },
    /// The bridge binding has no fake server address for the index.
    #[error("{field}: no fake bridge address for interface index {index} (169.254.75.1{index} is not an address)")]
    NoFakeAddress {
        /// The interface.
        field: String,
        /// The interface's index in the spec.
        index: usize,
    },
    /// The DHCP answers cannot be built.
    #[error("{field}: {protocol}: {source}")]
    Dhcp {
        /// The interface.
        field: String,
        /// `DHCP` or `DHCPv6`.
        protocol: &'static str,
        /// What cannot be encoded.
        #[source]
        source: DhcpError,
    },
    /// [`super::check_spec`]: `dhcpOptions` or the hostname cannot be sent.
    #[error("{field}.dhcpOptions: {source}")]
    DhcpOptions {
        /// The interface.
        field: String,
        /// What cannot be encoded.
        #[source]
        source: DhcpError,
    },
    /// A DHCP server could not be started (its socket, thread or stop
    /// pipe).
    #[error("{what}: {source}")]
    Server {
        /// What failed (`DHCP server on k6t-eth0`, `DHCPv6 server thread`).
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
