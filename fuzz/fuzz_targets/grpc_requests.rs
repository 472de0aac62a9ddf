//! Bytes from virt-handler on the command socket → the request messages'
//! protobuf decoding (prost, as tonic decodes a request body; the types
//! `cmd`'s checked-in messages, see the crate's `proto`) → the VMI inside (`api::load::from_command_json`, as the
//! command server decodes `VMI.vmiJson`) → what SyncVirtualMachine does
//! with it before libvirt: KubeVirt's defaults, validation, the converter
//! with the request's SMBIOS and cluster options (see the crate's
//! `check`).
//!
//! Input: one mode byte, then
//! - mode 0–9: a protobuf body of VMIRequest, MigrationRequest,
//!   FreezeRequest, MemoryDumpRequest, InjectLaunchSecretRequest,
//!   ExecRequest, GuestPingRequest, EmptyRequest, CmdInfoRequest or the
//!   notify server's Response;
//! - mode ≥ 10: the VMI JSON itself (mutations of JSON reach much further
//!   than mutations of protobuf around it), sent inside a VMIRequest.
//!
//! Property: nothing panics; a message re-encodes to what decodes to
//! itself; a VMI that decodes re-encodes to JSON that decodes to the same
//! VMI; the converter's property of `check`. Seeds:
//! `fuzz/seeds/grpc_requests`.

#![no_main]

use api::Arch;
use virt_launcher_fuzz::proto::cmd::{
    EmptyRequest, ExecRequest, FreezeRequest, GuestPingRequest, InjectLaunchSecretRequest,
    MemoryDumpRequest, MigrationRequest, VirtualMachineOptions, Vmi, VmiRequest,
};
use virt_launcher_fuzz::proto::cmd_info::CmdInfoRequest;
use converter::VirtType;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use virt_launcher_fuzz::{check, host_context};

/// Decodes `bytes` as `M`; a message that decodes re-encodes into bytes
/// that decode to the same message.
fn decode<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<M> {
    let m = M::decode(bytes).ok()?;
    let again = m.encode_to_vec();
    match M::decode(again.as_slice()) {
        Ok(back) => assert!(back == m, "re-encoded message decodes differently: {m:?}"),
        Err(e) => panic!("re-encoded message does not decode: {e}: {m:?}"),
    }
    Some(m)
}

/// What the command server and SyncVirtualMachine do with a VMI.
fn vmi(json: &[u8], options: Option<&VirtualMachineOptions>) {
    let Ok(mut vmi) = api::load::from_command_json(json) else {
        return;
    };
    let text = serde_json::to_vec(&vmi).expect("a VMI serialises");
    match api::load::from_command_json(&text) {
        Ok(back) => assert!(
            back == vmi,
            "the VMI's JSON decodes differently: {}",
            String::from_utf8_lossy(&text)
        ),
        Err(e) => panic!(
            "the VMI's JSON does not decode: {e}\n{}",
            String::from_utf8_lossy(&text)
        ),
    }
    api::defaults::apply(&mut vmi, Arch::Amd64);
    if !api::validate::validate(&vmi).is_empty() {
        return;
    }
    let mut ctx = host_context(Arch::Amd64, VirtType::Kvm);
    if let Some(o) = options {
        if let Some(s) = &o.virtual_machine_sm_bios {
            ctx.smbios = converter::SmbiosOptions {
                manufacturer: s.manufacturer.clone(),
                family: s.family.clone(),
                product: s.product.clone(),
                sku: s.sku.clone(),
                version: s.version.clone(),
            };
        }
        ctx.mem_balloon_stats_period = o.mem_balloon_stats_period;
        if let Some(c) = &o.cluster_config {
            ctx.free_page_reporting = !c.free_page_reporting_disabled;
            ctx.serial_console_log = !c.serial_console_log_disabled;
            ctx.bochs_for_efi_guests = c.bochs_display_for_efi_guests;
        }
        ctx.volumes_discard_ignore = o.preallocated_volumes.iter().cloned().collect();
    }
    check(&vmi, &ctx);
}

fn json_of(v: Option<&Vmi>) -> &[u8] {
    v.map_or(&[], |v| v.vmi_json.as_slice())
}

fuzz_target!(|data: &[u8]| {
    virt_launcher_fuzz::count_run();
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    match mode {
        0 => {
            if let Some(r) = decode::<VmiRequest>(body) {
                vmi(json_of(r.vmi.as_ref()), r.options.as_ref());
            }
        }
        1 => {
            if let Some(r) = decode::<MigrationRequest>(body) {
                vmi(json_of(r.vmi.as_ref()), None);
            }
        }
        2 => {
            if let Some(r) = decode::<FreezeRequest>(body) {
                vmi(json_of(r.vmi.as_ref()), None);
            }
        }
        3 => {
            if let Some(r) = decode::<MemoryDumpRequest>(body) {
                vmi(json_of(r.vmi.as_ref()), None);
            }
        }
        4 => {
            if let Some(r) = decode::<InjectLaunchSecretRequest>(body) {
                vmi(json_of(r.vmi.as_ref()), None);
            }
        }
        5 => {
            decode::<ExecRequest>(body);
        }
        6 => {
            decode::<GuestPingRequest>(body);
        }
        7 => {
            decode::<EmptyRequest>(body);
        }
        8 => {
            decode::<CmdInfoRequest>(body);
        }
        9 => {
            decode::<virt_launcher_fuzz::proto::notify::Response>(body);
        }
        _ => {
            let req = VmiRequest {
                vmi: Some(Vmi {
                    vmi_json: body.to_vec(),
                }),
                options: None,
            };
            let r = decode::<VmiRequest>(&req.encode_to_vec()).expect("our request decodes");
            assert_eq!(json_of(r.vmi.as_ref()), body);
            vmi(body, None);
        }
    }
});
