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
//! by ~10 KiB a minute, slowing; whether it levels off needs a longer
//! series (the closing note of issue 20). Contention is negligible: the
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
pub fn release_startup_memory() {
    // SAFETY: `malloc_trim` takes malloc's own lock; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}
