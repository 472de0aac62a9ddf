//! The named values of the VMI's string fields, one enum per field type
//! (KubeVirt's Go string types and their constants); see
//! `string_enum.rs` for how unknown values are kept.

string_enum! {
    /// `spec.startStrategy` (KubeVirt `StartStrategy`).
    pub enum StartStrategy {
        /// The domain is defined and started paused, with a boot menu
        /// (`StartStrategyPaused`).
        Paused = "Paused",
    }
}

string_enum! {
    /// `cpu.features[].policy`: libvirt's CPU feature policies.
    #[derive(Default)]
    pub enum CpuFeaturePolicy {
        /// Empty or absent: `require`.
        #[default]
        Unset = "",
        /// Enabled whatever the host supports.
        Force = "force",
        /// Enabled; the guest does not start without it.
        Require = "require",
        /// Enabled when the host supports it.
        Optional = "optional",
        /// Disabled.
        Disable = "disable",
        /// Disabled; the guest does not start when the host has it.
        Forbid = "forbid",
    }
}

string_enum! {
    /// `spec.domain.ioThreadsPolicy` (KubeVirt `IOThreadsPolicy`).
    pub enum IoThreadsPolicy {
        /// One thread shared by all disks without a dedicated one (the
        /// default when a disk asks for a dedicated thread).
        Shared = "shared",
        /// Up to two threads per requested CPU.
        Auto = "auto",
        /// `ioThreads.supplementalPoolThreadCount` threads, each virtio
        /// disk on all of them.
        SupplementalPool = "supplementalPool",
    }
}

string_enum! {
    /// `timer.<timer>.tickPolicy`: what a timer does with missed ticks.
    pub enum TickPolicy {
        /// Empty: no policy (libvirt's default).
        Unset = "",
        /// Deliver them late, at the normal rate.
        Delay = "delay",
        /// Deliver them faster until caught up.
        Catchup = "catchup",
        /// Merge them into one.
        Merge = "merge",
        /// Drop them.
        Discard = "discard",
    }
}

string_enum! {
    /// `timer.rtc.track`: the time the RTC follows.
    pub enum TimerTrack {
        /// Empty: libvirt's default.
        Unset = "",
        /// The guest's time.
        Guest = "guest",
        /// The host's wall clock.
        Wall = "wall",
    }
}

string_enum! {
    /// `watchdog.<model>.action`: what the watchdog does when it fires.
    #[derive(Default)]
    pub enum WatchdogAction {
        /// Empty or absent: `reset`.
        #[default]
        Unset = "",
        /// Power the guest off.
        Poweroff = "poweroff",
        /// Reset the guest (KubeVirt's default).
        Reset = "reset",
        /// Shut the guest down gracefully.
        Shutdown = "shutdown",
    }
}

string_enum! {
    /// `sound.model`.
    #[derive(Default)]
    pub enum SoundModel {
        /// Empty or absent: `ich9`.
        #[default]
        Unset = "",
        /// Intel ICH9 HD audio.
        Ich9 = "ich9",
        /// AC'97.
        Ac97 = "ac97",
    }
}

string_enum! {
    /// `video.type`: libvirt's video model (which ones an architecture has
    /// is the converter's `ArchCaps::video_models`).
    #[derive(Default)]
    pub enum VideoType {
        /// Empty or absent (refused: a video device names its type).
        #[default]
        Unset = "",
        /// Standard VGA.
        Vga = "vga",
        /// virtio-gpu.
        Virtio = "virtio",
        /// Bochs display (EFI guests).
        Bochs = "bochs",
        /// Cirrus Logic.
        Cirrus = "cirrus",
        /// A RAM framebuffer (arm64).
        Ramfb = "ramfb",
    }
}

string_enum! {
    /// `inputs[].bus`.
    #[derive(Default)]
    pub enum InputBus {
        /// Empty or absent: defaulted to `usb`.
        #[default]
        Unset = "",
        /// USB.
        Usb = "usb",
        /// virtio-input.
        Virtio = "virtio",
    }
}

string_enum! {
    /// `inputs[].type`.
    #[derive(Default)]
    pub enum InputType {
        /// Empty or absent: defaulted to `tablet`.
        #[default]
        Unset = "",
        /// A tablet (absolute pointer), the only type KubeVirt supports.
        Tablet = "tablet",
    }
}

string_enum! {
    /// `cdrom.tray` (KubeVirt `TrayState`).
    pub enum Tray {
        /// The tray is open: no medium (hot-plug of a CD-ROM's volume).
        Open = "open",
        /// The tray is closed (KubeVirt's default).
        Closed = "closed",
    }
}

string_enum! {
    /// `hostDisk.type` (KubeVirt `HostDiskType`).
    #[derive(Default)]
    pub enum HostDiskType {
        /// Empty or absent (refused by validation).
        #[default]
        Unset = "",
        /// The image must exist.
        Disk = "Disk",
        /// The image is created, of `capacity`, when it does not exist.
        DiskOrCreate = "DiskOrCreate",
    }
}

string_enum! {
    /// `interfaces[].model`: the NIC model KubeVirt accepts (default
    /// `virtio`), in its order of `validateInterfaceModel`'s message.
    pub enum InterfaceModel {
        /// Intel 82540EM.
        E1000 = "e1000",
        /// Intel 82574L.
        E1000e = "e1000e",
        /// Intel 82576.
        Igb = "igb",
        /// NE2000 PCI.
        Ne2kPci = "ne2k_pci",
        /// AMD PCnet.
        Pcnet = "pcnet",
        /// Realtek 8139.
        Rtl8139 = "rtl8139",
        /// virtio-net (the default).
        Virtio = "virtio",
    }
}

string_enum! {
    /// `interfaces[].state` (KubeVirt `InterfaceState`).
    pub enum InterfaceState {
        /// Empty: as `up`.
        Unset = "",
        /// Link up (the default).
        Up = "up",
        /// Link down (`<link state='down'/>`).
        Down = "down",
        /// Not attached: left out of the domain (hot-unplugged).
        Absent = "absent",
    }
}
