//! Reproducers for the `dhcproto` 0.15 decoder panics our DHCP servers
//! guard against (`network::dhcpv4::decode_packet` and
//! `network::dhcpv6::decode_packet` refuse these packets before calling
//! the library). They are the material for the upstream report in
//! `docs/upstream/dhcproto-panics.md`. Each test asserts the library
//! *still* panics: when one fails after a `dhcproto` upgrade, upstream
//! fixed it and our pre-decode check for that case can go.
//!
//! The v6 cases are integer overflows (`len - header` with `len` shorter
//! than the option's fixed header), which panic in debug builds (tests)
//! and wrap in release builds; the v4 ones are `debug_assert!`s and an
//! index out of bounds.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use dhcproto::{v4, v6, Decodable, Decoder};

fn v6_panics(packet: &[u8]) -> bool {
    std::panic::catch_unwind(|| v6::Message::decode(&mut Decoder::new(packet))).is_err()
}

fn v4_panics(packet: &[u8]) -> bool {
    std::panic::catch_unwind(|| {
        let m = v4::Message::decode(&mut Decoder::new(packet))?;
        // chaddr() slices by the hlen the packet sent.
        let _ = m.chaddr();
        Ok::<_, dhcproto::error::DecodeError>(())
    })
    .is_err()
}

/// A SOLICIT (type 1, xid 0x000001) with one option `code` of `len`
/// bytes, followed by 8 more bytes (the decoder only reaches the
/// subtraction when bytes follow; a bare short option at the end is
/// dropped without a panic).
fn solicit_with(code: u16, len: u16) -> Vec<u8> {
    let mut p = vec![1, 0, 0, 1];
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(&len.to_be_bytes());
    p.extend(std::iter::repeat_n(0xffu8, usize::from(len) + 8));
    p
}

/// (option code, length) pairs that panic: status code (13) under 2
/// bytes, vendor class (16) and vendor-specific options (17) under 4.
const V6_PANICS: [(u16, u16); 4] = [(13, 0), (13, 1), (16, 2), (17, 3)];

#[test]
fn dhcproto_v6_still_panics_on_options_shorter_than_their_header() {
    for (code, len) in V6_PANICS {
        assert!(
            v6_panics(&solicit_with(code, len)),
            "dhcproto no longer panics on option {code} with {len} bytes: drop that case from network::dhcpv6::check_options"
        );
    }
    // Our guard refuses each of them without calling the library.
    for (code, len) in V6_PANICS {
        let e = network::dhcpv6::decode_packet(&solicit_with(code, len))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("option {code} has {len} bytes")), "{e}");
    }
}

/// A BOOTREQUEST with the magic cookie, then `options`, then END.
fn bootrequest(hlen: u8, options: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 236];
    p[0] = 1;
    p[1] = 1;
    p[2] = hlen;
    p.extend_from_slice(&[99, 130, 83, 99]);
    p.extend_from_slice(options);
    p.push(255);
    p
}

#[test]
fn dhcproto_v4_still_panics_on_option_94_and_long_hardware_addresses() {
    // Option 94 (client network interface identifier) must be 3 bytes.
    let opt94 = bootrequest(6, &[53, 1, 1, 94, 2, 1, 2]);
    assert!(
        v4_panics(&opt94),
        "dhcproto no longer panics on option 94 of 2 bytes: drop that check from network::dhcpv4::decode_packet"
    );
    // hlen over 16: chaddr() indexes past its 16-byte field.
    let hlen = bootrequest(17, &[53, 1, 1]);
    assert!(
        v4_panics(&hlen),
        "dhcproto no longer panics on hlen 17: drop that check from network::dhcpv4::decode_packet"
    );
    assert_eq!(
        network::dhcpv4::decode_packet(&opt94)
            .unwrap_err()
            .to_string(),
        "option 94 has length 2, not 3"
    );
    assert_eq!(
        network::dhcpv4::decode_packet(&hlen)
            .unwrap_err()
            .to_string(),
        "hardware address length 17 is over 16"
    );
}
