//! The launcher's memory footprint, set up in one place (issue 20 item 3,
//! issue 19's soak finding).
//!
//! The launcher runs beside every VM for its whole life, mostly idle, so
//! what it keeps resident counts more than allocation speed. Its threads
//! (about a dozen: the monitor, the gRPC runtime, the notify bridge, the
//! domain event watcher, libvirt's event loop, the agent poller, the
//! daemons' supervisors and log readers, the reaper, a DHCP server, and
//! tokio's blocking-pool threads for libvirt calls, which come and go)
//! allocate little and rarely at the same time.
//!
//! **One malloc arena.** glibc gives a thread that finds the arenas in use
//! an arena of its own, up to 8 per core, and never returns one; each keeps
//! the pages it ever used for its free lists. In the soak (`bench/soak.py`:
//! virt-handler's RPCs twice a second, qemu-ga restarted every minute;
//! debug build of the code before this module, sampled every 20 s by
//! mapping) the launcher's RssAnon rose 4,912 → 6,052 KiB in the first
//! 4 minutes and then stayed flat for 9 minutes; the rise was in the
//! arenas (464 → 1,312 KiB, 15 of them: tokio's blocking-pool threads
//! come and go, and each new thread may take another arena) and in the
//! stacks of those threads, while the main heap stayed at 428-432 KiB.
//! That is the bounded rise issue 19 saw (3,884 → 4,284 KiB). With
//! `M_ARENA_MAX` = 1 every thread shares the main heap and freed memory is
//! reused by whichever thread allocates next: in the same soak with this
//! build the arenas are gone and the heap went 1,392 → 1,504 KiB over
//! 10 minutes (below the 1,744 KiB of heap + arenas before), still rising
//! by ~10 KiB a minute, slowing. Contention is negligible: the
//! threads mostly sleep, and an allocation holds the lock for nanoseconds.
//! [`configure_allocator`] sets it first thing in `main`, before any
//! thread exists; glibc reads it when a thread first needs an arena.
//!
//! **Start-up's memory back.** Parsing, converting, defining and starting
//! the domain peak at several MiB; once QEMU runs the launcher only serves
//! requests. [`release_startup_memory`] (`malloc_trim(0)`) hands the free
//! pages inside the heap back to the kernel once, when the monitor first
//! sees QEMU: glibc only ever trims the top of the heap on its own.
//!
//! **Start-up's stack back.** The main thread parses, converts and starts
//! the domain before it becomes the monitor; the stack pages those deep
//! calls touched stay resident for the launcher's life (glibc hands back
//! an exiting thread's stack below its last frame, never the main one's).
//! [`release_startup_memory`] does the same for the main thread: the pages
//! of its stack mapping more than [`STACK_KEEP`] below the current frame
//! are returned with `madvise(MADV_DONTNEED)` (a later deeper call finds
//! zeroed pages again, as on first use).
//!
//! **What the slow rise is (issue 19's heap profile).** With one arena
//! the soak's RssAnon still rises after the first minute, all of it in
//! the `[heap]` mapping (thread stacks, other anonymous mappings and the
//! binary's written pages stay flat; debug build). It is not a leak:
//! heaptrack attached to the inner launcher from minute 1.5 to 13 of a
//! soak saw the live bytes allocated since the attach reach 42 KiB by
//! minute 4 and stay there (+1 KiB to minute 11); what was live at the end
//! (61 KiB) was requests in flight and per-connection buffers, no site
//! growing with the number of calls. glibc's own count (`malloc_stats`)
//! showed the heap taken from the kernel growing faster than what is in
//! use (minute 2: 1,472 KiB, 1,134 in use; minute 8: 1,628, 1,200), i.e.
//! free chunks between live ones: fragmentation from the allocation churn
//! (about 14,000 malloc calls a second under the soak's load, most of
//! them the `serde_json::Value` trees of the api.Domain JSON built for
//! every GetDomain and notification, with transient peaks of ~250 KiB).
//! It levels off: a 42-minute soak of this build (debug, root, TCG)
//! sampled every minute, heap after minute 1 by 10-minute stretch +148,
//! +76, +40, +8, +0 KiB (1,604 KiB at minute 25, 1,612 at minute 42;
//! RssAnon 5,696 → 5,984 KiB, 5,976 from minute 25 on; descriptors 31).
//! Tried and not kept, as neither changed the rise beyond noise in
//! side-by-side soaks: `malloc_trim(0)` every minute (it returned 60-130
//! KiB, touched again within the minute; heap at minute 18 1,544 KiB with
//! the trim and the threshold below, 1,560 without) and
//! `M_MMAP_THRESHOLD` = 64 KiB for libvirt's 65,540-byte RPC message
//! buffers (one per remote call). Lowering the churn itself (the JSON
//! built without `Value` trees) is the lead left.
//!
//! What wakes the launcher when nothing happens is listed in DEVELOPERS.md's
//! design notes ("An idle launcher sleeps").

#![allow(unsafe_code)]

/// Sets glibc malloc's options for the whole process: one arena (see the
/// module docs). Call before any thread is started; later calls are
/// harmless. A refusal is logged, never fatal (the launcher works with
/// glibc's defaults, with more memory).
pub fn configure_allocator() {
    // SAFETY: `mallopt` only sets a malloc parameter; M_ARENA_MAX takes any
    // positive count. No allocation is in progress on another thread: none
    // exists yet.
    let ok = unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    if ok != 1 {
        tracing::debug!("mallopt(M_ARENA_MAX, 1) refused");
    }
}

/// Returns the free pages of the heap to the kernel (`malloc_trim(0)`):
/// called once start-up's memory is no longer needed (see the module docs).
///
/// On the main thread it also returns the main stack's pages below the
/// current frame (see the module docs); elsewhere only the heap's.
pub fn release_startup_memory() {
    // SAFETY: `malloc_trim` takes malloc's own lock; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
    release_main_stack();
}

/// How much of the main stack below the caller's frame is kept resident:
/// room for the monitor's own calls and for signal handlers.
pub const STACK_KEEP: usize = 64 * 1024;

/// `madvise(MADV_DONTNEED)` of the main thread's stack mapping
/// (`[stack]` in `/proc/self/maps`) from its low end up to [`STACK_KEEP`]
/// below the current frame; nothing when called on another thread (the
/// frame is not inside that mapping) or when the maps cannot be read.
fn release_main_stack() {
    let marker = 0u8;
    let sp = std::ptr::addr_of!(marker) as usize;
    let Some((low, high)) = main_stack() else {
        return;
    };
    if !(low..high).contains(&sp) {
        return;
    }
    // SAFETY: sysconf only reads a system constant.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let top = sp.saturating_sub(STACK_KEEP) & !(page - 1);
    if top <= low {
        return;
    }
    // SAFETY: [low, top) is page-aligned and inside this process' main
    // stack mapping, strictly below every live frame of this thread (the
    // current one is at `sp`, STACK_KEEP higher); no other thread uses the
    // main stack. Dropped pages of a private anonymous mapping read back
    // as zeroes, as untouched stack does.
    let rc = unsafe { libc::madvise(low as *mut libc::c_void, top - low, libc::MADV_DONTNEED) };
    if rc != 0 {
        tracing::debug!(
            "madvise of the main stack: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The main thread's stack mapping `[low, high)` from `/proc/self/maps`.
fn main_stack() -> Option<(usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[stack]"))?;
    let (low, rest) = line.split_once('-')?;
    let high = rest.split_whitespace().next()?;
    Some((
        usize::from_str_radix(low, 16).ok()?,
        usize::from_str_radix(high, 16).ok()?,
    ))
}
