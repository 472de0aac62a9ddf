//! libvirt domain events: lifecycle, reboot, guest agent lifecycle,
//! device removal and job completion, delivered to a channel.
//!
//! libvirt calls event callbacks from its event loop; the `virt` crate has
//! the default event loop implementation ([`virt::event`]) but no wrapper for
//! `virConnectDomainEventRegisterAny`, so this module calls it through
//! `virt::sys` (`unsafe`, as in `agent` and `dirtyrate`, for calls the binding
//! lacks). Each callback copies the
//! event into an owned [`DomainEvent`] and sends it; nothing else happens on
//! libvirt's thread, so a slow consumer never blocks the event loop.
//!
//! A watcher thread keeps the callbacks registered on the launcher's one
//! connection ([`Shared`], as KubeVirt registers them on its only
//! connection); when the daemon dies (the supervisor restarts it) the
//! connection is re-opened, the callbacks re-registered and
//! [`DomainEvent::Reconnected`] sent, so the consumer can resync (KubeVirt
//! sends an ERROR notification and re-reads the domain).

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Once};
use std::thread;
use std::time::Duration;

use virt::connect::Connect;
use virt::sys;

use crate::connection::Shared;

/// An event of the VMI's domain (or a reconnection to the daemon).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainEvent {
    /// `VIR_DOMAIN_EVENT_ID_LIFECYCLE`: `virDomainEventType` and its detail.
    Lifecycle {
        /// Domain name.
        domain: String,
        /// `VIR_DOMAIN_EVENT_*` (0 defined, 1 undefined, 2 started, 3 suspended, 4 resumed, 5 stopped, 6 shutdown ...).
        event: i32,
        /// Event-specific detail.
        detail: i32,
    },
    /// `VIR_DOMAIN_EVENT_ID_REBOOT`.
    Reboot {
        /// Domain name.
        domain: String,
    },
    /// `VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE`: 1 connected, 2 disconnected.
    AgentLifecycle {
        /// Domain name.
        domain: String,
        /// `VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_*`.
        state: i32,
    },
    /// `VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED`.
    DeviceRemoved {
        /// Domain name.
        domain: String,
        /// Alias of the removed device.
        alias: String,
    },
    /// `VIR_DOMAIN_EVENT_ID_JOB_COMPLETED`: a job (migration, backup ...)
    /// ended; its `operation` (`virDomainJobOperation`) and libvirt's
    /// `errmsg`, the two parameters the launcher reads.
    JobCompleted {
        /// Domain name.
        domain: String,
        /// `VIR_DOMAIN_JOB_OPERATION` (9: backup), 0 when absent.
        operation: i32,
        /// `VIR_DOMAIN_JOB_ERRMSG`, when libvirt gave one.
        error: Option<String>,
    },
    /// `VIR_DOMAIN_EVENT_ID_DEVICE_ADDED` (a hot-plugged device is in).
    DeviceAdded {
        /// Domain name.
        domain: String,
        /// Alias of the added device.
        alias: String,
    },
    /// `VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE`: the guest plugged
    /// or unplugged virtio-mem blocks (libvirt has raised or lowered
    /// `<currentMemory>`, which virt-handler reads back).
    MemoryDeviceSizeChanged {
        /// Domain name.
        domain: String,
        /// Alias of the memory device.
        alias: String,
        /// What the device now provides, KiB.
        size_kib: u64,
    },
    /// The guest agent poller saw the OS info, the interfaces or the
    /// freeze status change (KubeVirt's AgentUpdated); not from libvirt.
    AgentUpdated {
        /// Domain name.
        domain: String,
    },
    /// The launcher's runtime metadata changed (a memory dump started or
    /// ended: [`crate::metadata::MetadataCache`]); not from libvirt.
    /// KubeVirt's metadata cache notifies the same way: the domain is
    /// re-read and sent as MODIFIED.
    MetadataUpdated {
        /// Domain name.
        domain: String,
    },
    /// The event connection was (re-)established; state may have changed unseen.
    Reconnected,
    /// A Kubernetes event about the VMI raised while preparing it (e.g.
    /// `ToleratedSmallPV`); not from libvirt. Forwarded to virt-handler
    /// as `HandleK8sEvent`.
    Vmi {
        /// core/v1 Event `type` (`Normal`, `Warning`).
        kind: &'static str,
        /// `reason`.
        reason: &'static str,
        /// `message`.
        message: String,
    },
}

static EVENT_LOOP: Once = Once::new();

/// Stack of libvirt's event loop thread and of the watcher: libvirt's
/// client dispatches its socket I/O and calls this module's callbacks,
/// which copy the event and send it; the watcher makes a few libvirt calls
/// (no XML). 512 KiB: a quarter of std's default, libvirt's C code being
/// of a depth this launcher does not control; glibc can reuse the cached
/// stack of an exited 2 MiB thread for it.
const EVENT_THREAD_STACK: usize = 512 * 1024;

/// Registers libvirt's default event loop implementation (must happen
/// before the connections that should deliver events are opened) and runs
/// it on its own thread. Idempotent.
pub fn start_event_loop() {
    EVENT_LOOP.call_once(|| {
        if let Err(e) = virt::event::event_register_default_impl() {
            tracing::error!("cannot register libvirt's event loop: {e}");
            return;
        }
        let spawned = thread::Builder::new()
            .name("libvirt-events".into())
            .stack_size(EVENT_THREAD_STACK)
            .spawn(|| loop {
                if let Err(e) = virt::event::event_run_default_impl() {
                    tracing::warn!("libvirt event loop: {e}");
                    thread::sleep(Duration::from_secs(1));
                }
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start libvirt's event loop thread: {e}");
        }
    });
}

/// How often the watcher asks whether its connection is alive even when
/// libvirt reported no close: KubeVirt's connection watchdog period
/// (`NewConnection(.., 10*time.Second)`). The close callback normally
/// reports a dead daemon at once.
pub const WATCHDOG: Duration = Duration::from_secs(10);

/// The domain event watcher thread ([`watch`]); [`EventWatch::stop`] ends it.
#[derive(Debug)]
pub struct EventWatch {
    stop: Arc<AtomicBool>,
    wake: Sender<()>,
    thread: thread::JoinHandle<()>,
}

impl EventWatch {
    /// Ends the watch (the callbacks are deregistered, the connection
    /// closed) and waits for the thread.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.send(());
        let _ = self.thread.join();
    }
}

/// Keeps the domain event callbacks registered on `shared`'s current
/// connection, re-registering on the new one after the daemon restarted,
/// until [`EventWatch::stop`]. The thread sleeps until libvirt reports the
/// connection closed (`virConnectRegisterCloseCallback`, called from
/// libvirt's event loop when the daemon goes away), it is stopped, or the
/// [`WATCHDOG`] period passed. `shared` must have been opened after
/// [`start_event_loop`].
///
/// # Errors
/// The thread spawn error.
pub fn watch(shared: Arc<Shared>, tx: Sender<DomainEvent>) -> std::io::Result<EventWatch> {
    start_event_loop();
    let stop = Arc::new(AtomicBool::new(false));
    let (wake, woken) = mpsc::channel::<()>();
    let thread = {
        let (stop, wake) = (Arc::clone(&stop), wake.clone());
        thread::Builder::new()
            .name("domain-events".into())
            .stack_size(EVENT_THREAD_STACK)
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // A reference of the watcher's own: the connection
                    // object lives until it is closed below, even when
                    // another caller has reconnected meanwhile.
                    let conn = shared.reference();
                    if !conn.is_alive().unwrap_or(false) {
                        let mut conn = conn;
                        let _ = conn.close();
                        tracing::warn!(
                            daemon = shared.daemon(),
                            "domain events: no libvirt connection; retrying"
                        );
                        let _ = woken.recv_timeout(Duration::from_secs(1));
                        continue;
                    }
                    let ids = register_all(&conn, &tx);
                    let close = register_close(&conn, &wake);
                    let _ = tx.send(DomainEvent::Reconnected);
                    while !stop.load(Ordering::SeqCst) && conn.is_alive().unwrap_or(false) {
                        let _ = woken.recv_timeout(WATCHDOG);
                    }
                    if close {
                        // SAFETY: `conn` is live and `on_close` is the callback
                        // registered on it; libvirt frees its data (`free_waker`).
                        unsafe {
                            sys::virConnectUnregisterCloseCallback(conn.as_ptr(), Some(on_close));
                        }
                    }
                    for id in ids {
                        // SAFETY: `conn` is a live connection handle and `id` came
                        // from a successful registration on it.
                        unsafe {
                            sys::virConnectDomainEventDeregisterAny(conn.as_ptr(), id);
                        }
                    }
                    let mut conn = conn;
                    let _ = conn.close();
                    if !stop.load(Ordering::SeqCst) {
                        tracing::warn!("domain event connection lost; reconnecting");
                        let _ = woken.recv_timeout(Duration::from_millis(200));
                    }
                }
            })?
    };
    Ok(EventWatch { stop, wake, thread })
}

/// Registers [`on_close`] with a sender of `wake`; false when libvirt
/// refused (the watchdog period then finds a dead connection).
fn register_close(conn: &Connect, wake: &Sender<()>) -> bool {
    let opaque = Box::into_raw(Box::new(wake.clone())) as *mut c_void;
    // SAFETY: `conn` is live; `opaque` is a leaked `Box<Sender<()>>` that
    // libvirt hands to `on_close` and frees through `free_waker` once.
    let rc = unsafe {
        sys::virConnectRegisterCloseCallback(
            conn.as_ptr(),
            Some(on_close),
            opaque,
            Some(free_waker),
        )
    };
    if rc < 0 {
        // SAFETY: libvirt did not take `opaque`; it is still ours.
        unsafe { free_waker(opaque) };
        tracing::warn!(
            "cannot register libvirt's close callback; the watchdog checks the connection"
        );
        return false;
    }
    true
}

unsafe extern "C" fn on_close(_conn: sys::virConnectPtr, _reason: c_int, opaque: *mut c_void) {
    let wake = &*(opaque as *const Sender<()>);
    let _ = wake.send(());
}

unsafe extern "C" fn free_waker(opaque: *mut c_void) {
    drop(Box::from_raw(opaque as *mut Sender<()>));
}

fn domain_name(dom: sys::virDomainPtr) -> String {
    // SAFETY: libvirt passes a valid domain pointer to event callbacks for
    // the duration of the call; the returned name is owned by the domain
    // object and copied here before returning.
    unsafe {
        let p = sys::virDomainGetName(dom);
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

/// Sends `ev` through the sender behind `opaque`.
///
/// # Safety
/// `opaque` must be the pointer registered by [`register_all`] (a leaked
/// `Box<Sender<DomainEvent>>`), which lives until libvirt calls [`free_sender`].
unsafe fn send(opaque: *mut c_void, ev: DomainEvent) {
    let tx = &*(opaque as *const Sender<DomainEvent>);
    let _ = tx.send(ev);
}

unsafe extern "C" fn on_lifecycle(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    event: c_int,
    detail: c_int,
    opaque: *mut c_void,
) -> c_int {
    send(
        opaque,
        DomainEvent::Lifecycle {
            domain: domain_name(dom),
            event,
            detail,
        },
    );
    0
}

unsafe extern "C" fn on_reboot(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    opaque: *mut c_void,
) {
    send(
        opaque,
        DomainEvent::Reboot {
            domain: domain_name(dom),
        },
    );
}

unsafe extern "C" fn on_agent(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    state: c_int,
    _reason: c_int,
    opaque: *mut c_void,
) {
    send(
        opaque,
        DomainEvent::AgentLifecycle {
            domain: domain_name(dom),
            state,
        },
    );
}

unsafe extern "C" fn on_device_removed(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    alias: *const c_char,
    opaque: *mut c_void,
) {
    let alias = if alias.is_null() {
        String::new()
    } else {
        CStr::from_ptr(alias).to_string_lossy().into_owned()
    };
    send(
        opaque,
        DomainEvent::DeviceRemoved {
            domain: domain_name(dom),
            alias,
        },
    );
}

/// Longest job error message kept from an event.
const MAX_JOB_ERROR: usize = 4096;

unsafe extern "C" fn on_job_completed(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    params: sys::virTypedParameterPtr,
    nparams: c_int,
    opaque: *mut c_void,
) {
    let mut operation = 0;
    let mut error = None;
    if !params.is_null() {
        for i in 0..usize::try_from(nparams).unwrap_or(0) {
            let p = &*params.add(i);
            let field = CStr::from_ptr(p.field.as_ptr()).to_bytes();
            if field == sys::VIR_DOMAIN_JOB_OPERATION.to_bytes()
                && p.type_ == sys::VIR_TYPED_PARAM_INT as c_int
            {
                operation = p.value.i;
            } else if field == sys::VIR_DOMAIN_JOB_ERRMSG.to_bytes()
                && p.type_ == sys::VIR_TYPED_PARAM_STRING as c_int
                && !p.value.s.is_null()
            {
                let s = CStr::from_ptr(p.value.s).to_string_lossy();
                error = Some(api::text::cut(&s, MAX_JOB_ERROR));
            }
        }
    }
    send(
        opaque,
        DomainEvent::JobCompleted {
            domain: domain_name(dom),
            operation,
            error,
        },
    );
}

unsafe extern "C" fn on_device_added(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    alias: *const c_char,
    opaque: *mut c_void,
) {
    send(
        opaque,
        DomainEvent::DeviceAdded {
            domain: domain_name(dom),
            alias: c_text(alias),
        },
    );
}

unsafe extern "C" fn on_memory_device_size_change(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    alias: *const c_char,
    size: std::os::raw::c_ulonglong,
    opaque: *mut c_void,
) {
    send(
        opaque,
        DomainEvent::MemoryDeviceSizeChanged {
            domain: domain_name(dom),
            alias: c_text(alias),
            size_kib: size,
        },
    );
}

/// A C string libvirt passes to a callback, empty when NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
unsafe fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

unsafe extern "C" fn free_sender(opaque: *mut c_void) {
    drop(Box::from_raw(opaque as *mut Sender<DomainEvent>));
}

/// Registers the callbacks (KubeVirt's: lifecycle, reboot, agent,
/// device added and removed, memory device size change; job completed
/// for backups); returns their registration ids.
fn register_all(conn: &Connect, tx: &Sender<DomainEvent>) -> Vec<c_int> {
    // The C API takes every callback as the generic type and calls it with
    // the signature of its event id (libvirt's VIR_DOMAIN_EVENT_CALLBACK).
    type Generic = unsafe extern "C" fn(sys::virConnectPtr, sys::virDomainPtr, *mut c_void);
    // SAFETY: each transmute only changes the declared signature of a
    // function pointer; libvirt invokes it with the signature that matches
    // the event id it is registered for, which is the original one.
    type AliasCallback =
        unsafe extern "C" fn(sys::virConnectPtr, sys::virDomainPtr, *const c_char, *mut c_void);
    let callbacks: [(c_int, Generic); 7] = unsafe {
        [
            (
                sys::VIR_DOMAIN_EVENT_ID_LIFECYCLE as c_int,
                std::mem::transmute::<
                    unsafe extern "C" fn(
                        sys::virConnectPtr,
                        sys::virDomainPtr,
                        c_int,
                        c_int,
                        *mut c_void,
                    ) -> c_int,
                    Generic,
                >(on_lifecycle),
            ),
            (
                sys::VIR_DOMAIN_EVENT_ID_REBOOT as c_int,
                on_reboot as Generic,
            ),
            (
                sys::VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE as c_int,
                std::mem::transmute::<
                    unsafe extern "C" fn(
                        sys::virConnectPtr,
                        sys::virDomainPtr,
                        c_int,
                        c_int,
                        *mut c_void,
                    ),
                    Generic,
                >(on_agent),
            ),
            (
                sys::VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED as c_int,
                std::mem::transmute::<
                    unsafe extern "C" fn(
                        sys::virConnectPtr,
                        sys::virDomainPtr,
                        *const c_char,
                        *mut c_void,
                    ),
                    Generic,
                >(on_device_removed),
            ),
            (
                sys::VIR_DOMAIN_EVENT_ID_DEVICE_ADDED as c_int,
                std::mem::transmute::<AliasCallback, Generic>(on_device_added),
            ),
            (
                sys::VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE as c_int,
                std::mem::transmute::<
                    unsafe extern "C" fn(
                        sys::virConnectPtr,
                        sys::virDomainPtr,
                        *const c_char,
                        std::os::raw::c_ulonglong,
                        *mut c_void,
                    ),
                    Generic,
                >(on_memory_device_size_change),
            ),
            (
                sys::VIR_DOMAIN_EVENT_ID_JOB_COMPLETED as c_int,
                std::mem::transmute::<
                    unsafe extern "C" fn(
                        sys::virConnectPtr,
                        sys::virDomainPtr,
                        sys::virTypedParameterPtr,
                        c_int,
                        *mut c_void,
                    ),
                    Generic,
                >(on_job_completed),
            ),
        ]
    };
    let mut ids = Vec::new();
    for (id, cb) in callbacks {
        let opaque = Box::into_raw(Box::new(tx.clone())) as *mut c_void;
        // SAFETY: `conn` is live; `opaque` is a leaked Box that libvirt
        // hands back to `free_sender` exactly once when the callback is
        // deregistered or the connection closes; on failure it is freed here.
        let ret = unsafe {
            sys::virConnectDomainEventRegisterAny(
                conn.as_ptr(),
                std::ptr::null_mut(),
                id,
                Some(cb),
                opaque,
                Some(free_sender),
            )
        };
        if ret < 0 {
            tracing::warn!(event_id = id, "cannot register the domain event callback");
            // SAFETY: registration failed, so libvirt did not take ownership.
            unsafe { free_sender(opaque) };
        } else {
            ids.push(ret);
        }
    }
    ids
}
