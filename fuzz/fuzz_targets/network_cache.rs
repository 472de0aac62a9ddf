//! A file phase 1 (virt-handler) left in the launcher's private directory
//! → the cache readers of `network::cache` as the launcher uses them.
//!
//! Input: one selector byte, then the file's content.
//! - selector even: `vif-cache-eth0.json` → `network::phase2::prepare` of
//!   a VMI with one bridge interface on the pod network (the pod links
//!   are played: `eth0`, `eth0-nic`) → for a DHCP server it configures,
//!   the answer to a DISCOVER of the client, encoded as the server sends
//!   it;
//! - selector odd: `interface-cache-default.json` →
//!   `read_domain_interface_mac`.
//!
//! Property: nothing panics; an error names the file; a DHCP server that
//! preparation accepts answers with a reply that encodes (an encoding
//! error would end the server loop) and fits a UDP datagram. Seeds:
//! `fuzz/seeds/network_cache` (KubeVirt v1.6.6's files as phase 1 writes
//! them).

#![no_main]

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::OnceLock;

use dhcproto::v4::{DhcpOption, Message, MessageType};
use dhcproto::Encodable;
use libfuzzer_sys::fuzz_target;
use network::phase1::{Phase1Error, PodLink};

/// The largest UDP payload over IPv4.
const MAX_UDP: usize = 65_507;

const VMI: &str = r#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance",
 "metadata":{"name":"testvm","namespace":"default","uid":"0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77"},
 "spec":{"domain":{"devices":{"interfaces":[{"name":"default","bridge":{}}]},
                   "resources":{"requests":{"memory":"128Mi"}}},
         "networks":[{"name":"default","pod":{}}]}}"#;

/// The private directory the files go to (on tmpfs when there is one).
fn private_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("vl-fuzz-cache-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fn vmi() -> &'static api::VirtualMachineInstance {
    static V: OnceLock<api::VirtualMachineInstance> = OnceLock::new();
    V.get_or_init(|| api::load::from_command_json(VMI.as_bytes()).unwrap())
}

fn link(_name: &str) -> Result<PodLink, Phase1Error> {
    Ok(PodLink {
        mac: [0x0a, 0x58, 0x00, 0x00, 0x00, 0x05],
        mtu: 1450,
        ipv4: true,
        ipv6: false,
    })
}

fn no_udn(_name: &str) -> Result<bool, Phase1Error> {
    Ok(false)
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, content)) = data.split_first() else {
        return;
    };
    let dir = private_dir();
    if selector % 2 == 1 {
        let path = dir.join("interface-cache-default.json");
        std::fs::write(&path, content).unwrap();
        if let Err(e) = network::cache::read_domain_interface_mac(dir, "default") {
            assert!(
                e.to_string().contains("interface-cache-default.json"),
                "{e}"
            );
        }
        return;
    }
    std::fs::write(dir.join("vif-cache-eth0.json"), content).unwrap();
    let p = match network::phase2::prepare(vmi(), dir, "nameserver 10.96.0.10\n", &link, &no_udn) {
        Ok(p) => p,
        Err(e) => {
            assert!(e.to_string().contains("vif-cache-eth0.json"), "{e}");
            return;
        }
    };
    for (_, server) in &p.dhcp {
        let c = &server.config;
        let mut req = Message::new_with_id(
            0x1234_5678,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
            &c.client_mac,
        );
        req.opts_mut()
            .insert(DhcpOption::MessageType(MessageType::Discover));
        let reply = server.reply(&req).expect("a DISCOVER of the client is answered");
        let bytes = match reply.to_vec() {
            Ok(b) => b,
            Err(e) => panic!("the OFFER does not encode: {e}\n{c:?}"),
        };
        assert!(bytes.len() <= MAX_UDP, "OFFER of {} bytes", bytes.len());
    }
});
