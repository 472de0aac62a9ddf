//! What the command server asks of the launcher ([`Handler`]) and the
//! settings virt-handler sends with a sync ([`SyncOptions`]); the server
//! is [`crate::server`].

use api::VirtualMachineInstance;

use crate::error::CommandError;

/// Settings virt-handler sends with SyncVirtualMachine
/// (`VirtualMachineOptions`), the parts the launcher uses today.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// SMBIOS system fields (manufacturer, family, product, sku, version).
    pub smbios: Option<[String; 5]>,
    /// Balloon statistics period in seconds.
    pub mem_balloon_stats_period: u32,
    /// Volumes that are preallocated (no discard).
    pub preallocated_volumes: Vec<String>,
    /// Cluster: free page reporting disabled.
    pub free_page_reporting_disabled: bool,
    /// Cluster: serial console log disabled.
    pub serial_console_log_disabled: bool,
    /// Cluster: EFI guests get the Bochs display
    /// (`ClusterConfig.BochsDisplayForEFIGuests`; false without a
    /// ClusterConfig, as KubeVirt's launcher reads it).
    pub bochs_display_for_efi_guests: bool,
    /// Cluster: the ExpandDisks feature gate (`ClusterConfig.ExpandDisksEnabled`,
    /// or the deprecated top-level `ExpandDisksEnabled` of older handlers).
    pub expand_disks_enabled: bool,
    /// `interfaceMigration`: each binding plugin interface's migration
    /// method (e.g. `link-refresh`), by interface name.
    pub interface_migration: std::collections::BTreeMap<String, String>,
}

/// What the server asks of the launcher. Errors are [`CommandError`]s,
/// whose text virt-handler sees in `Response.message` (libvirt's as
/// `LibvirtError(Code=.., Domain=.., Message='..')`). Methods block; the
/// server calls them on tokio's blocking pool.
pub trait Handler: Send + Sync + 'static {
    /// UID of the VMI this launcher runs (requests for another are refused).
    fn vmi_uid(&self) -> String;
    /// SyncVMI: prepare, convert, define, start (idempotent).
    ///
    /// # Errors
    /// [`CommandError`].
    fn sync(&self, vmi: &VirtualMachineInstance, opts: &SyncOptions) -> Result<(), CommandError>;
    /// SyncVirtualMachineCPUs: the running domain's vCPUs follow the VMI's
    /// CPU topology (hot-plug and unplug). Without an implementation,
    /// "not supported yet".
    ///
    /// # Errors
    /// [`CommandError`].
    fn sync_cpus(
        &self,
        _vmi: &VirtualMachineInstance,
        _opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        Err(CommandError::not_supported("CPU hot-plug"))
    }
    /// HotplugHostDevices: attach the VMI's SR-IOV host devices the running
    /// domain lacks, asynchronously, one call at a time. Without an
    /// implementation, "not supported yet".
    ///
    /// # Errors
    /// [`CommandError`].
    fn hotplug_host_devices(&self, _vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        Err(CommandError::not_supported(
            "SR-IOV host device hot-plug (HotplugHostDevices)",
        ))
    }
    /// SyncVirtualMachineMemory: the running domain's guest memory follows
    /// `spec.domain.memory.guest` through its virtio-mem device. Without an
    /// implementation, "not supported yet".
    ///
    /// # Errors
    /// [`CommandError`].
    fn sync_memory(
        &self,
        _vmi: &VirtualMachineInstance,
        _opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        Err(CommandError::not_supported("memory hot-plug"))
    }
    /// Pause.
    ///
    /// # Errors
    /// [`CommandError`].
    fn pause(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError>;
    /// Unpause.
    ///
    /// # Errors
    /// [`CommandError`].
    fn unpause(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError>;
    /// Hard reset.
    ///
    /// # Errors
    /// [`CommandError`].
    fn reset(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError>;
    /// Guest-cooperative reboot (ACPI until the guest agent is used).
    ///
    /// # Errors
    /// [`CommandError`].
    fn soft_reboot(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError>;
    /// Graceful shutdown request (SignalShutdownVMI).
    ///
    /// # Errors
    /// [`CommandError`].
    fn shutdown(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError>;
    /// Immediate power-off.
    ///
    /// # Errors
    /// [`CommandError`].
    fn kill(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError>;
    /// Undefine.
    ///
    /// # Errors
    /// [`CommandError`].
    fn delete(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError>;
    /// The domain as KubeVirt's api.Domain JSON, `None` when there is none.
    ///
    /// # Errors
    /// [`CommandError`].
    fn domain_json(&self) -> Result<Option<String>, CommandError>;
    /// [`Handler::domain_json`] when it can be answered without blocking
    /// (from memory); `None` sends GetDomain to [`Handler::domain_json`]
    /// on a blocking thread.
    fn cached_domain_json(&self) -> Option<Option<String>> {
        None
    }
    /// KubeVirt's DomainStats JSON, `None` when no domain runs.
    ///
    /// # Errors
    /// [`CommandError`].
    fn domain_stats_json(&self) -> Result<Option<String>, CommandError>;
    /// `QEMU <major>.<minor>.<micro>`.
    ///
    /// # Errors
    /// [`CommandError`].
    fn qemu_version(&self) -> Result<String, CommandError>;
    /// GetGuestInfo: KubeVirt's `VirtualMachineInstanceGuestAgentInfo` JSON.
    /// Called on the gRPC runtime: answer from memory, never block (this
    /// and the two below).
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn guest_info_json(&self) -> Result<String, CommandError> {
        Err(CommandError::not_supported("guest agent information"))
    }
    /// GetUsers: a JSON array of `VirtualMachineInstanceGuestOSUser`.
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn users_json(&self) -> Result<String, CommandError> {
        Err(CommandError::not_supported("guest agent users"))
    }
    /// GetFilesystems: a JSON array of `VirtualMachineInstanceFileSystem`.
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn filesystems_json(&self) -> Result<String, CommandError> {
        Err(CommandError::not_supported("guest agent file systems"))
    }
    /// Exec: runs `command args` in the guest of domain `domain` through
    /// the agent, waiting up to `timeout`; (exit code, stdout).
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn exec(
        &self,
        domain: &str,
        command: &str,
        args: &[String],
        timeout: std::time::Duration,
    ) -> Result<(i32, String), CommandError> {
        let _ = (domain, command, args, timeout);
        Err(CommandError::not_supported("guest exec (guest agent)"))
    }
    /// GuestPing: `guest-ping` to domain `domain`'s agent within `timeout`.
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn guest_ping(&self, domain: &str, timeout: std::time::Duration) -> Result<(), CommandError> {
        let _ = (domain, timeout);
        Err(CommandError::not_supported("guest ping (guest agent)"))
    }
    /// Freeze the guest's file systems; thaw them by itself after
    /// `unfreeze_timeout` unless it is zero.
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn freeze(
        &self,
        vmi: &VirtualMachineInstance,
        unfreeze_timeout: std::time::Duration,
    ) -> Result<(), CommandError> {
        let _ = (vmi, unfreeze_timeout);
        Err(CommandError::not_supported(
            "file system freeze (guest agent)",
        ))
    }
    /// Thaw the guest's file systems.
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn unfreeze(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        let _ = vmi;
        Err(CommandError::not_supported(
            "file system thaw (guest agent)",
        ))
    }
    /// VirtualMachineMemoryDump: starts a memory-only core dump of the
    /// guest into `dump_path` (virt-handler's
    /// `/var/run/kubevirt/hotplug-disks/<volume>/<file>`) and returns at
    /// once; the dump runs in the background and its progress appears in
    /// the domain's `Spec.Metadata.KubeVirt.MemoryDump` (KubeVirt
    /// `MemoryDump`, kubevirt-facts §8.5). A request while a dump runs, or
    /// for the file name already recorded, succeeds and does nothing.
    ///
    /// # Errors
    /// A bad `dump_path` (one line naming `dumpPath`), or the dump could
    /// not be started (by default: not supported yet).
    fn memory_dump(
        &self,
        vmi: &VirtualMachineInstance,
        dump_path: &str,
    ) -> Result<(), CommandError> {
        let _ = (vmi, dump_path);
        Err(CommandError::not_supported("memory dump"))
    }
    /// GetDomainDirtyRateStats: the guest's memory dirty rate in MiB/s
    /// (`dirtyRateMbs`) from KubeVirt's 1 s page-sampling calculation,
    /// cached 3 s. Blocks for up to about 2 s (the calculation and its
    /// re-reads); the server calls it on the blocking pool.
    ///
    /// # Errors
    /// The failure message, e.g. KubeVirt's `Dirty rate
    /// MegabytesPerSecondSet is false` (by default: not supported yet).
    fn dirty_rate_mbs(&self) -> Result<i64, CommandError> {
        Err(CommandError::not_supported("dirty rate statistics"))
    }
    /// GetScreenshot: the primary display of `vmi`'s domain as a PNG
    /// (KubeVirt main `GetScreenshot`: libvirt's `virDomainScreenshot` of
    /// screen 0).
    ///
    /// # Errors
    /// libvirt's refusal, e.g. for a domain without a display
    /// (by default: not supported yet).
    fn screenshot(&self, vmi: &VirtualMachineInstance) -> Result<Screenshot, CommandError> {
        let _ = vmi;
        Err(CommandError::not_supported("screenshot"))
    }
    /// Whether GetVMStats is served: KubeVirt's launcher flag
    /// `--vm-stats-collector` (the VMStatsCollector feature gate).
    fn vm_stats_collector(&self) -> bool {
        false
    }
    /// The guest agent's version as the poller last read it (`guest-info`),
    /// empty when unknown (KubeVirt's `GetGuestAgentVersion`).
    fn guest_agent_version(&self) -> String {
        String::new()
    }
    /// One of GetVMStats' guest agent items: the agent's raw JSON reply to
    /// `{"execute":"<command>"}` for a command of [`AGENT_DATA_COMMANDS`],
    /// cached for upstream's time to live of that command. Blocks up to the
    /// agent's timeout.
    ///
    /// # Errors
    /// KubeVirt's `failed to get agent data for <command>: virError(...)`
    /// (by default: not supported yet).
    fn agent_data(&self, command: &str) -> Result<String, CommandError> {
        let _ = command;
        Err(CommandError::not_supported("guest agent data (GetVMStats)"))
    }
    /// GetSEVInfo: KubeVirt's `SEVPlatformInfo` JSON of this host.
    ///
    /// # Errors
    /// libvirt's refusal on a host without SEV (by default: not supported yet).
    fn sev_info(&self) -> Result<Vec<u8>, CommandError> {
        Err(CommandError::not_supported("SEV"))
    }
    /// GetLaunchMeasurement: KubeVirt's `SEVMeasurementInfo` JSON of
    /// `vmi`'s domain.
    ///
    /// # Errors
    /// As KubeVirt's (by default: not supported yet).
    fn launch_measurement(&self, vmi: &VirtualMachineInstance) -> Result<Vec<u8>, CommandError> {
        let _ = vmi;
        Err(CommandError::not_supported("SEV launch measurement"))
    }
    /// InjectLaunchSecret: KubeVirt's `SEVSecretOptions` (`header`,
    /// `secret`, both non-empty) into `vmi`'s domain.
    ///
    /// # Errors
    /// As KubeVirt's (by default: not supported yet).
    fn inject_launch_secret(
        &self,
        vmi: &VirtualMachineInstance,
        header: &str,
        secret: &str,
    ) -> Result<(), CommandError> {
        let _ = (vmi, header, secret);
        Err(CommandError::not_supported("SEV launch secret"))
    }
    /// MigrateVirtualMachine: starts the live migration of `vmi` (its
    /// `status.migrationState`) with virt-handler's `MigrationOptions`
    /// JSON `options` (never empty: the server answers KubeVirt's
    /// `migration options object not present in command server request`
    /// itself) and returns at once; the outcome is in the domain's
    /// `Spec.Metadata.KubeVirt.Migration`.
    ///
    /// # Errors
    /// KubeVirt's messages (`no valid migration options object present in
    /// command server request: ...`, `cannot migrate VMI until
    /// migrationState is ready`, ...; by default: not supported yet).
    fn migrate(&self, vmi: &VirtualMachineInstance, options: &[u8]) -> Result<(), CommandError> {
        let _ = (vmi, options);
        Err(CommandError::not_supported("live migration"))
    }
    /// BackupVirtualMachine (KubeVirt main): `options` is the
    /// `backupv1.BackupOptions` JSON (Start, Abort) for `vmi`, whose status
    /// must say changed block tracking is `Enabled`.
    ///
    /// # Errors
    /// KubeVirt's messages (`Backup failed ChangedBlockTracking is not
    /// enabled`, `no valid backup options object present in command server
    /// request: ...`, `backup b1 already in progress, need to wait for
    /// completion`, libvirt's; by default: not supported yet).
    fn backup(&self, vmi: &VirtualMachineInstance, options: &[u8]) -> Result<(), CommandError> {
        let _ = (vmi, options);
        Err(CommandError::not_supported("backup (BackupVirtualMachine)"))
    }
    /// RedefineCheckpoint (KubeVirt main): `checkpoint` is the
    /// `backupv1.BackupCheckpoint` JSON.
    ///
    /// # Errors
    /// `(checkpoint_invalid, error)`: `true` when the checkpoint's bitmaps
    /// are gone or libvirt finds them invalid (virt-handler then asks for a
    /// full backup); by default: not supported yet.
    fn redefine_checkpoint(
        &self,
        vmi: &VirtualMachineInstance,
        checkpoint: &[u8],
    ) -> Result<(), (bool, CommandError)> {
        let _ = (vmi, checkpoint);
        Err((
            false,
            CommandError::not_supported("backup checkpoints (RedefineCheckpoint)"),
        ))
    }
    /// SyncMigrationTarget: prepares this launcher for `vmi`'s incoming
    /// migration (KubeVirt's PrepareMigrationTarget), with the cluster's
    /// settings `opts`.
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn sync_migration_target(
        &self,
        vmi: &VirtualMachineInstance,
        opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        let _ = (vmi, opts);
        Err(CommandError::not_supported("live migration (target)"))
    }
    /// CancelVirtualMachineMigration.
    ///
    /// # Errors
    /// KubeVirt's [`crate::error::NOT_MIGRATING`] when no migration runs (the default).
    fn cancel_migration(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        let _ = vmi;
        Err(CommandError::NotMigrating)
    }
    /// FinalizeVirtualMachineMigration on the target: the link refresh of
    /// the interfaces whose migration method asks for it (`opts`'
    /// `interface_migration`), then the guest time sync.
    ///
    /// # Errors
    /// The failure message (by default: not supported yet).
    fn finalize_migration(
        &self,
        vmi: &VirtualMachineInstance,
        opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        let _ = (vmi, opts);
        Err(CommandError::not_supported("live migration (finalize)"))
    }
    /// SignalTargetPodCleanup: KubeVirt always succeeds; a target pod
    /// named by `status.migrationState.targetPod` (`POD_NAME`) stops
    /// waiting for its domain (by default: nothing).
    fn signal_target_pod_cleanup(&self, vmi: &VirtualMachineInstance) {
        let _ = vmi;
    }
}

/// A screenshot: its MIME type (`image/png`) and bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Screenshot {
    /// The MIME type GetScreenshot answers in `mime`.
    pub mime: String,
    /// The image.
    pub data: Vec<u8>,
}

/// The guest agent commands GetVMStats can ask for, in the order KubeVirt
/// main's `agentDataFields` (cmd-server `vmstats.go`) runs them.
pub const AGENT_DATA_COMMANDS: [&str; 14] = [
    "guest-get-load",
    "guest-get-cpustats",
    "guest-get-diskstats",
    "guest-get-time",
    "guest-get-vcpus",
    "guest-get-memory-block-info",
    "guest-get-users",
    "guest-get-osinfo",
    "guest-get-disks",
    "guest-get-host-name",
    "guest-get-timezone",
    "guest-network-get-route",
    "guest-network-get-interfaces",
    "guest-get-memory-blocks",
];
