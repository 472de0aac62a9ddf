"""A stand-in for KubeVirt v1.6.6's virt-handler, for one VMI and one
pod-mode virt-launcher. It shares no code with the launcher: its gRPC stubs
are generated from crates/cmd/proto at import (stubs.py).

What of virt-handler it reproduces (the module doing it in brackets):

- The VMI it sends is its informer's object as Go's json.Marshal writes it:
  no kind/apiVersion (objects from a watch have an empty TypeMeta),
  metadata from the API server and KubeVirt's controllers (resourceVersion,
  generation, creationTimestamp, annotations, finalizers, ownerReferences
  for a VM-owned VMI, managedFields, the kubevirt.io/nodeName label,
  deletionTimestamp and deletionGracePeriodSeconds 0 once deleted), and the
  status virt-controller hands over (phase Scheduled, nodeName, activePods,
  qosClass, launcherContainerImageVersion, migrationTransport, Ready,
  volumeStatus, runtimeUser 0, memory, currentCPUTopology) and that
  virt-handler then writes [vmi, controller, status].
- cmd-client: blocking 2 s dial with authority `localhost`, CmdInfo
  version negotiation, client.go's per-method timeouts, handleError's
  wrapping (disconnect and Unimplemented raw, `unknown error encountered
  sending command`, `server error. command X failed: "<msg>"`), GetDomain's
  empty answer as "no domain", GetDomainStats' `null`, an empty
  GetQemuVersion as an error, and every answer decoded into KubeVirt's Go
  types [cmdclient, gotypes].
- Decoding: case-sensitive keys, integers only from integer literals in
  range, RFC 3339 metav1.Time, six-digit metav1.MicroTime; stricter than Go
  in one point: a key the Go type lacks is a failure (Go drops it) [gotypes].
- The notify server: NotifyInfo [1]; HandleDomainEvent decodes domainJSON
  into api.Domain and statusJSON into metav1.Status and answers
  success=false when Go would fail to; ADDED/MODIFIED/DELETED feed the
  domain informer, ERROR makes it list again with GetDomain;
  HandleK8sEvent decodes a core/v1 Event and answers "VMI not found" unless
  involvedObject's namespace, name and UID are the VMI's [notify].
- The notify pipe: `domain-notify-pipe.sock` made in the launcher's mount
  namespace (/proc/<pid>/root, the pid from SO_PEERCRED of the command
  socket, links resolved inside that root) when the client is first made,
  byte-copied to virt-handler's own `domain-notify.sock`, closed with the
  client [clients, notify].
- The launcher clients: FindSocket over status.activePods on this node,
  IsSocketUnresponsive, IsLauncherClientUnresponsive with its 3-minute
  wait, GetLauncherClient, GetVerifiedLauncherClient (Ping),
  CloseLauncherClient [clients].
- The controller (vm.go): one work queue key, requeued on every VMI and
  domain change, AddAfter where vm.go asks for it, rate-limited backoff on
  errors; execute()'s stale-domain and migration checks; sync()'s
  shouldShutdown / shouldDelete / shouldUpdate; processVmUpdate (start:
  container disks present in the pod, or at once with the ImageVolume gate
  (`--image-volume`: mount.go's ContainerDisksReady when no bind mount is
  needed), then SyncVirtualMachine with
  virt-handler's VirtualMachineOptions: default SMBIOS, balloon period 10,
  preallocated volumes, the node's NUMA topology, ClusterConfig, `tap` for
  masquerade/bridge; running: the memory dumps in progress, isolation, the
  sync again); helperVmShutdown / hasGracePeriodExpired /
  handleVMIShutdown / shutdownVMI (ShutdownVirtualMachine, again after at
  most 5 s while the grace period runs from the recorded DeletionTimestamp,
  not while ShuttingDown, KillVirtualMachine once expired);
  hasGracefulShutdownTrigger on MarkedForGracefulShutdown; deleteVM
  (DeleteVirtualMachine when the domain is not alive, then the cleanup);
  calculateVmPhaseForStatusReason [controller].
- updateVMIStatus from the domain: ISO sizes, guestOSInfo, volume targets,
  hot-plug and memory dump volume phases, fsFreezeStatus, machine,
  memory.guestCurrent, interfaces (domain + guest agent), LiveMigratable /
  StorageLiveMigratable and migrationMethod, AgentConnected from the agent
  channel's state (GetGuestInfo on every sync while connected, then
  AgentVersionNotSupported), Paused, AccessCredentialsSynchronized,
  Synchronized on a sync error, phaseTransitionTimestamps [status].
- The checks of what virt-handler dereferences in a domain: the informer
  key, Spec.Metadata.KubeVirt.UID, known state/reason strings, interface
  Alias and MAC, the Alias of disks with a source [notify.check_domain].
- virt-controller's part that the flow needs: the Ready condition once the
  VMI runs; a user's pause/unpause through the client as virt-handler's
  REST handlers call it; virt-controller's volume attach for memory dumps.

- Live migration between two nodes (migration.py): virt-controller's
  hand-over (migrationState, the target pod among the active pods, the
  migration-target-node label), the target node's virt-handler (a notify
  server, informer and clients of its own; migration-target.go:
  SyncMigrationTarget, the target listener, domain detected/ready, the ack
  of the end, FinalizeVirtualMachineMigration, finalCleanup), the source
  node's (migration-source.go: MigrateVirtualMachine with KubeVirt's
  default options, the migration record copied into migrationState), and
  vm.go's part (a migrated domain deleted as an orphan, a VMI of another
  node left alone); VMI writes conflict on a stale resourceVersion.
- NIC plug and unplug of a bridge interface on a Multus network
  (nichotplug.py, netsetup.py; `--plug-nic`): virt-controller's hand-over
  of the interface and network to the spec, its `multus-status` status
  entry with podInterfaceName, handleRunningVMI's setupNetwork for
  FilterNetsForLiveUpdate's networks before the sync (netpod's
  once-per-network state, teardown and clearCache of an `absent` one, a
  failure as a NicHotplug warning and an error after the sync), netstat's
  merge of the multus-status entries and pod interface names, then
  `state: absent`, the detach, virt-controller's clean-up of the status
  and spec. Phase 1 itself is `virt-launcher pod-network-phase1
  --interface` in the pod's network namespace (it plays Multus's pod link
  too); the pod interface cache is not read (no pod IPs in the status).

Not reproduced (nothing in the tests has them): the proxy's TLS between
nodes (one `virt-launcher migration-proxy` plays both halves), hot-plug of
volumes and SR-IOV interfaces (the tests mount hot-plug volumes
themselves; NIC plug is reproduced for the bridge binding, above), container-disk checksums, vCPU/memory hot-plug, realtime and
dedicated-CPU housekeeping, device ownership, the IOError retry delay, the
pod interface cache of network phase 1 (run by another process here), the
periodic domain resync (300 s) and the unresponsive-socket watchdog (30 s);
virt-api's spec defaults are not applied to the test's manifest (see vmi).
"""
