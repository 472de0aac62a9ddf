"""Strict decoding of the launcher's JSON into virt-handler's Go types.

virt-handler decodes every JSON document the launcher sends with
k8s.io/apimachinery/pkg/util/json.Unmarshal (sigs.k8s.io/json underneath):
object keys are matched CASE-SENSITIVELY to the Go field names or json tags,
unknown keys are silently dropped, and a value of the wrong JSON type fails
the whole decode (the notify server then answers success=false, cmd-client
returns the error). This module checks a document against a description of
the Go type the same way, and is stricter in one respect: a key the Go type
does not have is an error here, because virt-handler would drop it without a
word (a misspelt key is a field the launcher believes it sends and
virt-handler never sees).

The descriptions below are the wire shapes of KubeVirt v1.6.6's Go types:
api.Domain and what it holds (pkg/virt-launcher/virtwrap/api/schema.go),
stats.DomainStats (pkg/virt-launcher/virtwrap/stats/types.go), the guest
agent types of kubevirt.io/api/core/v1, metav1.ObjectMeta and metav1.Status,
and core/v1 Event. Go rules encoded:
- a struct field without a json tag is keyed by its Go name; an embedded
  struct without a tag (metav1.TypeMeta in api.Domain) puts its fields inline;
- null is accepted for every kind and leaves the zero value;
- integers must be JSON integer literals within the Go type's range
  (1.0 or 1e3 do not decode into an int), uints not negative;
- metav1.Time is null or an RFC 3339 string (time.RFC3339 accepts a
  fraction of a second), metav1.MicroTime null or RFC 3339 with exactly six
  fraction digits (RFC3339Micro);
- api.Alias marshals as {"Name", "UserDefined"}.
"""

import json
import re
from datetime import datetime


class GoDecodeError(ValueError):
    """The document does not decode into the Go type; names every problem.
    `go_fails`: Go's decoder itself fails on it (a type error); otherwise
    Go would decode it, dropping what the strict check complains about
    (unknown or repeated keys) -- `value` then holds the parsed document."""

    def __init__(self, what, problems, go_fails=True, value=None):
        self.problems = problems
        self.go_fails = go_fails
        self.value = value
        super().__init__(f"{what}: " + "; ".join(problems))


class _FloatLit(float):
    """A JSON number written with a fraction or an exponent."""


class _Obj(dict):
    """A JSON object; `dups` holds keys that appeared more than once."""

    dups = ()


def _pairs(pairs):
    o = _Obj()
    seen = []
    for k, v in pairs:
        if k in o:
            seen.append(k)
        o[k] = v
    if seen:
        o.dups = tuple(seen)
    return o


def _no_constant(name):
    raise ValueError(f"{name} is not JSON (Go's decoder refuses it)")


def parse(text):
    """JSON text (str or bytes) as Python values that remember what Go
    needs: integer literals stay int, other numbers are _FloatLit, objects
    record duplicate keys. Raises ValueError on bad JSON."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    return json.loads(text, parse_float=_FloatLit, parse_constant=_no_constant,
                      object_pairs_hook=_pairs)


def _jtype(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


class T:
    """A Go type as JSON sees it."""

    name = "?"

    def check(self, v, path, errs):
        raise NotImplementedError


class _Str(T):
    name = "string"

    def check(self, v, path, errs):
        if v is not None and not isinstance(v, str):
            errs.append(f"{path}: {_jtype(v)} into Go {self.name}")


class _Bool(T):
    name = "bool"

    def check(self, v, path, errs):
        if v is not None and not isinstance(v, bool):
            errs.append(f"{path}: {_jtype(v)} into Go bool")


class _Int(T):
    def __init__(self, name, lo, hi):
        self.name, self.lo, self.hi = name, lo, hi

    def check(self, v, path, errs):
        if v is None:
            return
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            errs.append(f"{path}: {_jtype(v)} into Go {self.name}")
        elif isinstance(v, _FloatLit):
            errs.append(f"{path}: number {v!r} is not an integer literal (Go {self.name})")
        elif not self.lo <= v <= self.hi:
            errs.append(f"{path}: {v} overflows Go {self.name}")


class _Float(T):
    name = "float64"

    def check(self, v, path, errs):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            errs.append(f"{path}: {_jtype(v)} into Go float64")


_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def parse_time(s):
    """An RFC 3339 string as time.Parse(time.RFC3339, s) reads it, as an
    aware datetime; ValueError otherwise."""
    m = _RFC3339.match(s) if isinstance(s, str) else None
    if not m:
        raise ValueError(f"{s!r} is not RFC 3339")
    frac = (m.group(7) or "")[1:7].ljust(6, "0") if m.group(7) else "000000"
    zone = "+00:00" if m.group(8) == "Z" else m.group(8)
    return datetime.fromisoformat(
        f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}.{frac}{zone}")


class _Time(T):
    """metav1.Time (micro=False) or metav1.MicroTime (micro=True)."""

    def __init__(self, micro):
        self.micro = micro
        self.name = "metav1.MicroTime" if micro else "metav1.Time"

    def check(self, v, path, errs):
        if v is None:
            return
        if not isinstance(v, str):
            errs.append(f"{path}: {_jtype(v)} into {self.name} (a string or null)")
            return
        try:
            parse_time(v)
        except ValueError as e:
            errs.append(f"{path}: {e} ({self.name})")
            return
        m = _RFC3339.match(v)
        if self.micro and (m.group(7) is None or len(m.group(7)) != 7):
            errs.append(f"{path}: {v!r} lacks RFC3339Micro's six fraction digits")


class _Any(T):
    name = "interface{}"

    def check(self, v, path, errs):
        pass


class Ptr(T):
    def __init__(self, elem):
        self.elem = elem

    @property
    def name(self):
        return "*" + _resolve(self.elem).name

    def check(self, v, path, errs):
        if v is not None:
            _resolve(self.elem).check(v, path, errs)


class Slice(T):
    def __init__(self, elem):
        self.elem = elem

    @property
    def name(self):
        return "[]" + _resolve(self.elem).name

    def check(self, v, path, errs):
        if v is None:
            return
        if not isinstance(v, list):
            errs.append(f"{path}: {_jtype(v)} into Go {self.name}")
            return
        e = _resolve(self.elem)
        for i, x in enumerate(v):
            e.check(x, f"{path}[{i}]", errs)


class Map(T):
    def __init__(self, elem):
        self.elem = elem

    @property
    def name(self):
        return "map[string]" + _resolve(self.elem).name

    def check(self, v, path, errs):
        if v is None:
            return
        if not isinstance(v, dict):
            errs.append(f"{path}: {_jtype(v)} into Go {self.name}")
            return
        e = _resolve(self.elem)
        for k, x in v.items():
            e.check(x, f"{path}[{k!r}]", errs)


class Struct(T):
    """Fields: {json key: type}; `inline`: structs whose fields are inline."""

    def __init__(self, name, fields, inline=()):
        self.name = name
        self.fields = dict(fields)
        for s in inline:
            self.fields.update(_resolve(s).fields)
        _REGISTRY[name] = self

    def check(self, v, path, errs):
        if v is None:
            return
        if not isinstance(v, dict):
            errs.append(f"{path or '.'}: {_jtype(v)} into Go struct {self.name}")
            return
        for k in getattr(v, "dups", ()):
            errs.append(f"{path}.{k}: {_TWICE}")
        for k, x in v.items():
            t = self.fields.get(k)
            if t is None:
                near = [f for f in self.fields if f.lower() == k.lower()]
                hint = f" (the Go field is {near[0]!r}: keys are case-sensitive)" if near else ""
                errs.append(f"{path}.{k}: {self.name} has no such field; {_DROPPED}{hint}")
                continue
            _resolve(t).check(x, f"{path}.{k}", errs)


_REGISTRY = {}
_DROPPED = "virt-handler drops it"
_TWICE = "key given twice (Go keeps the last)"


def _resolve(t):
    return _REGISTRY[t] if isinstance(t, str) else t


STRING = _Str()
UID = _Str()
UID.name = "types.UID"
BOOL = _Bool()
INT = _Int("int", -(1 << 63), (1 << 63) - 1)
INT64 = _Int("int64", -(1 << 63), (1 << 63) - 1)
INT32 = _Int("int32", -(1 << 31), (1 << 31) - 1)
UINT = _Int("uint", 0, (1 << 64) - 1)
UINT64 = _Int("uint64", 0, (1 << 64) - 1)
UINT32 = _Int("uint32", 0, (1 << 32) - 1)
FLOAT64 = _Float()
TIME = _Time(False)
MICROTIME = _Time(True)
ANY = _Any()


def S(tname, /, inline=(), **fields):
    """Shorthand for a Struct whose JSON keys are valid Python names."""
    return Struct(tname, fields, inline)


# ---- metav1 -------------------------------------------------------------
S("metav1.TypeMeta", kind=STRING, apiVersion=STRING)
S("metav1.OwnerReference", apiVersion=STRING, kind=STRING, name=STRING, uid=UID,
  controller=Ptr(BOOL), blockOwnerDeletion=Ptr(BOOL))
S("metav1.ManagedFieldsEntry", manager=STRING, operation=STRING, apiVersion=STRING,
  time=Ptr(TIME), fieldsType=STRING, fieldsV1=ANY, subresource=STRING)
S("metav1.ObjectMeta", name=STRING, generateName=STRING, namespace=STRING, selfLink=STRING,
  uid=UID, resourceVersion=STRING, generation=INT64, creationTimestamp=TIME,
  deletionTimestamp=Ptr(TIME), deletionGracePeriodSeconds=Ptr(INT64), labels=Map(STRING),
  annotations=Map(STRING), ownerReferences=Slice("metav1.OwnerReference"),
  finalizers=Slice(STRING), managedFields=Slice("metav1.ManagedFieldsEntry"))
S("metav1.ListMeta", selfLink=STRING, resourceVersion=STRING, remainingItemCount=Ptr(INT64))
_REGISTRY["metav1.ListMeta"].fields["continue"] = STRING
S("metav1.StatusCause", reason=STRING, message=STRING, field=STRING)
S("metav1.StatusDetails", name=STRING, group=STRING, kind=STRING, uid=UID,
  causes=Slice("metav1.StatusCause"), retryAfterSeconds=INT32)
METAV1_STATUS = S("metav1.Status", inline=("metav1.TypeMeta",), metadata="metav1.ListMeta",
                  status=STRING, message=STRING, reason=STRING,
                  details=Ptr("metav1.StatusDetails"), code=INT32)

# ---- core/v1 Event ------------------------------------------------------
S("v1.ObjectReference", kind=STRING, namespace=STRING, name=STRING, uid=UID,
  apiVersion=STRING, resourceVersion=STRING, fieldPath=STRING)
S("v1.EventSource", component=STRING, host=STRING)
S("v1.EventSeries", count=INT32, lastObservedTime=MICROTIME)
K8S_EVENT = S("v1.Event", inline=("metav1.TypeMeta",), metadata="metav1.ObjectMeta",
              involvedObject="v1.ObjectReference", reason=STRING, message=STRING,
              source="v1.EventSource", firstTimestamp=TIME, lastTimestamp=TIME, count=INT32,
              type=STRING, eventTime=MICROTIME, series=Ptr("v1.EventSeries"), action=STRING,
              related=Ptr("v1.ObjectReference"), reportingComponent=STRING,
              reportingInstance=STRING)

# ---- api.Domain (schema.go) -------------------------------------------------
S("xml.Name", Space=STRING, Local=STRING)
S("api.Alias", Name=STRING, UserDefined=BOOL)  # Alias.MarshalJSON's shape
S("api.Address", Type=STRING, Domain=STRING, Bus=STRING, Slot=STRING, Function=STRING,
  Controller=STRING, Target=STRING, Unit=STRING, UUID=STRING, Device=STRING, CSSID=STRING,
  SSID=STRING, DevNo=STRING)
S("api.GuestOSInfo", Name=STRING, KernelRelease=STRING, Version=STRING, PrettyName=STRING,
  VersionId=STRING, KernelVersion=STRING, Machine=STRING, Id=STRING)
S("api.InterfaceStatus", Mac=STRING, Ip=STRING, IPs=Slice(STRING), InterfaceName=STRING)
S("api.FSFreeze", Status=STRING)
S("api.DomainStatus", Status=STRING, Reason=STRING, Interfaces=Slice("api.InterfaceStatus"),
  OSInfo="api.GuestOSInfo", FSFreezeStatus="api.FSFreeze")
S("api.Memory", Value=UINT64, Unit=STRING)
S("api.MaxMemory", Value=UINT64, Unit=STRING, Slots=UINT64)
S("api.HugePage", Size=STRING, Unit=STRING, NodeSet=STRING)
S("api.HugePages", HugePage=Slice("api.HugePage"))
S("api.MemoryBacking", HugePages=Ptr("api.HugePages"), Source=Ptr(S("api.MemoryBackingSource", Type=STRING)),
  Access=Ptr(S("api.MemoryBackingAccess", Mode=STRING)),
  Allocation=Ptr(S("api.MemoryAllocation", Mode=STRING)), NoSharePages=Ptr(S("api.NoSharePages")))
S("api.OSType", OS=STRING, Arch=STRING, Machine=STRING)
S("api.ACPITable", Path=STRING, Type=STRING)
S("api.OS", Type="api.OSType", ACPI=Ptr(S("api.OSACPI", Table=Slice("api.ACPITable"))),
  SMBios=Ptr(S("api.SMBios", Mode=STRING)), BootOrder=Slice(S("api.Boot", Dev=STRING)),
  BootMenu=Ptr(S("api.BootMenu", Enable=STRING, Timeout=Ptr(UINT))),
  BIOS=Ptr(S("api.BIOS", UseSerial=STRING)),
  BootLoader=Ptr(S("api.Loader", ReadOnly=STRING, Secure=STRING, Type=STRING, Path=STRING)),
  NVRam=Ptr(S("api.NVRam", Template=STRING, NVRam=STRING)), Kernel=STRING, Initrd=STRING,
  KernelArgs=STRING)
S("api.Entry", Name=STRING, Value=STRING)
S("api.SysInfo", Type=STRING, System=Slice("api.Entry"), BIOS=Slice("api.Entry"),
  BaseBoard=Slice("api.Entry"), Chassis=Slice("api.Entry"))
S("api.Timer", Name=STRING, TickPolicy=STRING, Present=STRING, Track=STRING, Frequency=STRING)
S("api.Clock", Offset=STRING, Timezone=STRING, Adjustment=STRING, Timer=Slice("api.Timer"))
S("api.Commandline", QEMUEnv=Slice(S("api.Env", Name=STRING, Value=STRING)),
  QEMUArg=Slice(S("api.Arg", Value=STRING)))
S("api.GracePeriodMetadata", DeletionGracePeriodSeconds=INT64, DeletionTimestamp=Ptr(TIME),
  MarkedForGracefulShutdown=Ptr(BOOL))
S("api.MigrationMetadata", UID=UID, StartTimestamp=Ptr(TIME), EndTimestamp=Ptr(TIME), Failed=BOOL,
  FailureReason=STRING, AbortStatus=STRING, Mode=STRING)
S("api.AccessCredentialMetadata", Succeeded=BOOL, Message=STRING)
S("api.MemoryDumpMetadata", FileName=STRING, StartTimestamp=Ptr(TIME), EndTimestamp=Ptr(TIME),
  Completed=BOOL, Failed=BOOL, FailureReason=STRING)
S("api.KubeVirtMetadata", UID=UID, GracePeriod=Ptr("api.GracePeriodMetadata"),
  Migration=Ptr("api.MigrationMetadata"), AccessCredential=Ptr("api.AccessCredentialMetadata"),
  MemoryDump=Ptr("api.MemoryDumpMetadata"))
S("api.Metadata", KubeVirt="api.KubeVirtMetadata")
S("api.FeatureEnabled")
S("api.FeatureState", State=STRING)
S("api.Features", ACPI=Ptr("api.FeatureEnabled"), APIC=Ptr("api.FeatureEnabled"),
  Hyperv=Ptr(S("api.FeatureHyperv", Mode=STRING, Relaxed=Ptr("api.FeatureState"),
               VAPIC=Ptr("api.FeatureState"),
               Spinlocks=Ptr(S("api.FeatureSpinlocks", State=STRING, Retries=Ptr(UINT32))),
               VPIndex=Ptr("api.FeatureState"), Runtime=Ptr("api.FeatureState"),
               SyNIC=Ptr("api.FeatureState"),
               SyNICTimer=Ptr(S("api.SyNICTimer", Direct=Ptr("api.FeatureState"), State=STRING)),
               Reset=Ptr("api.FeatureState"),
               VendorID=Ptr(S("api.FeatureVendorID", State=STRING, Value=STRING)),
               Frequencies=Ptr("api.FeatureState"), Reenlightenment=Ptr("api.FeatureState"),
               TLBFlush=Ptr("api.FeatureState"), IPI=Ptr("api.FeatureState"),
               EVMCS=Ptr("api.FeatureState"))),
  SMM=Ptr("api.FeatureEnabled"),
  KVM=Ptr(S("api.FeatureKVM", Hidden=Ptr("api.FeatureState"), HintDedicated=Ptr("api.FeatureState"))),
  PVSpinlock=Ptr(S("api.FeaturePVSpinlock", State=STRING)), PMU=Ptr("api.FeatureState"),
  VMPort=Ptr("api.FeatureState"))
S("api.NUMACell", ID=STRING, CPUs=STRING, Memory=UINT64, Unit=STRING, MemoryAccess=STRING)
S("api.CPU", Mode=STRING, Model=STRING, Features=Slice(S("api.CPUFeature", Name=STRING, Policy=STRING)),
  Topology=Ptr(S("api.CPUTopology", Sockets=UINT32, Cores=UINT32, Threads=UINT32)),
  NUMA=Ptr(S("api.NUMA", Cells=Slice("api.NUMACell"))))
S("api.VCPU", Placement=STRING, CPUs=UINT32)
S("api.VCPUs", VCPU=Slice(S("api.VCPUsVCPU", ID=UINT32, Enabled=STRING, Hotpluggable=STRING,
                            Order=UINT32)))
S("api.CPUTune", VCPUPin=Slice(S("api.CPUTuneVCPUPin", VCPU=UINT32, CPUSet=STRING)),
  IOThreadPin=Slice(S("api.CPUTuneIOThreadPin", IOThread=UINT32, CPUSet=STRING)),
  EmulatorPin=Ptr(S("api.CPUEmulatorPin", CPUSet=STRING)))
S("api.NUMATune", Memory=S("api.NumaTuneMemory", Mode=STRING, NodeSet=STRING),
  MemNodes=Slice(S("api.MemNode", CellID=UINT32, Mode=STRING, NodeSet=STRING)))
S("api.LaunchSecurity", Type=STRING, Cbitpos=STRING, ReducedPhysBits=STRING, Policy=STRING,
  DHCert=STRING, Session=STRING)
# devices
S("api.InterfaceSource", Network=STRING, Device=STRING, Bridge=STRING, Mode=STRING,
  Address=Ptr("api.Address"))
S("api.Interface", XMLName="xml.Name", Address=Ptr("api.Address"), Type=STRING,
  TrustGuestRxFilters=STRING, Source="api.InterfaceSource",
  Target=Ptr(S("api.InterfaceTarget", Device=STRING, Managed=STRING)),
  Model=Ptr(S("api.Model", Type=STRING)), MAC=Ptr(S("api.MAC", MAC=STRING)),
  MTU=Ptr(S("api.MTU", Size=STRING)), BandWidth=Ptr(S("api.BandWidth")),
  BootOrder=Ptr(S("api.BootOrder", Order=UINT)), LinkState=Ptr(S("api.LinkState", State=STRING)),
  FilterRef=Ptr(S("api.FilterRef", Filter=STRING)), Alias=Ptr("api.Alias"),
  Driver=Ptr(S("api.InterfaceDriver", Name=STRING, Queues=Ptr(UINT), IOMMU=STRING)),
  Rom=Ptr(S("api.Rom", Enabled=STRING)), ACPI=Ptr(S("api.ACPI", Index=UINT)),
  Backend=Ptr(S("api.InterfaceBackend", Type=STRING, LogFile=STRING)),
  PortForward=Slice(S("api.InterfacePortForward", Proto=STRING, Address=STRING, Dev=STRING,
                      Ranges=Slice(S("api.InterfacePortForwardRange", Start=UINT, End=UINT,
                                     To=UINT, Exclude=STRING)))))
S("api.Channel", Type=STRING, Source=Ptr(S("api.ChannelSource", Mode=STRING, Path=STRING)),
  Target=Ptr(S("api.ChannelTarget", Name=STRING, Type=STRING, Address=STRING, Port=UINT,
               State=STRING)))
S("api.HostDevice", XMLName="xml.Name", Source=S("api.HostDeviceSource", Address=Ptr("api.Address")),
  Type=STRING, BootOrder=Ptr("api.BootOrder"), Managed=STRING, Mode=STRING, Model=STRING,
  Address=Ptr("api.Address"), Alias=Ptr("api.Alias"), Display=STRING, RamFB=STRING)
S("api.Controller", Type=STRING, Index=STRING, Model=STRING,
  Driver=Ptr(S("api.ControllerDriver", IOThread=Ptr(UINT), Queues=Ptr(UINT), IOMMU=STRING)),
  Alias=Ptr("api.Alias"), Address=Ptr("api.Address"),
  PCIHole64=Ptr(S("api.PCIHole64", Value=UINT, Unit=STRING)))
S("api.Video", Model=S("api.VideoModel", Type=STRING, Heads=Ptr(UINT), Ram=Ptr(UINT),
                       VRam=Ptr(UINT), VGAMem=Ptr(UINT)))
S("api.Graphics", AutoPort=STRING, DefaultMode=STRING,
  Listen=Ptr(S("api.GraphicsListen", Type=STRING, Address=STRING, Network=STRING, Socket=STRING)),
  PasswdValidTo=STRING, Port=INT32, TLSPort=INT, Type=STRING)
S("api.MemBalloon", Model=STRING, Stats=Ptr(S("api.Stats", Period=UINT)), Address=Ptr("api.Address"),
  Driver=Ptr(S("api.MemBalloonDriver", IOMMU=STRING)), FreePageReporting=STRING)
S("api.DiskSource", Dev=STRING, File=STRING, StartupPolicy=STRING, Protocol=STRING, Name=STRING,
  Host=Ptr(S("api.DiskSourceHost", Name=STRING, Port=STRING)),
  Reservations=Ptr(S("api.Reservations", Managed=STRING,
                     SourceReservations=Ptr(S("api.SourceReservations", Type=STRING, Path=STRING,
                                              Mode=STRING)))),
  Slices=Slice(S("api.Slice", Slice=S("api.SliceType", Type=STRING, Offset=INT64, Size=INT64))))
S("api.Disk", Device=STRING, Snapshot=STRING, Type=STRING, Source="api.DiskSource",
  Target=S("api.DiskTarget", Bus=STRING, Device=STRING, Tray=STRING), Serial=STRING,
  Driver=Ptr(S("api.DiskDriver", Cache=STRING, ErrorPolicy=STRING, IO=STRING, Name=STRING,
               Type=STRING, IOThread=Ptr(UINT),
               IOThreads=Ptr(S("api.DiskIOThreads", IOThread=Slice(S("api.DiskIOThread", Id=UINT32)))),
               Queues=Ptr(UINT), Discard=STRING, IOMMU=STRING)),
  ReadOnly=Ptr(S("api.ReadOnly")),
  Auth=Ptr(S("api.DiskAuth", Username=STRING,
             Secret=Ptr(S("api.DiskSecret", Type=STRING, Usage=STRING, UUID=STRING)))),
  Alias=Ptr("api.Alias"),
  BackingStore=Ptr(S("api.BackingStore", Type=STRING,
                     Format=Ptr(S("api.BackingStoreFormat", Type=STRING)),
                     Source=Ptr("api.DiskSource"))),
  BootOrder=Ptr("api.BootOrder"), Address=Ptr("api.Address"), Model=STRING,
  BlockIO=Ptr(S("api.BlockIO", LogicalBlockSize=UINT, PhysicalBlockSize=UINT)),
  FilesystemOverhead=Ptr(STRING), Capacity=Ptr(INT64), ExpandDisksEnabled=BOOL,
  Shareable=Ptr(S("api.Shareable")))
S("api.Input", Type=STRING, Bus=STRING, Alias=Ptr("api.Alias"), Address=Ptr("api.Address"),
  Model=STRING)
S("api.Serial", Type=STRING, Target=Ptr(S("api.SerialTarget", Port=Ptr(UINT))),
  Source=Ptr(S("api.SerialSource", Mode=STRING, Path=STRING)), Alias=Ptr("api.Alias"),
  Log=Ptr(S("api.SerialLog", File=STRING, Append=STRING)))
S("api.Console", Type=STRING, Target=Ptr(S("api.ConsoleTarget", Type=Ptr(STRING), Port=Ptr(UINT))),
  Source=Ptr(S("api.ConsoleSource", Mode=STRING, Path=STRING)), Alias=Ptr("api.Alias"))
S("api.Watchdog", Model=STRING, Action=STRING, Alias=Ptr("api.Alias"), Address=Ptr("api.Address"))
S("api.Rng", Model=STRING, Backend=Ptr(S("api.RngBackend", Model=STRING, Source=STRING)),
  Address=Ptr("api.Address"), Driver=Ptr(S("api.RngDriver", IOMMU=STRING)))
S("api.FilesystemDevice", Type=STRING, AccessMode=STRING,
  Source=Ptr(S("api.FilesystemSource", Dir=STRING, Socket=STRING)),
  Target=Ptr(S("api.FilesystemTarget", Dir=STRING)),
  Driver=Ptr(S("api.FilesystemDriver", Type=STRING, Queue=STRING)),
  Binary=Ptr(S("api.FilesystemBinary", Path=STRING, Xattr=STRING,
               Cache=Ptr(S("api.FilesystemBinaryCache", Mode=STRING)),
               Lock=Ptr(S("api.FilesystemBinaryLock", Posix=STRING, Flock=STRING)))))
S("api.RedirectedDevice", Type=STRING, Bus=STRING,
  Source=S("api.RedirectedDeviceSource", Mode=STRING, Path=STRING))
S("api.SoundCard", Alias=Ptr("api.Alias"), Model=STRING)
S("api.TPM", Model=STRING, Backend=S("api.TPMBackend", Type=STRING, Version=STRING,
                                     PersistentState=STRING))
S("api.VSOCK", Model=STRING, CID=S("api.CID", Auto=STRING, Address=UINT32))
S("api.MemoryDevice", XMLName="xml.Name", Model=STRING,
  Target=Ptr(S("api.MemoryTarget", Size="api.Memory", Requested="api.Memory", Current="api.Memory",
               Node=STRING, Block="api.Memory",
               Address=Ptr(S("api.MemoryAddress", Base=STRING)))),
  Alias=Ptr("api.Alias"), Address=Ptr("api.Address"))
S("api.Devices", Emulator=STRING, Interfaces=Slice("api.Interface"), Channels=Slice("api.Channel"),
  HostDevices=Slice("api.HostDevice"), PanicDevices=Slice(S("api.PanicDevice", Model=Ptr(STRING))),
  Controllers=Slice("api.Controller"), Video=Slice("api.Video"), Graphics=Slice("api.Graphics"),
  Ballooning=Ptr("api.MemBalloon"), Disks=Slice("api.Disk"), Inputs=Slice("api.Input"),
  Serials=Slice("api.Serial"), Consoles=Slice("api.Console"), Watchdogs=Slice("api.Watchdog"),
  Rng=Ptr("api.Rng"), Filesystems=Slice("api.FilesystemDevice"),
  Redirs=Slice("api.RedirectedDevice"), SoundCards=Slice("api.SoundCard"), TPMs=Slice("api.TPM"),
  VSOCK=Ptr("api.VSOCK"), Memory=Ptr("api.MemoryDevice"))
S("api.DomainSpec", XMLName="xml.Name", Type=STRING, XmlNS=STRING, Name=STRING, UUID=STRING,
  Memory="api.Memory", CurrentMemory=Ptr("api.Memory"), MaxMemory=Ptr("api.MaxMemory"),
  MemoryBacking=Ptr("api.MemoryBacking"), OS="api.OS", SysInfo=Ptr("api.SysInfo"),
  Devices="api.Devices", Clock=Ptr("api.Clock"), Resource=Ptr(S("api.Resource", Partition=STRING)),
  QEMUCmd=Ptr("api.Commandline"), Metadata="api.Metadata", Features=Ptr("api.Features"),
  CPU="api.CPU", VCPU=Ptr("api.VCPU"), VCPUs=Ptr("api.VCPUs"), CPUTune=Ptr("api.CPUTune"),
  NUMATune=Ptr("api.NUMATune"), IOThreads=Ptr(S("api.IOThreads", IOThreads=UINT)),
  LaunchSecurity=Ptr("api.LaunchSecurity"))
DOMAIN = S("api.Domain", inline=("metav1.TypeMeta",), ObjectMeta="metav1.ObjectMeta",
           Spec="api.DomainSpec", Status="api.DomainStatus")

# ---- stats.DomainStats --------------------------------------------------
def _stats(tname, /, **fields):
    """A stats struct: every value field F comes with its FSet bool."""
    out = {}
    for k, t in fields.items():
        if not k.endswith("_"):
            out[k + "Set"] = BOOL
        out[k.rstrip("_")] = t
    return Struct(tname, out)


_U = UINT64
_stats("stats.DomainStatsCPU", Time=_U, User=_U, System=_U)
_stats("stats.DomainStatsMemory", Unused=_U, Cached=_U, Available=_U, ActualBalloon=_U, RSS=_U,
       SwapIn=_U, SwapOut=_U, MajorFault=_U, MinorFault=_U, Usable=_U, Total=_U)
_stats("stats.DomainJobInfo", DataTotal=_U, DataProcessed=_U, MemoryBps=_U, DataRemaining=_U,
       MemDirtyRate=_U)
_stats("stats.DomainStatsVcpu", State=INT, Time=_U, Wait=_U, Delay=_U)
_stats("stats.DomainStatsNet", Name=STRING, Alias=STRING, RxBytes=_U, RxPkts=_U, RxErrs=_U,
       RxDrop=_U, TxBytes=_U, TxPkts=_U, TxErrs=_U, TxDrop=_U)
_stats("stats.DomainStatsBlock", Name=STRING, Alias_=STRING, BackingIndex=UINT, Path=STRING,
       RdReqs=_U, RdBytes=_U, RdTimes=_U, WrReqs=_U, WrBytes=_U, WrTimes=_U, FlReqs=_U,
       FlTimes=_U, Errors=_U, Allocation=_U, Capacity=_U, Physical=_U)
_stats("stats.DomainStatsDirtyRate", CalcStatus=INT, CalcStartTime=INT64, CalcPeriod=INT,
       MegabytesPerSecond=INT64)
_stats("stats.DomainStatsLoad", Load1m=FLOAT64, Load5m=FLOAT64, Load15m=FLOAT64)
DOMAIN_STATS = S("stats.DomainStats", Name=STRING, UUID=STRING, Cpu=Ptr("stats.DomainStatsCPU"),
                 Memory=Ptr("stats.DomainStatsMemory"),
                 MigrateDomainJobInfo=Ptr("stats.DomainJobInfo"),
                 Vcpu=Slice("stats.DomainStatsVcpu"), Net=Slice("stats.DomainStatsNet"),
                 Block=Slice("stats.DomainStatsBlock"), CPUMapSet=BOOL,
                 CPUMap=Slice(Slice(BOOL)), NrVirtCpu=UINT,
                 DirtyRate=Ptr("stats.DomainStatsDirtyRate"), Load=Ptr("stats.DomainStatsLoad"))

# ---- guest agent (kubevirt.io/api/core/v1) --------------------------------
S("v1.GuestAgentCommandInfo", name=STRING, enabled=BOOL)
S("v1.VirtualMachineInstanceGuestOSInfo", name=STRING, kernelRelease=STRING, version=STRING,
  prettyName=STRING, versionId=STRING, kernelVersion=STRING, machine=STRING, id=STRING)
GUEST_OS_USER = S("v1.VirtualMachineInstanceGuestOSUser", userName=STRING, domain=STRING,
                  loginTime=FLOAT64)
S("v1.VirtualMachineInstanceFileSystemDisk", serial=STRING, busType=STRING)
FILESYSTEM = S("v1.VirtualMachineInstanceFileSystem", diskName=STRING, mountPoint=STRING,
               fileSystemType=STRING, usedBytes=INT, totalBytes=INT,
               disk=Slice("v1.VirtualMachineInstanceFileSystemDisk"))
S("v1.VirtualMachineInstanceFileSystemInfo", disks=Slice("v1.VirtualMachineInstanceFileSystem"))
GUEST_AGENT_INFO = S("v1.VirtualMachineInstanceGuestAgentInfo", inline=("metav1.TypeMeta",),
                     guestAgentVersion=STRING,
                     supportedCommands=Slice("v1.GuestAgentCommandInfo"), hostname=STRING,
                     os="v1.VirtualMachineInstanceGuestOSInfo", timezone=STRING,
                     userList=Slice("v1.VirtualMachineInstanceGuestOSUser"),
                     fsInfo="v1.VirtualMachineInstanceFileSystemInfo", fsFreezeStatus=STRING)
GUEST_OS_USER_LIST = Slice(GUEST_OS_USER)
FILESYSTEM_LIST = Slice(FILESYSTEM)


def decode(text, gotype, what):
    """Parses `text` and checks it against `gotype`; returns the value.
    Raises GoDecodeError naming every problem (`what` says which document)."""
    try:
        v = parse(text)
    except ValueError as e:
        raise GoDecodeError(what, [f"not JSON: {e}"]) from None
    errs = []
    gotype.check(v, "", errs)
    if errs:
        strict_only = all(_DROPPED in e or _TWICE in e for e in errs)
        raise GoDecodeError(what, errs, go_fails=not strict_only, value=v)
    return v
