//! SyncVMI (KubeVirt `SyncVMI`, kubevirt-facts §8.1): prepare the volumes,
//! convert with this sync's inputs, define the domain KubeVirt's way
//! (placeholder interfaces and free root ports for hot-plug), start it;
//! for a domain that already runs, resume it, hot-plug its volumes
//! ([`super::hotplug`]) or grow its disks online.

use api::VirtualMachineInstance;
use converter::{ConvertContext, ConvertError};
use virt::connect::Connect;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{
    paused_for_dump, starts_paused, LibvirtDomainManager, ManagerError, SyncInputs, ACTIVE,
};

impl LibvirtDomainManager {
    /// [`super::DomainManager::sync_vmi`].
    pub(super) fn sync(
        &self,
        vmi: &VirtualMachineInstance,
        inputs: &SyncInputs<'_>,
    ) -> Result<domain::Domain, ManagerError> {
        let _modifying = self.modifying();
        let active = self.with_conn(|conn| {
            Ok(match Self::lookup(conn, vmi)? {
                Some(d) => ACTIVE.contains(&d.get_state()?.0),
                None => false,
            })
        })?;
        // PreCloudInitIso runs once per sync, as KubeVirt's preStartHook:
        // the config drive's rebuild below reuses its answer.
        let mut opts = self.prepare.clone();
        opts.cloud_init_hook = once_per_sync(opts.cloud_init_hook.take());
        let (spec, ctx) = self.convert(vmi, !active, inputs, &opts)?;
        let xml = spec.to_xml()?;
        if xml.contains('\0') {
            // The converter refuses such text field by field; never hand
            // libvirt (or the binding, which panics on it) a NUL byte.
            return Err(ManagerError::Convert(ConvertError::invalid(
                "spec",
                "contains a NUL character, which XML cannot carry",
            )));
        }
        let arch = self.host.arch;
        let free_ports = converter::pci_ports::free_ports_wanted(vmi, arch, &spec);
        let placeholders = converter::pci_ports::placeholder_count(vmi, arch, &spec)?;
        // KubeVirt's define: with placeholder interfaces, once as
        // converted with them (their root ports stay for NIC hot-plug),
        // then again without them and with the free PCIe root ports
        // appended to libvirt's addressed definition; without, once with
        // the ports appended to the converted spec itself (ports 1..E,
        // which libvirt fills with devices: see converter::pci_ports).
        let first_xml = if placeholders > 0 {
            converter::pci_ports::with_placeholders(vmi, arch, &spec, placeholders).to_xml()?
        } else if free_ports > 0 {
            converter::pci_ports::with_root_ports(&spec, free_ports).to_xml()?
        } else {
            xml.clone()
        };
        // Every define goes through the hook sidecars (KubeVirt's
        // SetDomainSpecStrWithHooks), the placeholder one too.
        let first_xml = self.through_hooks(vmi, &first_xml)?;
        let define = |conn: &Connect| -> Result<VirtDomain, ManagerError> {
            if free_ports > 0 || placeholders > 0 {
                tracing::info!(
                    domain = %vmi.domain_name(),
                    "Allocating {placeholders} placeholder interfaces and {free_ports} direct controllers for hotplug (memory={} unit={})",
                    spec.memory.value,
                    spec.memory.unit
                );
            }
            let d = VirtDomain::define_xml(conn, &first_xml)?;
            if placeholders == 0 {
                return Ok(d);
            }
            let inactive = d.get_xml_desc(sys::VIR_DOMAIN_XML_INACTIVE)?;
            let without = converter::pci_ports::remove_placeholders(&inactive)?;
            let with_ports = converter::pci_ports::add_root_ports(&without, free_ports)?;
            let with_ports = self.through_hooks(vmi, &with_ports)?;
            Ok(VirtDomain::define_xml(conn, &with_ports)?)
        };
        let flags = if starts_paused(vmi) {
            sys::VIR_DOMAIN_START_PAUSED
        } else {
            0
        };
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let dom = match Self::lookup(conn, vmi)? {
                Some(d) => {
                    let (st, reason) = d.get_state()?;
                    if paused_for_dump(st, reason) {
                        // A memory dump runs: libvirt resumes the guest
                        // when it ends (KubeVirt would try, and wait for
                        // the dump's job lock).
                        tracing::info!(domain = %name, "domain paused for a memory dump; left to libvirt");
                        return Ok(());
                    }
                    if st == sys::VIR_DOMAIN_PAUSED && !self.is_user_paused(&name) {
                        // Started paused for virt-handler (or paused by an
                        // error): this sync lets it run, as KubeVirt does.
                        d.resume()?;
                        tracing::info!(domain = %name, "domain resumed by sync");
                        return Ok(());
                    }
                    if ACTIVE.contains(&st) {
                        tracing::debug!(domain = %name, "domain already active");
                        self.sync_disks(vmi, &d, &spec)?;
                        self.sync_network(vmi, &d, &spec, &ctx.prepared.interfaces)?;
                        self.expand_online(vmi, &d, &ctx);
                        return Ok(());
                    }
                    // Defined but not running: refresh the definition, then start.
                    define(conn)?
                }
                None => {
                    // KubeVirt's pre-start step starts the propagation of
                    // access credentials before the first define.
                    self.start_credentials(vmi)?;
                    let d = match define(conn) {
                        Ok(d) => d,
                        Err(e) => {
                            // A hook that failed on the second define left
                            // the placeholder definition: never keep a
                            // half-defined domain.
                            if let Ok(Some(half)) = Self::lookup(conn, vmi) {
                                tracing::warn!(domain = %name, "define failed half-way: undefining");
                                let _ = half.undefine_flags(sys::VIR_DOMAIN_UNDEFINE_KEEP_NVRAM);
                            }
                            return Err(e);
                        }
                    };
                    tracing::info!(domain = %vmi.domain_name(), "domain defined");
                    d
                }
            };
            Self::config_drive_devices(vmi, &dom, &ctx, &opts)?;
            dom.create_with_flags(flags)?;
            if vmi.spec.start_strategy == Some(api::vmi::StartStrategy::Paused) {
                self.set_user_paused(&name, true);
            }
            tracing::info!(domain = %name, paused = flags != 0, "domain started");
            Ok(())
        })?;
        // KubeVirt records the UID and grace period at define and keeps the
        // grace period in step with the VMI on every sync.
        self.metadata.update(|m| m.uid = Some(vmi.uid().to_owned()));
        self.metadata
            .set_grace_period_seconds(vmi.grace_period_seconds());
        Ok(spec)
    }

    /// KubeVirt's OnDefineDomain (`SetDomainSpecStrWithHooks`): `xml` and
    /// the VMI (its JSON) through every subscribed hook sidecar in order;
    /// the last answer is what is defined, as KubeVirt defines the hook's
    /// text. Each answer must parse into the launcher's domain model
    /// (`domain::Domain`, as KubeVirt unmarshals it into its `DomainSpec`:
    /// unknown elements are kept by libvirt, not by the model), carry no
    /// NUL and keep the domain's name (a renamed domain would never be
    /// found again). Without subscribers, `xml` unchanged.
    ///
    /// # Errors
    /// [`ManagerError::Hook`] naming the sidecar.
    fn through_hooks(
        &self,
        vmi: &VirtualMachineInstance,
        xml: &str,
    ) -> Result<String, ManagerError> {
        if self
            .hooks
            .callbacks(hooks::hook_point::ON_DEFINE_DOMAIN)
            .is_empty()
        {
            return Ok(xml.to_owned());
        }
        let vmi_json =
            serde_json::to_vec(vmi).map_err(|e| hooks::HookError::Encode(e.to_string()))?;
        let name = vmi.domain_name();
        let check = |x: &str| -> Result<(), hooks::CheckError> {
            if x.contains('\0') {
                return Err("a NUL character, which XML cannot carry".into());
            }
            let d = domain::Domain::from_xml(x)?;
            if d.name != name {
                return Err(format!("the domain renamed to {:?} (it is {name:?})", d.name).into());
            }
            Ok(())
        };
        Ok(self.hooks.on_define_domain(xml, &vmi_json, &check)?)
    }

    /// Prepares `vmi`'s volumes and converts it with `inputs`; returns the
    /// domain and the context it was converted with. `start` false (the
    /// domain already runs) keeps existing cloud-init and config ISOs
    /// instead of rebuilding them: KubeVirt builds them only when it starts
    /// the domain.
    ///
    /// # Errors
    /// [`ManagerError::Storage`] or [`ManagerError::Convert`]; a live pod
    /// interface without host facts in `inputs` (nothing prepared its pod
    /// network) is refused by field.
    pub(super) fn convert(
        &self,
        vmi: &VirtualMachineInstance,
        start: bool,
        inputs: &SyncInputs<'_>,
        prepare: &storage::PrepareOptions,
    ) -> Result<(domain::Domain, ConvertContext), ManagerError> {
        let mut ctx = ConvertContext::from_parts(
            &self.host,
            inputs.cluster,
            converter::Prepared::default(),
            inputs.sriov_pci.clone(),
        );
        let mut opts = prepare.clone();
        opts.rebuild_media &= start;
        ctx.prepared = storage::prepare(vmi, &ctx, &opts)?;
        ctx.prepared.interfaces = inputs.interfaces.clone();
        // Only a migration target prepares with empty media
        // (`storage::PrepareOptions::empty_media`, KubeVirt's
        // `generateEmptyIsos`): its conversion skips host devices.
        ctx.migration_target = prepare.empty_media;
        // An interface still without host facts (no phase 2 ran for it)
        // would start without network: refused by name. On a running
        // domain such an interface (not yet reported by virt-handler) is
        // converted as KubeVirt converts it, and not plugged (see
        // `nics::networks_to_plug`).
        if let Some((i, _)) = vmi
            .live_pod_interfaces()
            .find(|(_, x)| start && !inputs.interfaces.contains_key(&x.name))
        {
            return Err(ConvertError::unsupported(
                format!("spec.domain.devices.interfaces[{i}]"),
                "network phase 2 for interfaces not prepared at launcher start",
            )
            .into());
        }
        let dom = converter::convert(vmi, &ctx)?;
        Ok((dom, ctx))
    }

    /// KubeVirt writes the config drive after the domain is defined, so its
    /// meta-data can list the tagged interfaces with the PCI addresses
    /// libvirt gave them: when the VMI has a config drive and tagged
    /// interfaces, its ISO is rebuilt here with that `devices` list.
    fn config_drive_devices(
        vmi: &VirtualMachineInstance,
        dom: &VirtDomain,
        ctx: &ConvertContext,
        prepare: &storage::PrepareOptions,
    ) -> Result<(), ManagerError> {
        let config_drive = matches!(
            storage::cloudinit::find(vmi),
            Some((_, _, storage::cloudinit::DataSource::ConfigDrive, _))
        );
        let tagged = vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .any(|i| i.tag.as_deref().is_some_and(|t| !t.is_empty()));
        if !config_drive || !tagged {
            return Ok(());
        }
        let xml = dom.get_xml_desc(sys::VIR_DOMAIN_XML_INACTIVE)?;
        let defined = domain::Domain::from_xml(&xml)?;
        let devices = storage::cloudinit::tagged_devices(vmi, &defined);
        if let Some(mut data) = storage::cloudinit::read_hooked(vmi, ctx, prepare)? {
            data.set_devices(vmi, &devices);
            storage::cloudinit::generate(vmi, ctx, &data, prepare.owner)?;
            tracing::info!(
                devices = devices.len(),
                "config drive rebuilt with the tagged devices"
            );
        }
        Ok(())
    }

    /// KubeVirt's online ExpandDisks step, on a sync of a running domain:
    /// each claim image whose usable size (from the VMI's claim status)
    /// exceeds what the guest sees is grown with `virDomainBlockResize`
    /// (bytes), and the guest is told. Failures are logged, as in KubeVirt.
    fn expand_online(&self, vmi: &VirtualMachineInstance, dom: &VirtDomain, ctx: &ConvertContext) {
        if !ctx.expand_disks_enabled {
            return;
        }
        let targets = match storage::expansion_targets(vmi, ctx, &ctx.prepared.block_volumes) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("not expanding disks: {e}");
                return;
            }
        };
        for t in targets {
            let path = t.image.to_string_lossy();
            let capacity = match dom.get_block_info(&path, 0) {
                Ok(i) => i.capacity,
                Err(e) => {
                    tracing::warn!(volume = %t.volume, "failed to get block info: {e}");
                    continue;
                }
            };
            if t.usable <= capacity {
                continue;
            }
            match dom.block_resize(&path, t.usable, sys::VIR_DOMAIN_BLOCK_RESIZE_BYTES) {
                Ok(_) => {
                    tracing::info!(volume = %t.volume, from = capacity, to = t.usable, "expanded the disk of the running domain")
                }
                Err(e) => {
                    tracing::error!(volume = %t.volume, "libvirt failed to expand the disk: {e}")
                }
            }
        }
    }
}

/// `hook` answering a repeated call with the same data from its first
/// answer: within one sync the cloud-init data is read twice when the
/// config drive is rebuilt with the tagged devices, and KubeVirt calls the
/// sidecars once. A fresh memory per sync, as KubeVirt calls them on
/// every preStartHook.
fn once_per_sync(hook: Option<storage::CloudInitHook>) -> Option<storage::CloudInitHook> {
    type Memo = Option<(
        storage::cloudinit::CloudInitData,
        storage::cloudinit::CloudInitData,
    )>;
    let hook = hook?;
    let memo: std::sync::Arc<std::sync::Mutex<Memo>> = std::sync::Arc::default();
    Some(storage::CloudInitHook(std::sync::Arc::new(
        move |vmi, data| {
            let mut m = memo
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((input, output)) = m.as_ref() {
                if *input == data {
                    return Ok(output.clone());
                }
            }
            let output = (hook.0)(vmi, data.clone())?;
            *m = Some((data, output.clone()));
            Ok(output)
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::once_per_sync;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use storage::cloudinit::{CloudInitData, DataSource};

    fn data(user: &str) -> CloudInitData {
        CloudInitData {
            source: DataSource::ConfigDrive,
            volume: "cloudinit".into(),
            user_data: user.as_bytes().to_vec(),
            network_data: Vec::new(),
            meta_data: b"{}".to_vec(),
            public_keys: Default::default(),
        }
    }

    #[test]
    fn pre_cloud_init_iso_runs_once_per_sync_for_the_same_data() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&calls);
        let hook = storage::CloudInitHook(Arc::new(move |_, mut d: CloudInitData| {
            c.fetch_add(1, Ordering::SeqCst);
            d.user_data.extend_from_slice(b"+hooked");
            Ok(d)
        }));
        let vmi: api::VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "a", "namespace": "b"}, "spec": {"domain": {"devices": {}}}
        }))
        .unwrap();
        let sync = once_per_sync(Some(hook.clone())).unwrap();
        let first = (sync.0)(&vmi, data("u")).unwrap();
        let again = (sync.0)(&vmi, data("u")).unwrap();
        assert_eq!(first.user_data, b"u+hooked");
        assert_eq!(again, first);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Other data is asked again; so is the next sync.
        (sync.0)(&vmi, data("v")).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let next = once_per_sync(Some(hook)).unwrap();
        (next.0)(&vmi, data("v")).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert!(once_per_sync(None).is_none());
    }
}
