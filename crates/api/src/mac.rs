//! MAC address parsing as KubeVirt accepts `interfaces[].macAddress`
//! (Go's `net.ParseMAC`, restricted to 6-octet addresses) plus the values
//! libvirt refuses at start, caught here with a clear message instead.

/// Why a MAC address is refused; the text quotes the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MacError {
    /// Not one of Go's `net.ParseMAC` forms.
    #[error("invalid MAC address {0:?}")]
    Invalid(String),
    /// A form Go parses, but not of 6 octets (EUI-64: 8, InfiniBand: 20).
    #[error("MAC address {text:?} has {octets} octets, an Ethernet MAC has 6")]
    Octets {
        /// The value.
        text: String,
        /// How many octets it has.
        octets: usize,
    },
    /// A multicast address (libvirt: "expected unicast mac address").
    #[error("MAC address {0:?} is a multicast address")]
    Multicast(String),
    /// First octet 0xFE (libvirt: "Unable to use MAC address starting
    /// with reserved value 0xFE").
    #[error("MAC address {0:?} starts with the reserved value 0xFE (libvirt refuses it)")]
    Reserved(String),
    /// The masquerade bridge's own MAC ([`MASQUERADE_BRIDGE_MAC`]).
    #[error("MAC address {0:?} is reserved for the masquerade bridge")]
    MasqueradeBridge(String),
}

/// The MAC KubeVirt's phase 1 gives the masquerade bridge `k6t-<pod>`
/// (`link.StaticMasqueradeBridgeMAC`); a guest must not use it.
pub const MASQUERADE_BRIDGE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0];

/// Parses a MAC in one of Go's `net.ParseMAC` forms: `de:ad:00:00:be:af`,
/// `DE-AD-00-00-BE-AF` or `dead.0000.beaf`, case-insensitive.
///
/// # Errors
/// [`MacError::Invalid`] for a malformed value, [`MacError::Octets`] for
/// one not of 6 octets (EUI-64 and InfiniBand forms parse in Go but are
/// not Ethernet MACs).
pub fn parse_mac(text: &str) -> Result<[u8; 6], MacError> {
    let bad = || MacError::Invalid(text.to_owned());
    let hex = |s: &str| -> Result<Vec<u8>, MacError> {
        if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| bad()))
            .collect()
    };
    // Groups of `len` hex digits between `sep`s.
    let groups = |sep: char, len: usize| -> Result<Vec<u8>, MacError> {
        let groups: Vec<&str> = text.split(sep).collect();
        if groups.iter().any(|g| g.len() != len) {
            return Err(bad());
        }
        Ok(groups
            .iter()
            .map(|g| hex(g))
            .collect::<Result<Vec<_>, _>>()?
            .concat())
    };
    let bytes: Vec<u8> = if text.len() >= 14 && text.as_bytes().get(4) == Some(&b'.') {
        groups('.', 4)?
    } else if text.len() >= 14 && matches!(text.as_bytes().get(2), Some(b':' | b'-')) {
        groups(char::from(text.as_bytes()[2]), 2)?
    } else {
        return Err(bad());
    };
    match bytes.len() {
        6 => Ok([bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5]]),
        n @ (8 | 20) => Err(MacError::Octets {
            text: text.to_owned(),
            octets: n,
        }),
        _ => Err(bad()),
    }
}

/// Parses a guest MAC and refuses the values libvirt or the pod network
/// cannot use: multicast (libvirt: "expected unicast mac address"), a
/// first octet 0xFE (libvirt: "Unable to use MAC address starting with
/// reserved value 0xFE"), and, for masquerade, the bridge's own MAC.
///
/// # Errors
/// [`parse_mac`]'s, or [`MacError::Multicast`], [`MacError::Reserved`],
/// [`MacError::MasqueradeBridge`].
pub fn parse_guest_mac(text: &str, masquerade: bool) -> Result<[u8; 6], MacError> {
    let mac = parse_mac(text)?;
    if mac[0] & 1 == 1 {
        return Err(MacError::Multicast(text.to_owned()));
    }
    if mac[0] == 0xfe {
        return Err(MacError::Reserved(text.to_owned()));
    }
    if masquerade && mac == MASQUERADE_BRIDGE_MAC {
        return Err(MacError::MasqueradeBridge(text.to_owned()));
    }
    Ok(mac)
}

/// Canonical lower-case colon form (`de:ad:00:00:be:af`), as libvirt and
/// Go's `HardwareAddr.String()` print it.
pub fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Case 007's variants table.
    #[test]
    fn case_007_variants() {
        let ok = |s: &str| format_mac(&parse_guest_mac(s, true).unwrap());
        assert_eq!(ok("DE-AD-00-00-BE-AF"), "de:ad:00:00:be:af");
        assert_eq!(ok("de:ad:00:00:be:af"), "de:ad:00:00:be:af");
        assert_eq!(ok("dead.0000.beaf"), "de:ad:00:00:be:af");
        assert_eq!(ok("02:54:00:6A:9A:15"), "02:54:00:6a:9a:15");
        let err = |s: &str, masq: bool| parse_guest_mac(s, masq).unwrap_err().to_string();
        assert!(err("de:ad:00:00:be", true).contains("invalid MAC address \"de:ad:00:00:be\""));
        assert!(err("de:ad:00:00:be:af:00:01", true).contains("has 8 octets"));
        assert!(err("02:00:00:00:00:00", true).contains("reserved for the masquerade bridge"));
        assert!(parse_guest_mac("02:00:00:00:00:00", false).is_ok());
        assert!(err("fe:54:00:12:34:56", false).contains("0xFE"));
        assert!(err("01:00:5e:00:00:01", false).contains("multicast"));
        // The kinds, for callers that tell them apart.
        assert_eq!(
            parse_mac("de:ad:00:00:be:af:00:01"),
            Err(MacError::Octets {
                text: "de:ad:00:00:be:af:00:01".into(),
                octets: 8
            })
        );
        assert_eq!(
            parse_guest_mac("01:00:5e:00:00:01", false),
            Err(MacError::Multicast("01:00:5e:00:00:01".into()))
        );
        for bad in [
            "",
            "de:ad:00:00:be:a",
            "de:ad-00:00:be:af",
            "zz:ad:00:00:be:af",
            "dead.0000.bea",
            "é:ad:00:00:be:af:",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
    }
}
