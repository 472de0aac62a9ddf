//! Devices other than disks: controllers, serial console, guest agent
//! channel, VNC and video, input, memory balloon, RNG.

use api::vmi::Bus;
use api::VirtualMachineInstance;
use domain::{
    Alias, BalloonStats, Channel, ChannelTarget, CharLog, CharSource, Console, ConsoleTarget,
    Controller, Devices, Disk, Graphics, GraphicsListen, Input, MemBalloon, Rng, RngBackend,
    Serial, SerialTarget, Video, VideoModel,
};

use crate::arch::caps;
use crate::{ConvertContext, ConvertError};

/// Name of the guest agent's virtio-serial port.
pub const GUEST_AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";
/// Longest Unix socket path (`sun_path` is 108 bytes with the NUL).
pub const MAX_SOCKET_PATH: usize = 107;
/// Annotation that turns free page reporting off.
pub const FREE_PAGE_REPORTING_DISABLED: &str = "kubevirt.io/free-page-reporting-disabled";

/// The per-VMI socket directory: `<private-dir>/<uid>` (keyed by UID so the
/// paths stay short whatever the name; KubeVirt issue 1222).
pub fn socket_dir(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> String {
    format!(
        "{}/{}",
        ctx.paths.private_dir.trim_end_matches('/'),
        vmi.uid()
    )
}

/// The serial console socket QEMU listens on: `<socket-dir>/virt-serial0`.
pub fn serial_socket(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> String {
    format!("{}/virt-serial0", socket_dir(vmi, ctx))
}

/// The serial console log: `<socket-dir>/virt-serial0-log`.
pub fn serial_log(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> String {
    format!("{}/virt-serial0-log", socket_dir(vmi, ctx))
}

/// The VNC socket: `<socket-dir>/virt-vnc`.
pub fn vnc_socket(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> String {
    format!("{}/virt-vnc", socket_dir(vmi, ctx))
}

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
    let spec = &vmi.spec.domain.devices;
    let mut dev = Devices::default();

    for (i, input) in spec.inputs.iter().enumerate() {
        let path = format!("spec.domain.devices.inputs[{i}]");
        if input.input_type != "tablet" {
            return Err(ConvertError::invalid(
                format!("{path}.type"),
                format!("{:?} is not supported: only tablet", input.input_type),
            ));
        }
        let model = match input.bus.as_str() {
            "usb" => None,
            "virtio" => Some("virtio".to_owned()),
            other => {
                return Err(ConvertError::invalid(
                    format!("{path}.bus"),
                    format!("{other:?} is not supported: use usb or virtio"),
                ))
            }
        };
        if input.bus == "usb" && caps.usb_unsupported {
            return Err(ConvertError::invalid(
                format!("{path}.bus"),
                format!("usb is not available on {}", ctx.arch),
            ));
        }
        crate::xml_text(&format!("{path}.name"), &input.name)?;
        dev.input.push(Input {
            input_type: "tablet".into(),
            bus: Some(input.bus.clone()),
            model,
            alias: Some(Alias::user(&input.name)),
        });
    }

    if spec.autoattach_graphics_device != Some(false) {
        dev.graphics.push(Graphics {
            graphics_type: "vnc".into(),
            listen: vec![GraphicsListen {
                listen_type: "socket".into(),
                socket: Some(socket(vnc_socket(vmi, ctx))?),
            }],
        });
        dev.video.push(Video {
            model: VideoModel {
                model_type: caps.video_model.into(),
                heads: Some(1),
                vram: (caps.video_model == "vga").then_some(16384),
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

    let usb_needed = caps.usb_always
        || dev.input.iter().any(|i| i.bus.as_deref() == Some("usb"))
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
    dev.controller.push(Controller {
        controller_type: "virtio-serial".into(),
        index: "0".into(),
        model: Some(caps.virtio_model.into()),
        ..Controller::default()
    });
    let scsi_disk = disks
        .iter()
        .any(|d| d.target.bus.as_deref() == Some(Bus::Scsi.as_str()));
    if scsi_disk || !spec.disable_hotplug {
        dev.controller.push(Controller {
            controller_type: "scsi".into(),
            index: "0".into(),
            model: Some(
                if caps.virtio_model == "virtio" {
                    "virtio-scsi"
                } else {
                    caps.virtio_model
                }
                .into(),
            ),
            ..Controller::default()
        });
    }

    if spec.autoattach_serial_console != Some(false) {
        let log = ctx.serial_console_log && spec.log_serial_console != Some(false);
        dev.serial.push(Serial {
            serial_type: "unix".into(),
            target: Some(SerialTarget { port: 0 }),
            source: Some(CharSource {
                mode: Some("bind".into()),
                path: Some(socket(serial_socket(vmi, ctx))?),
            }),
            log: log.then(|| CharLog {
                file: serial_log(vmi, ctx),
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
            model: caps.virtio_model.into(),
            free_page_reporting: Some(if disabled { "off" } else { "on" }.into()),
            stats: (ctx.mem_balloon_stats_period != 0).then_some(BalloonStats {
                period: ctx.mem_balloon_stats_period,
            }),
            alias: None,
        }
    });

    if spec.rng.is_some() {
        dev.rng.push(Rng {
            model: caps.virtio_model.into(),
            backend: RngBackend {
                model: "random".into(),
                source: "/dev/urandom".into(),
            },
        });
    }
    Ok(dev)
}
