//! Devices other than disks: controllers, serial console, guest agent
//! channel, VNC and video, input, memory balloon, RNG.

use api::vmi::{Bus, InputBus, InputType, SoundModel, WatchdogAction};
use api::VirtualMachineInstance;
use domain::{
    BalloonStats, Channel, ChannelTarget, CharLog, CharSource, Console, ConsoleTarget, Controller,
    Devices, Disk, Graphics, GraphicsListen, Input, MemBalloon, RedirDev, Rng, RngBackend, Serial,
    SerialTarget, Sound, Tpm, TpmBackend, Video, VideoModel, Vsock, VsockCid, Watchdog,
};

use crate::arch::caps;
use crate::{ConvertContext, ConvertError};

/// Name of the guest agent's virtio-serial port.
pub const GUEST_AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";
/// Longest Unix socket path (`sun_path` is 108 bytes with the NUL).
pub const MAX_SOCKET_PATH: usize = 107;
/// The vsock device's model on every architecture and with
/// `useVirtioTransitional` (KubeVirt forces virtio 1.0 for vhost-vsock).
pub const VSOCK_MODEL: &str = "virtio-non-transitional";
/// Annotation that turns free page reporting off.
pub const FREE_PAGE_REPORTING_DISABLED: &str = "kubevirt.io/free-page-reporting-disabled";

fn socket(path: String) -> Result<String, ConvertError> {
    if path.len() > MAX_SOCKET_PATH {
        return Err(ConvertError::Host(format!(
            "socket path {path} is {} bytes, over the {MAX_SOCKET_PATH}-byte limit of Unix sockets",
            path.len()
        )));
    }
    Ok(path)
}

/// All non-disk devices (`disk` is filled by the caller).
///
/// # Errors
/// [`ConvertError::Invalid`] for an input that is not a tablet on usb or
/// virtio; [`ConvertError::Host`] for a missing UID or an over-long socket.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    disks: &[Disk],
) -> Result<Devices, ConvertError> {
    if vmi.uid().is_empty() {
        return Err(ConvertError::invalid(
            "metadata.uid",
            "required: the console and VNC sockets live in a directory named after it",
        ));
    }
    let caps = caps(ctx.arch);
    let virtio = crate::arch::virtio_model(caps, vmi);
    let spec = &vmi.spec.domain.devices;
    let mut dev = Devices::default();

    for (i, input) in spec.inputs.iter().enumerate() {
        let path = format!("spec.domain.devices.inputs[{i}]");
        if input.input_type != InputType::Tablet {
            return Err(ConvertError::invalid(
                format!("{path}.type"),
                format!(
                    "{:?} is not supported: only tablet",
                    input.input_type.as_str()
                ),
            ));
        }
        let model = match &input.bus {
            InputBus::Usb => None,
            InputBus::Virtio => Some("virtio".to_owned()),
            other => {
                return Err(ConvertError::invalid(
                    format!("{path}.bus"),
                    format!("{:?} is not supported: use usb or virtio", other.as_str()),
                ))
            }
        };
        if input.bus == InputBus::Usb && caps.usb_unsupported {
            return Err(ConvertError::invalid(
                format!("{path}.bus"),
                format!("usb is not available on {}", ctx.arch),
            ));
        }
        let alias = crate::user_alias(&format!("{path}.name"), &input.name)?;
        dev.input.push(Input {
            input_type: "tablet".into(),
            bus: Some(input.bus.as_str().to_owned()),
            model,
            alias: Some(alias),
        });
    }

    if spec.autoattach_graphics_device != Some(false) {
        dev.graphics.push(Graphics {
            graphics_type: "vnc".into(),
            listen: vec![GraphicsListen {
                listen_type: "socket".into(),
                socket: Some(socket(ctx.paths.vnc_socket(vmi))?),
            }],
        });
        let model = match spec.video.as_ref() {
            Some(v) => {
                if !caps.video_models.contains(&v.video_type.as_str()) {
                    return Err(ConvertError::invalid(
                        "spec.domain.devices.video.type",
                        format!(
                            "{:?} is not supported on {}: use one of {}",
                            v.video_type.as_str(),
                            ctx.arch,
                            caps.video_models.join(", ")
                        ),
                    ));
                }
                v.video_type.as_str()
            }
            None => caps.video_model,
        };
        // KubeVirt: an EFI guest's default display is Bochs on amd64 (the
        // cluster's BochsDisplayForEFIGuests, on by default), without vram.
        let efi_default =
            spec.video.is_none() && ctx.bochs_for_efi_guests && crate::os::names_efi(vmi);
        let (model, vram) = match caps.efi_video_model.filter(|_| efi_default) {
            Some(m) => (m, None),
            None => (
                model,
                matches!(model, "vga" | "cirrus" | "bochs").then_some(VIDEO_VRAM_KIB),
            ),
        };
        dev.video.push(Video {
            model: VideoModel {
                model_type: model.into(),
                heads: Some(1),
                vram,
            },
        });
        for (kind, bus) in caps.graphics_inputs {
            if !dev.input.iter().any(|i| i.input_type == *kind) {
                dev.input.push(Input {
                    input_type: (*kind).into(),
                    bus: Some((*bus).into()),
                    model: None,
                    alias: None,
                });
            }
        }
    }

    if spec.video.is_some() && spec.autoattach_graphics_device == Some(false) {
        return Err(ConvertError::invalid(
            "spec.domain.devices.video",
            "needs the graphics device, but spec.domain.devices.autoattachGraphicsDevice is false",
        ));
    }

    if spec.client_passthrough.is_some() {
        if caps.usb_unsupported {
            return Err(ConvertError::invalid(
                "spec.domain.devices.clientPassthrough",
                format!(
                    "USB redirection needs USB, which {} does not have",
                    ctx.arch
                ),
            ));
        }
        for i in 0..USB_REDIR_DEVICES {
            dev.redirdev.push(RedirDev {
                redir_type: "unix".into(),
                bus: "usb".into(),
                source: Some(CharSource {
                    mode: Some("bind".into()),
                    path: Some(socket(ctx.paths.usbredir_socket(vmi, i))?),
                }),
            });
        }
    }

    let usb_needed = caps.usb_always
        || !dev.redirdev.is_empty()
        || dev.input.iter().any(|i| i.bus.as_deref() == Some("usb"))
        || crate::hostdevices::usb_found(vmi, ctx)
        || disks
            .iter()
            .any(|d| d.target.bus.as_deref() == Some(Bus::Usb.as_str()));
    dev.controller.push(Controller {
        controller_type: "usb".into(),
        index: "0".into(),
        model: Some(
            if usb_needed && !caps.usb_unsupported {
                "qemu-xhci"
            } else {
                "none"
            }
            .into(),
        ),
        ..Controller::default()
    });
    // KubeVirt's order: usb, scsi, then virtio-serial (libvirt gives PCI
    // slots in this order, so it is guest-visible).
    let scsi_disk = disks
        .iter()
        .any(|d| d.target.bus.as_deref() == Some(Bus::Scsi.as_str()));
    if scsi_disk || !spec.disable_hotplug {
        dev.controller.push(Controller {
            controller_type: "scsi".into(),
            index: "0".into(),
            model: Some(
                if virtio == "virtio" {
                    "virtio-scsi"
                } else {
                    virtio
                }
                .into(),
            ),
            ..Controller::default()
        });
    }

    if spec.autoattach_serial_console != Some(false) {
        // With the serial console only, as KubeVirt: without it libvirt
        // adds the controller the guest agent channel needs itself.
        dev.controller.push(Controller {
            controller_type: "virtio-serial".into(),
            index: "0".into(),
            model: Some(virtio.into()),
            ..Controller::default()
        });
        let log = ctx.serial_console_log && spec.log_serial_console != Some(false);
        dev.serial.push(Serial {
            serial_type: "unix".into(),
            target: Some(SerialTarget { port: 0 }),
            source: Some(CharSource {
                mode: Some("bind".into()),
                path: Some(socket(ctx.paths.serial_socket(vmi))?),
            }),
            log: log.then(|| CharLog {
                file: ctx.paths.serial_log(vmi),
                append: Some("on".into()),
            }),
            alias: None,
        });
        dev.console.push(Console {
            console_type: "pty".into(),
            target: Some(ConsoleTarget {
                target_type: Some("serial".into()),
                port: Some(0),
            }),
        });
    }

    dev.channel.push(Channel {
        channel_type: "unix".into(),
        source: None,
        target: ChannelTarget {
            target_type: "virtio".into(),
            name: Some(GUEST_AGENT_CHANNEL.into()),
            state: None,
        },
    });
    if spec.downward_metrics.is_some() {
        dev.channel.push(Channel {
            channel_type: "unix".into(),
            source: Some(CharSource {
                mode: Some("bind".into()),
                path: Some(socket(ctx.paths.downward_metrics_socket())?),
            }),
            target: ChannelTarget {
                target_type: "virtio".into(),
                name: Some(DOWNWARD_METRICS_CHANNEL.into()),
                state: None,
            },
        });
    }

    dev.memballoon = Some(if spec.autoattach_mem_balloon == Some(false) {
        MemBalloon {
            model: "none".into(),
            ..MemBalloon::default()
        }
    } else {
        let cpu = vmi.spec.domain.cpu.as_ref();
        let high_performance = cpu
            .is_some_and(|c| c.dedicated_cpu_placement || c.realtime.is_some())
            || vmi
                .spec
                .domain
                .memory
                .as_ref()
                .is_some_and(|m| m.hugepages.is_some());
        let disabled = !ctx.free_page_reporting
            || high_performance
            || vmi
                .metadata
                .annotations
                .get(FREE_PAGE_REPORTING_DISABLED)
                .is_some_and(|v| v == "true");
        MemBalloon {
            model: virtio.into(),
            free_page_reporting: Some(if disabled { "off" } else { "on" }.into()),
            stats: (ctx.mem_balloon_stats_period != 0).then_some(BalloonStats {
                period: ctx.mem_balloon_stats_period,
            }),
            alias: None,
        }
    });

    if spec.rng.is_some() {
        dev.rng.push(Rng {
            model: virtio.into(),
            backend: RngBackend {
                model: "random".into(),
                source: "/dev/urandom".into(),
            },
        });
    }
    if let Some(w) = &spec.watchdog {
        dev.watchdog.push(watchdog(w, ctx, caps)?);
    }
    if let Some(t) = &spec.tpm {
        if t.enabled != Some(false) {
            if !caps.tpm {
                return Err(ConvertError::invalid(
                    "spec.domain.devices.tpm",
                    format!("a TPM is not supported on {}", ctx.arch),
                ));
            }
            // A persistent TPM keeps its swtpm state (on KubeVirt's backend
            // storage) and uses the CRB interface (kubevirt-facts §5 TPM).
            let persistent = t.persistent == Some(true);
            dev.tpm.push(Tpm {
                model: if persistent { "tpm-crb" } else { "tpm-tis" }.into(),
                backend: TpmBackend {
                    backend_type: "emulator".into(),
                    version: Some("2.0".into()),
                    persistent_state: persistent.then(|| "yes".into()),
                },
            });
        }
    }
    if let Some(s) = &spec.sound {
        let path = "spec.domain.devices.sound";
        if !caps.sound {
            return Err(ConvertError::invalid(
                path,
                format!("sound is not supported on {}", ctx.arch),
            ));
        }
        let model = match &s.model {
            SoundModel::Unset | SoundModel::Ich9 => SoundModel::Ich9.as_str(),
            SoundModel::Ac97 => SoundModel::Ac97.as_str(),
            SoundModel::Other(other) => {
                return Err(ConvertError::invalid(
                    format!("{path}.model"),
                    format!("{other:?} is not supported: use ich9 or ac97"),
                ))
            }
        };
        let alias = crate::user_alias(&format!("{path}.name"), &s.name)?;
        dev.sound.push(Sound {
            model: model.into(),
            alias: (!s.name.is_empty()).then_some(alias),
        });
    }
    if let Some(cid) = vsock_cid(vmi)? {
        dev.vsock = Some(Vsock {
            // Always virtio 1.0, whatever useVirtioTransitional says, as
            // KubeVirt: QEMU's vhost-vsock-pci has no legacy mode.
            model: Some(VSOCK_MODEL.into()),
            cid: VsockCid {
                auto: "no".into(),
                address: cid,
            },
        });
    } else if spec.autoattach_vsock == Some(true) {
        return Err(ConvertError::invalid(
            "spec.domain.devices.autoattachVSOCK",
            "needs status.vsockCID (virt-controller assigns it); set it in the VMI's status",
        ));
    }
    Ok(dev)
}

/// Number of USB redirection channels `clientPassthrough` adds.
pub const USB_REDIR_DEVICES: usize = 4;
/// Video RAM of the autoattached VGA-style adapters, in KiB.
pub const VIDEO_VRAM_KIB: u32 = 16384;
/// Guest port name of the downward metrics channel (vhostmd).
pub const DOWNWARD_METRICS_CHANNEL: &str = "org.github.vhostmd.1";

/// `status.vsockCID`, when virt-controller assigned one.
///
/// # Errors
/// [`ConvertError::Invalid`] for a CID that is not a number from 3 to 2³²−2.
pub fn vsock_cid(vmi: &VirtualMachineInstance) -> Result<Option<u32>, ConvertError> {
    let Some(v) = vmi.status.as_ref().and_then(|s| s.get("vsockCID")) else {
        return Ok(None);
    };
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (3..u32::MAX).contains(n))
        .map(Some)
        .ok_or_else(|| {
            ConvertError::invalid(
                "status.vsockCID",
                format!("{v} is not a CID from 3 to 4294967294"),
            )
        })
}

/// `<watchdog model=… action=…>` with alias `ua-<name>`: i6300esb on
/// amd64, diag288 on s390x; action `reset` by default.
fn watchdog(
    w: &api::vmi::Watchdog,
    ctx: &ConvertContext,
    caps: &crate::arch::ArchCaps,
) -> Result<Watchdog, ConvertError> {
    let path = "spec.domain.devices.watchdog";
    let Some(model) = caps.watchdog else {
        return Err(ConvertError::invalid(
            path,
            format!("a watchdog is not supported on {}", ctx.arch),
        ));
    };
    let (given, settings) = match (&w.i6300esb, &w.diag288) {
        (Some(s), None) => ("i6300esb", s),
        (None, Some(s)) => ("diag288", s),
        _ => {
            return Err(ConvertError::invalid(
                path,
                format!(
                    "exactly one watchdog model is required ({model} on {})",
                    ctx.arch
                ),
            ))
        }
    };
    if given != model {
        return Err(ConvertError::invalid(
            format!("{path}.{given}"),
            format!("not supported on {}: use {model}", ctx.arch),
        ));
    }
    let action = match &settings.action {
        WatchdogAction::Unset => WatchdogAction::Reset.as_str(),
        a @ (WatchdogAction::Reset | WatchdogAction::Poweroff | WatchdogAction::Shutdown) => {
            a.as_str()
        }
        WatchdogAction::Other(other) => {
            return Err(ConvertError::invalid(
                format!("{path}.{given}.action"),
                format!("{other:?} is not one of poweroff, reset, shutdown"),
            ))
        }
    };
    if w.name.is_empty() {
        return Err(ConvertError::invalid(format!("{path}.name"), "required"));
    }
    let alias = crate::user_alias(&format!("{path}.name"), &w.name)?;
    Ok(Watchdog {
        model: model.into(),
        action: Some(action.into()),
        alias: Some(alias),
    })
}

#[cfg(test)]
mod tests {
    use api::Arch;

    use crate::{convert, ConvertContext, ConvertError, VirtType};

    fn conv(devices: &str, extra: &str, arch: Arch) -> Result<domain::Domain, ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: d, uid: u1}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    devices:\n{devices}{extra}"
        );
        let v = api::load_vmi(doc.as_bytes(), arch).unwrap();
        convert(&v, &ConvertContext::new(arch, VirtType::Kvm))
    }

    fn xml(devices: &str, extra: &str, arch: Arch) -> String {
        conv(devices, extra, arch).unwrap().to_xml().unwrap()
    }

    fn err(devices: &str, extra: &str, arch: Arch) -> String {
        conv(devices, extra, arch).unwrap_err().to_string()
    }

    #[test]
    fn watchdog_per_arch() {
        let x = xml("      watchdog: {name: w, i6300esb: {}}\n", "", Arch::Amd64);
        assert!(
            x.contains(
                "<watchdog model=\"i6300esb\" action=\"reset\">\n      <alias name=\"ua-w\"/>"
            ),
            "{x}"
        );
        let x = xml(
            "      watchdog: {name: w, diag288: {action: poweroff}}\n",
            "",
            Arch::S390x,
        );
        assert!(
            x.contains("<watchdog model=\"diag288\" action=\"poweroff\">"),
            "{x}"
        );
        assert_eq!(
            err("      watchdog: {name: w, i6300esb: {}}\n", "", Arch::Arm64),
            "spec.domain.devices.watchdog: a watchdog is not supported on arm64"
        );
        assert_eq!(
            err("      watchdog: {name: w, diag288: {}}\n", "", Arch::Amd64),
            "spec.domain.devices.watchdog.diag288: not supported on amd64: use i6300esb"
        );
        assert_eq!(
            err("      watchdog: {name: w, i6300esb: {action: explode}}\n", "", Arch::Amd64),
            "spec.domain.devices.watchdog.i6300esb.action: \"explode\" is not one of poweroff, reset, shutdown"
        );
    }

    #[test]
    fn persistent_tpm_is_crb_with_persistent_state() {
        let x = xml("      tpm: {persistent: true}\n", "", Arch::Amd64);
        assert!(
            x.contains(
                "<tpm model=\"tpm-crb\">\n      <backend type=\"emulator\" version=\"2.0\" persistent_state=\"yes\"/>"
            ),
            "{x}"
        );
    }

    #[test]
    fn tpm_sound_and_usb_redirection() {
        let x = xml(
            "      tpm: {}\n      sound: {name: audio}\n      clientPassthrough: {}\n",
            "",
            Arch::Amd64,
        );
        assert!(
            x.contains(
                "<tpm model=\"tpm-tis\">\n      <backend type=\"emulator\" version=\"2.0\"/>"
            ),
            "{x}"
        );
        assert!(
            x.contains("<sound model=\"ich9\">\n      <alias name=\"ua-audio\"/>"),
            "{x}"
        );
        assert_eq!(
            x.matches("<redirdev type=\"unix\" bus=\"usb\">").count(),
            4,
            "{x}"
        );
        assert!(
            x.contains("path=\"/var/run/kubevirt-private/u1/virt-usbredir-3\""),
            "{x}"
        );
        // USB redirection needs the xHCI controller.
        assert!(
            x.contains("<controller type=\"usb\" index=\"0\" model=\"qemu-xhci\"/>"),
            "{x}"
        );
        let x = xml(
            "      tpm: {enabled: false}\n      sound: {name: a, model: ac97}\n",
            "",
            Arch::Amd64,
        );
        assert!(!x.contains("<tpm"), "{x}");
        assert!(x.contains("<sound model=\"ac97\">"), "{x}");
        assert_eq!(
            err("      sound: {name: a, model: sb16}\n", "", Arch::Amd64),
            "spec.domain.devices.sound.model: \"sb16\" is not supported: use ich9 or ac97"
        );
        assert_eq!(
            err("      clientPassthrough: {}\n", "", Arch::S390x),
            "spec.domain.devices.clientPassthrough: USB redirection needs USB, which s390x does not have"
        );
    }

    #[test]
    fn vsock_downward_metrics_video_and_transitional_models() {
        let x = xml(
            "      downwardMetrics: {}\n      video: {type: virtio}\n      useVirtioTransitional: true\n      rng: {}\n",
            "status: {vsockCID: 7}\n",
            Arch::Amd64,
        );
        // vhost-vsock is always virtio 1.0 (KubeVirt forces it).
        assert!(
            x.contains(
                "<vsock model=\"virtio-non-transitional\">\n      <cid auto=\"no\" address=\"7\"/>"
            ),
            "{x}"
        );
        assert!(x.contains("<source mode=\"bind\" path=\"/var/run/kubevirt-private/downwardmetrics-channel/downwardmetrics.sock\"/>\n      <target type=\"virtio\" name=\"org.github.vhostmd.1\"/>"), "{x}");
        assert!(x.contains("<model type=\"virtio\" heads=\"1\"/>"), "{x}");
        assert_eq!(x.matches("non-transitional").count(), 1, "{x}");
        assert!(x.contains("<rng model=\"virtio-transitional\">"), "{x}");
        assert!(
            x.contains("<memballoon model=\"virtio-transitional\""),
            "{x}"
        );
        // s390x keeps plain virtio.
        let x = xml("      useVirtioTransitional: true\n", "", Arch::S390x);
        assert!(!x.contains("transitional"), "{x}");
        assert_eq!(
            err("      video: {type: cirrus}\n", "", Arch::Arm64),
            "spec.domain.devices.video.type: \"cirrus\" is not supported on arm64: use one of virtio, ramfb"
        );
        assert_eq!(
            err("      autoattachVSOCK: true\n", "", Arch::Amd64),
            "spec.domain.devices.autoattachVSOCK: needs status.vsockCID (virt-controller assigns it); set it in the VMI's status"
        );
        assert_eq!(
            err("      rng: {}\n", "status: {vsockCID: 2}\n", Arch::Amd64),
            "status.vsockCID: 2 is not a CID from 3 to 4294967294"
        );
    }

    /// KubeVirt v1.6.6 `AddGraphicsDevice`: an amd64 guest naming an EFI
    /// boot loader gets the Bochs display (no vram) while the cluster's
    /// BochsDisplayForEFIGuests is on; a video type of its own, BIOS,
    /// the option off, or another architecture keep the usual model.
    #[test]
    fn efi_guests_get_the_bochs_display_on_amd64() {
        let efi = "    firmware:\n      bootloader: {efi: {secureBoot: false}}\n";
        let x = xml("      disks: []\n", efi, Arch::Amd64);
        assert!(x.contains("<model type=\"bochs\" heads=\"1\"/>"), "{x}");
        let x = xml("      video: {type: vga}\n", efi, Arch::Amd64);
        assert!(
            x.contains("<model type=\"vga\" heads=\"1\" vram=\"16384\"/>"),
            "{x}"
        );
        let x = xml("      disks: []\n", "", Arch::Amd64);
        assert!(
            x.contains("<model type=\"vga\" heads=\"1\" vram=\"16384\"/>"),
            "{x}"
        );
        let x = xml("      disks: []\n", efi, Arch::Arm64);
        assert!(x.contains("<model type=\"virtio\" heads=\"1\"/>"), "{x}");
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: d, uid: u1}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n{efi}");
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
        ctx.bochs_for_efi_guests = false;
        let x = convert(&v, &ctx).unwrap().to_xml().unwrap();
        assert!(
            x.contains("<model type=\"vga\" heads=\"1\" vram=\"16384\"/>"),
            "{x}"
        );
    }

    /// Controllers in KubeVirt's order (usb, scsi, virtio-serial: libvirt
    /// gives PCI slots in that order); without the serial console no
    /// virtio-serial controller is written (libvirt adds the one the guest
    /// agent channel needs, as for KubeVirt's domain).
    #[test]
    fn controllers_in_kubevirts_order_and_virtio_serial_with_the_console() {
        let order = |devices: &str| -> Vec<String> {
            conv(devices, "", Arch::Amd64)
                .unwrap()
                .devices
                .controller
                .iter()
                .map(|c| c.controller_type.clone())
                .collect()
        };
        assert_eq!(order("      disks: []\n"), ["usb", "scsi", "virtio-serial"]);
        assert_eq!(
            order("      autoattachSerialConsole: false\n"),
            ["usb", "scsi"]
        );
        let x = xml("      autoattachSerialConsole: false\n", "", Arch::Amd64);
        assert!(x.contains("org.qemu.guest_agent.0"), "{x}");
        assert!(!x.contains("<serial"), "{x}");
    }

    #[test]
    fn virtiofs_filesystems_share_memfd_memory() {
        let x = xml(
            "      filesystems:\n      - {name: share, virtiofs: {}}\n",
            "  volumes:\n  - {name: share, persistentVolumeClaim: {claimName: c}}\n",
            Arch::Amd64,
        );
        assert!(x.contains("<filesystem type=\"mount\" accessmode=\"passthrough\">\n      <driver type=\"virtiofs\" queue=\"1024\"/>\n      <source socket=\"/var/run/kubevirt/virtiofs-containers/share.sock\"/>\n      <target dir=\"share\"/>"), "{x}");
        assert!(x.contains("<access mode=\"shared\"/>"), "{x}");
        assert!(x.contains("<source type=\"memfd\"/>"), "{x}");
        assert!(x.contains("<cell id=\"0\" cpus=\"0-0\""), "{x}");
        // The shared volume is not also a disk.
        assert!(!x.contains("<disk"), "{x}");
        assert_eq!(
            err(
                "      filesystems:\n      - {name: nope, virtiofs: {}}\n",
                "",
                Arch::Amd64
            ),
            "spec.domain.devices.filesystems[0].name: volume \"nope\" not found in spec.volumes"
        );
    }
}
