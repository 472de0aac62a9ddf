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
//! zeroed pages again, as on first use); [`release_own_stack`] does it for
//! the thread that calls it (the notify bridge, after each event).
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
//! **Start-up's code back.** Every loaded ELF object's read-only
//! segments (the launcher's text and constants, libvirt's, gnutls's, ...)
//! are file-backed, shared with the page cache, and counted in the
//! launcher's RSS and PSS for every page its page tables map. Start-up
//! runs code that never runs again (flag parsing, the converter, the
//! daemons' start, the domain's define and start, the guest agent's first
//! round), and the kernel maps far more than the code touched: on this
//! machine's kernel (6.18) a fault maps the whole large folio of the page
//! cache around it, 128-448 KiB. Measured on the release build (vmi-sata,
//! TCG, standalone, 15 s after GUEST-READY): 7,696 of the launcher's
//! 8,776 KiB of read-only segments resident. `madvise(MADV_DONTNEED)` on
//! them (from gdb, the guest up) left 3,460 KiB, and 30 s later 60 KiB more
//! had come back: what an idle launcher runs. [`release_code`] does that
//! for every object; nothing is lost: a page the launcher runs again is
//! mapped again from the page cache by a minor fault (microseconds, no
//! I/O while the file is cached).
//!
//! What this saves is the launcher's own share: the pages stay in the
//! page cache (the image's files, shared by every pod on the node, and
//! charged once to whichever cgroup read them first), so the node's memory
//! does not change; the launcher's RSS and PSS, and its page tables, do.
//!
//! **When.** Start-up's memory is released when the monitor first sees
//! QEMU (the domain started, [`release_now`]), then whenever the launcher
//! has been quiet for [`SETTLE`] after handling domain or agent events or
//! requests on the command socket ([`activity`], from the notify bridge
//! and from the gRPC runtime when it goes idle after traffic; checked on
//! the monitor's tick by [`release_if_due`]), at most once per
//! [`MIN_SPACING`]. Measured
//! (release build, vmi-sata, standalone): the guest agent's connection
//! and its poller's second round 10 s later, each followed by a
//! notification, map the launcher's text again (6.0–6.5 MiB resident
//! from 2.3–2.9), which a release after them takes back to about 3 MiB.
//!
//! What wakes the launcher when nothing happens is listed in DEVELOPERS.md's
//! design notes ("An idle launcher sleeps").

#![allow(unsafe_code)]

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sets glibc malloc's options for the whole process: one arena (see the
/// module docs) and [`MMAP_THRESHOLD`]. Call before any thread is started; later calls are
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
    // SAFETY: as above; the threshold is a positive byte count.
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
    if ok != 1 {
        tracing::debug!("mallopt(M_MMAP_THRESHOLD) refused");
    }
}

/// Allocations of this many bytes or more get their own mapping, returned
/// to the kernel when freed, instead of a place in the heap (glibc's
/// default starts at 128 KiB and rises). Start-up's and each request's
/// large transient buffers (libvirt's 64 KiB RPC messages, the domain XML
/// and virt-handler's JSON, 10-100 KiB) then leave no holes between the
/// long-lived small allocations. Measured (release build, vmi-sata, TCG,
/// standalone, 50 s after GUEST-READY, set through glibc's tunable):
/// RssAnon 3,100-3,108 KiB with glibc's default, 3,056 with 16 KiB,
/// 3,012 with 8 KiB. The cost is a `mmap`/`munmap` pair and the first
/// touch of fresh pages per such allocation: a few per libvirt call.
pub const MMAP_THRESHOLD: libc::c_int = 8 * 1024;

/// Returns the free pages of the heap to the kernel (`malloc_trim(0)`):
/// called once start-up's memory is no longer needed (see the module docs).
///
/// It also returns the calling thread's stack pages below the current
/// frame ([`release_own_stack`]) and maps no code start-up ran
/// ([`release_code`]); see the module docs.
pub fn release_startup_memory() {
    let started = Instant::now();
    // SAFETY: `malloc_trim` takes malloc's own lock; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
    release_own_stack();
    let code = release_code();
    tracing::debug!(
        code_bytes = code,
        us = started.elapsed().as_micros(),
        "start-up memory released"
    );
}

/// How long the launcher must have been quiet (no domain or agent event
/// handled by the notify bridge, no request on the command socket) before the memory a burst of work mapped
/// and allocated is released: a burst (a lifecycle change, the guest
/// agent's connection and its poller's round, virt-handler's requests
/// that follow a notification, within milliseconds) is over by then.
/// With 5 s, the release after the poller's second round (10 s after the
/// agent connects) came at about the time `bench/launcher.py` measures
/// (15 s after GUEST-READY), and the median launcher there still held
/// 5.8 MiB of text.
pub const SETTLE: Duration = Duration::from_secs(2);

/// The least time between two releases, which bounds their cost under a
/// stream of events: a release takes about a millisecond, and the code
/// the next burst runs is mapped again by a minor fault per large folio
/// (about a hundred).
pub const MIN_SPACING: Duration = Duration::from_secs(10);

/// When the next release is due and when the last one ran.
#[derive(Debug, Default)]
struct Schedule {
    due: Option<Instant>,
    last: Option<Instant>,
}

impl Schedule {
    /// Activity at `now`: a release [`SETTLE`] after the latest activity.
    fn activity(&mut self, now: Instant) {
        let at = now + SETTLE;
        self.due = Some(self.due.map_or(at, |d| d.max(at)));
    }

    /// Whether a release runs at `now` (recorded as the last one): one is
    /// due and the last ran at least [`MIN_SPACING`] ago; a due release
    /// that is too soon moves to [`MIN_SPACING`] after the last one.
    fn take(&mut self, now: Instant) -> bool {
        match self.due {
            Some(d) if d <= now => match self.last {
                Some(l) if now < l + MIN_SPACING => {
                    self.due = Some(l + MIN_SPACING);
                    false
                }
                _ => {
                    self.due = None;
                    self.last = Some(now);
                    true
                }
            },
            _ => false,
        }
    }

    /// A release ran at `now` outside the schedule.
    fn ran(&mut self, now: Instant) {
        self.last = Some(now);
    }
}

static SCHEDULE: Mutex<Schedule> = Mutex::new(Schedule {
    due: None,
    last: None,
});

fn schedule() -> std::sync::MutexGuard<'static, Schedule> {
    SCHEDULE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Releases start-up's memory now ([`release_startup_memory`]) and
/// records it for the schedule's spacing: the monitor calls it when QEMU
/// first appears, on the main thread.
pub fn release_now() {
    schedule().ran(Instant::now());
    release_startup_memory();
}

/// Records activity (see [`SETTLE`]): a release follows once the
/// launcher has been quiet for [`SETTLE`]. Any thread may call it.
pub fn activity() {
    schedule().activity(Instant::now());
}

/// Releases start-up's memory ([`release_startup_memory`]) if the
/// schedule says so (see [`activity`], [`MIN_SPACING`]); the monitor
/// calls it on every tick, on the main thread (whose stack it also trims).
pub fn release_if_due() {
    let run = schedule().take(Instant::now());
    if run {
        release_startup_memory();
    }
}

/// A page-aligned address range `[start, end)`.
type Range = (usize, usize);

/// The page-aligned ranges of one ELF object's read-only segments: each
/// non-writable `PT_LOAD` segment `(vaddr, memsz)` moved by `base` and
/// widened to whole pages, minus the pages of its `PT_GNU_RELRO` range
/// (read-only after relocation, but written by the dynamic loader: its
/// pages are private copies, which `MADV_DONTNEED` would discard).
/// `segments` holds `(vaddr, memsz, writable)` of every `PT_LOAD` segment.
fn read_only_ranges(
    base: usize,
    segments: &[(usize, usize, bool)],
    relro: Option<(usize, usize)>,
    page: usize,
) -> Vec<Range> {
    let down = |a: usize| a & !(page - 1);
    let up = |a: usize| a.saturating_add(page - 1) & !(page - 1);
    let relro = relro.map(|(v, len)| {
        let start = base.wrapping_add(v);
        (down(start), up(start.saturating_add(len)))
    });
    let mut out = Vec::new();
    for &(vaddr, memsz, writable) in segments {
        if writable || memsz == 0 {
            continue;
        }
        let start = base.wrapping_add(vaddr);
        let (lo, hi) = (down(start), up(start.saturating_add(memsz)));
        match relro {
            Some((rlo, rhi)) if rlo < hi && lo < rhi => {
                if lo < rlo {
                    out.push((lo, rlo));
                }
                if rhi < hi {
                    out.push((rhi, hi));
                }
            }
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Drops the page-table entries of the read-only segments of every ELF
/// object loaded in the process (the executable, the shared libraries;
/// not the vDSO) with `madvise(MADV_DONTNEED)`; see the module docs.
/// Returns how many bytes were advised (mapped or not).
///
/// Safe for the process: those pages are never written (no text
/// relocations: a writable segment or the RELRO range is skipped), so
/// their content is the file's and a later access maps it again.
pub fn release_code() -> usize {
    let mut ranges: Vec<Range> = Vec::new();
    // SAFETY: dl_iterate_phdr calls `collect` synchronously, once per
    // loaded object, with the loader's lock held, and `data` is the
    // `ranges` vector borrowed for the call only.
    unsafe {
        libc::dl_iterate_phdr(Some(collect), std::ptr::addr_of_mut!(ranges).cast());
    }
    let mut advised = 0;
    // Each range is non-empty (`read_only_ranges` skips empty segments).
    for (lo, hi) in ranges {
        // SAFETY: [lo, hi) is page-aligned and lies in a read-only,
        // file-backed segment of a loaded object (see `read_only_ranges`):
        // dropping its page-table entries changes no content.
        let rc = unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED) };
        if rc == 0 {
            advised += hi - lo;
        }
    }
    advised
}

/// `dl_iterate_phdr`'s callback for [`release_code`]: appends the
/// object's read-only ranges to the `Vec<Range>` behind `data`.
unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `info` for the call's duration;
    // `data` is the `Vec<Range>` release_code passed.
    let (info, ranges) = unsafe { (&*info, &mut *data.cast::<Vec<Range>>()) };
    // SAFETY: getauxval only reads the auxiliary vector.
    let vdso = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
    if info.dlpi_phdr.is_null() || (vdso != 0 && info.dlpi_addr as usize == vdso) {
        return 0;
    }
    // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let mut segments = Vec::new();
    let mut relro = None;
    for p in phdrs {
        let (vaddr, memsz) = (p.p_vaddr as usize, p.p_memsz as usize);
        match p.p_type {
            libc::PT_LOAD => segments.push((vaddr, memsz, p.p_flags & libc::PF_W != 0)),
            libc::PT_GNU_RELRO => relro = Some((vaddr, memsz)),
            _ => {}
        }
    }
    // SAFETY: sysconf only reads a system constant.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    ranges.extend(read_only_ranges(
        info.dlpi_addr as usize,
        &segments,
        relro,
        page,
    ));
    0
}

/// How much of a stack below the caller's frame is kept resident when
/// the rest is released: the frames of the `madvise` call itself (a few
/// hundred bytes) with a wide margin. What lies further down is not in use
/// (a signal handler's frame is made after the call returns); a deeper
/// call later finds zeroed pages, as on first use.
pub const STACK_KEEP: usize = 16 * 1024;

/// `madvise(MADV_DONTNEED)` of the calling thread's stack from its low
/// end up to [`STACK_KEEP`] below the current frame: the main thread's
/// `[stack]` mapping (from `/proc/self/maps`), another thread's stack as
/// `pthread_getattr_np` gives it. Nothing when the stack cannot be found.
///
/// A thread that runs deep calls in bursts (the notify bridge builds
/// virt-handler's JSON) calls it when a burst is over; the main thread
/// does so through [`release_startup_memory`].
pub fn release_own_stack() {
    let marker = 0u8;
    let sp = std::ptr::addr_of!(marker) as usize;
    // Only the main thread's stack needs /proc/self/maps: the notify
    // bridge calls this after every event and reads nothing.
    let on_main = nix::unistd::gettid() == nix::unistd::getpid();
    let Some((low, high)) = (if on_main {
        main_stack()
    } else {
        thread_stack()
    }) else {
        return;
    };
    if !(low..high).contains(&sp) {
        return;
    }
    // SAFETY: sysconf only reads a system constant.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let low = low.saturating_add(page - 1) & !(page - 1);
    let top = sp.saturating_sub(STACK_KEEP) & !(page - 1);
    if top <= low {
        return;
    }
    // SAFETY: [low, top) is page-aligned and inside this thread's own
    // stack, strictly below every live frame of this thread (the current
    // one is at `sp`, STACK_KEEP higher); no other thread uses this stack.
    // Dropped pages of a private anonymous mapping read back as zeroes, as
    // untouched stack does.
    let rc = unsafe { libc::madvise(low as *mut libc::c_void, top - low, libc::MADV_DONTNEED) };
    if rc != 0 {
        tracing::debug!("madvise of a stack: {}", std::io::Error::last_os_error());
    }
}

/// The calling thread's stack `[low, high)` from `pthread_getattr_np`.
fn thread_stack() -> Option<(usize, usize)> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before it is
    // read and destroyed once; the out-parameters are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0 && !addr.is_null()).then(|| (addr as usize, addr as usize + size))
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

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    #[test]
    fn read_only_segments_widen_to_pages_and_skip_writable_ones() {
        // The release build's layout: R (rodata), R E (text), RW (RELRO
        // then data), RW (data).
        let segs = [
            (0, 0x1d_d374, false),
            (0x1d_e380, 0x6b_3be0, false),
            (0x89_2f60, 0x3_50a0, true),
            (0x8c_8a88, 0x4b60, true),
        ];
        let r = read_only_ranges(0x5000_0000_0000, &segs, Some((0x89_2f60, 0x3_4b28)), PAGE);
        assert_eq!(
            r,
            vec![
                (0x5000_0000_0000, 0x5000_001d_e000),
                (0x5000_001d_e000, 0x5000_0089_2000),
            ]
        );
    }

    #[test]
    fn the_relro_pages_are_cut_out_of_a_read_only_segment() {
        // An object whose RELRO lies inside a segment the loader maps
        // read-only (its pages were written before the mprotect).
        let r = read_only_ranges(0, &[(0x1000, 0x9000, false)], Some((0x3800, 0x1000)), PAGE);
        assert_eq!(r, vec![(0x1000, 0x3000), (0x5000, 0xa000)]);
        // RELRO covering the whole segment: nothing is advised.
        let r = read_only_ranges(0, &[(0x1000, 0x1000, false)], Some((0x1000, 0x1000)), PAGE);
        assert!(r.is_empty());
    }

    /// `RssFile` of this process, KiB (/proc/self/status).
    fn rss_file() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssFile:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn release_code_unmaps_code_and_leaves_a_working_process() {
        let before = rss_file();
        let advised = release_code();
        let after = rss_file();
        // This test binary's text and libc's, at least.
        assert!(advised > 1 << 20, "advised {advised}");
        // The test binary alone maps megabytes of text; what the few calls
        // since the release mapped again is far less.
        assert!(after < before, "RssFile {before} -> {after} KiB");
        // Code and constants come back: formatting, allocation, libc.
        let s = format!("{:?}", (1..5).map(|i| i * 3).collect::<Vec<_>>());
        assert_eq!(s, "[3, 6, 9, 12]");
        assert!(rss_file() > 0);
    }

    #[test]
    fn a_release_follows_the_last_activity_after_the_settling_time() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        assert!(!s.take(t0), "nothing scheduled");
        s.activity(t0);
        s.activity(t0 + Duration::from_secs(3));
        assert!(!s.take(t0 + SETTLE), "activity 3 s later moved it");
        assert!(s.take(t0 + Duration::from_secs(3) + SETTLE));
        assert!(!s.take(t0 + Duration::from_secs(60)), "done once");
    }

    #[test]
    fn a_thread_releases_its_deep_stack_and_runs_on() {
        fn deep(n: u32) -> u64 {
            let buf = [u8::try_from(n % 251).unwrap(); 4096];
            if n == 0 {
                return u64::from(buf[17]);
            }
            std::hint::black_box(&buf);
            deep(n - 1) + u64::from(buf[n as usize % 4096])
        }
        let (before, after, again) = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let (low, high) = thread_stack().expect("the thread's stack");
                let resident = || {
                    let pages = (high - low) / 4096;
                    let mut vec = vec![0u8; pages];
                    // SAFETY: [low, high) is this thread's mapped stack and
                    // `vec` has one byte per page.
                    let rc = unsafe { libc::mincore(low as *mut _, high - low, vec.as_mut_ptr()) };
                    assert_eq!(rc, 0);
                    vec.iter().filter(|b| **b & 1 == 1).count()
                };
                std::hint::black_box(deep(200));
                let before = resident();
                release_own_stack();
                let after = resident();
                let again = deep(200);
                (before, after, again)
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(before >= 150, "deep calls touched {before} pages");
        assert!(after < before / 4, "{before} -> {after} resident pages");
        assert!(again > 0, "deep calls work again after the release");
    }

    #[test]
    fn releases_are_spaced() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        s.ran(t0);
        s.activity(t0);
        assert!(!s.take(t0 + SETTLE), "too soon after the last release");
        assert!(!s.take(t0 + MIN_SPACING - Duration::from_millis(1)));
        assert!(s.take(t0 + MIN_SPACING), "at the spacing");
        // A stream of events: at most one release per spacing.
        let mut runs = 0;
        for i in 0..600 {
            let now = t0 + MIN_SPACING + Duration::from_millis(100 * i);
            s.activity(now);
            runs += usize::from(s.take(now));
        }
        assert_eq!(runs, 0, "never quiet: no release");
        let quiet = t0 + MIN_SPACING + Duration::from_secs(60) + SETTLE;
        assert!(s.take(quiet), "quiet again");
    }
}
