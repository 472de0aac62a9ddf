//! The guest's memory dirty rate, as KubeVirt's `GetDomainDirtyRateStats`
//! reports it (v1.6 `pkg/virt-launcher/virtwrap/manager.go`
//! `GetDomainDirtyRateStats`, and the command server's handler of the same
//! name): a page-sampling calculation of [`CALC_DURATION`] started with
//! libvirt's `virDomainStartDirtyRateCalc` (flags
//! `VIR_DOMAIN_DIRTYRATE_MODE_PAGE_SAMPLING`), then read back from the
//! `dirtyrate.*` fields of the bulk statistics (`virDomainListGetStats` with
//! `VIR_DOMAIN_STATS_DIRTYRATE`), polled every [`RETRY_INTERVAL`] for up to
//! [`RETRY_BUDGET`] while libvirt still says "measuring". The result is
//! kept for [`CACHE_TTL`] ([`DirtyRateCache`]); callers that arrive while a
//! calculation runs wait for it and share its result, so calculations never
//! overlap.
//!
//! What virt-handler gets ([`rate_mbs`]): `dirtyRateMbs` in MiB/s when
//! libvirt set `dirtyrate.megabytes_per_second`, else `success=false` with
//! [`NOT_SET`]. When libvirt has no running domain to report, KubeVirt's
//! manager hands its command server a nil result, which that handler does
//! not check (a nil dereference in Go); here that case is [`NOT_SET`] too,
//! answered at once without a calculation.
//!
//! The `virt` binding (0.4) has neither `virDomainStartDirtyRateCalc` nor a
//! reader of bulk statistics records, so [`LibvirtDirtyRate`] calls them
//! through `virt::sys`; the `unsafe` blocks are only those FFI calls.

#![allow(unsafe_code)]

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use virt::domain::Domain as VirtDomain;
use virt::sys;

use crate::manager::{LibvirtDomainManager, ManagerError};
use wire::stats::DomainStatsDirtyRate;

/// Length of one calculation (KubeVirt's command server asks for 1 s, the
/// manager's minimum).
pub const CALC_DURATION: Duration = Duration::from_secs(1);
/// How long a result is served before a new calculation (KubeVirt's
/// `domainDirtyRateStatsCache`, 3 s).
pub const CACHE_TTL: Duration = Duration::from_secs(3);
/// Pause between reads while libvirt reports the calculation as measuring.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(200);
/// Longest time spent re-reading a calculation that is still measuring.
pub const RETRY_BUDGET: Duration = Duration::from_secs(1);
/// KubeVirt's message when the rate is not set.
pub const NOT_SET: &str = "Dirty rate MegabytesPerSecondSet is false";

/// Why there is no dirty rate. Its text is what virt-handler gets in
/// `Response.message` (KubeVirt's words where KubeVirt has them).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DirtyRateError {
    /// A libvirt call failed (KubeVirt's manager wraps it so).
    #[error("failed to get domain dirty rate stats: {0}")]
    Libvirt(String),
    /// No result, or libvirt did not set `dirtyrate.megabytes_per_second`
    /// ([`NOT_SET`], KubeVirt's command server's message).
    #[error("Dirty rate MegabytesPerSecondSet is false")]
    NotSet,
    /// A shared calculation ended and left no result (not expected).
    #[error("dirty rate calculation ended without a result")]
    NoResult,
    /// The calculation panicked; its waiters get this.
    #[error("dirty rate calculation panicked")]
    Panicked,
}

/// `VIR_DOMAIN_DIRTYRATE_UNSTARTED`: no calculation has been started.
pub const STATUS_UNSTARTED: i32 = 0;
/// `VIR_DOMAIN_DIRTYRATE_MEASURING`: the calculation is running.
pub const STATUS_MEASURING: i32 = 1;
/// `VIR_DOMAIN_DIRTYRATE_MEASURED`: the rate is available.
pub const STATUS_MEASURED: i32 = 2;

/// One domain's dirty-rate calculation, as [`measure`] drives it. The
/// launcher's is [`LibvirtDirtyRate`]; unit tests use fakes.
pub trait DirtyRateDomain {
    /// Starts a calculation of `seconds` (page sampling); `Ok(false)` when
    /// no running domain exists.
    ///
    /// # Errors
    /// [`DirtyRateError::Libvirt`].
    fn start_calc(&self, seconds: i32) -> Result<bool, DirtyRateError>;
    /// The `dirtyrate.*` statistics now; `Ok(None)` when no running domain
    /// exists.
    ///
    /// # Errors
    /// [`DirtyRateError::Libvirt`].
    fn query(&self) -> Result<Option<DomainStatsDirtyRate>, DirtyRateError>;
    /// Waits `d` (fakes advance their clock instead).
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// One calculation of `calc` (rounded down to whole seconds, at least 1 s,
/// as libvirt takes seconds and KubeVirt's minimum is 1 s): start it, wait
/// `calc`, read the statistics, and re-read them every [`RETRY_INTERVAL`]
/// for up to [`RETRY_BUDGET`] while libvirt says measuring. A calculation
/// still measuring after that is returned as read (without a rate).
/// `Ok(None)` when no running domain exists.
///
/// # Errors
/// The first failed libvirt call ([`DirtyRateError::Libvirt`]).
pub fn measure(dom: &dyn DirtyRateDomain, calc: Duration) -> DirtyRateResult {
    let calc = calc.max(CALC_DURATION);
    let seconds = i32::try_from(calc.as_secs()).unwrap_or(i32::MAX);
    if !dom.start_calc(seconds)? {
        return Ok(None);
    }
    dom.sleep(calc);
    let mut waited = Duration::ZERO;
    loop {
        let Some(stat) = dom.query()? else {
            return Ok(None);
        };
        let measuring = stat.calc_status_set && stat.calc_status == STATUS_MEASURING;
        if !measuring || waited >= RETRY_BUDGET {
            return Ok(Some(stat));
        }
        dom.sleep(RETRY_INTERVAL);
        waited += RETRY_INTERVAL;
    }
}

/// What virt-handler gets for a result: the rate in MiB/s, or [`NOT_SET`]
/// when there is no result (no running domain) or libvirt did not set
/// `dirtyrate.megabytes_per_second`.
///
/// # Errors
/// [`DirtyRateError::NotSet`] ([`NOT_SET`]).
pub fn rate_mbs(stat: Option<&DomainStatsDirtyRate>) -> Result<i64, DirtyRateError> {
    match stat {
        Some(s) if s.megabytes_per_second_set => Ok(s.megabytes_per_second),
        _ => Err(DirtyRateError::NotSet),
    }
}

/// A result: the statistics (`None`: no running domain) or the failure.
pub type DirtyRateResult = Result<Option<DomainStatsDirtyRate>, DirtyRateError>;

#[derive(Default)]
struct CacheState {
    /// The last successful result and when its calculation ended.
    last: Option<(Instant, Option<DomainStatsDirtyRate>)>,
    /// A calculation is running.
    running: bool,
    /// Bumped when a calculation ends; waiters take that calculation's result.
    generation: u64,
    /// Result of the calculation that ended last (shared with its waiters).
    latest: Option<DirtyRateResult>,
}

/// The last result, served for [`CACHE_TTL`] (KubeVirt's 3 s time-defined
/// cache). One calculation at a time: a caller that finds one running
/// waits for it and gets its result, success or failure. Failures are not
/// kept: the next caller after them starts a new calculation.
pub struct DirtyRateCache {
    ttl: Duration,
    state: Mutex<CacheState>,
    done: Condvar,
}

impl Default for DirtyRateCache {
    fn default() -> Self {
        DirtyRateCache::new(CACHE_TTL)
    }
}

impl DirtyRateCache {
    /// An empty cache whose results live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        DirtyRateCache {
            ttl,
            state: Mutex::new(CacheState::default()),
            done: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached result when younger than the TTL, else the result of a
    /// calculation by `calc` (run by this caller, or the one already
    /// running). Blocks for the length of a calculation.
    ///
    /// # Errors
    /// The calculation's failure message.
    pub fn get(&self, calc: impl FnOnce() -> DirtyRateResult) -> DirtyRateResult {
        self.get_at(Instant::now, calc)
    }

    /// [`DirtyRateCache::get`] with the clock `now` (tests pass their own).
    ///
    /// # Errors
    /// The calculation's failure message.
    pub fn get_at(
        &self,
        now: impl Fn() -> Instant,
        calc: impl FnOnce() -> DirtyRateResult,
    ) -> DirtyRateResult {
        let mut st = self.lock();
        if let Some((at, v)) = &st.last {
            if now().saturating_duration_since(*at) < self.ttl {
                return Ok(v.clone());
            }
        }
        if st.running {
            let gen = st.generation;
            while st.generation == gen {
                st = self.done.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            return st.latest.clone().unwrap_or(Err(DirtyRateError::NoResult));
        }
        st.running = true;
        drop(st);
        // A panicking calculation must not leave waiters blocked forever.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(calc))
            .unwrap_or(Err(DirtyRateError::Panicked));
        let mut st = self.lock();
        if let Ok(v) = &res {
            st.last = Some((now(), v.clone()));
        }
        st.latest = Some(res.clone());
        st.running = false;
        st.generation = st.generation.wrapping_add(1);
        drop(st);
        self.done.notify_all();
        res
    }
}

/// [`DirtyRateDomain`] on the launcher's libvirt: the domain `name` through
/// the DomainManager's connection, taken only for each call (never across
/// the calculation's wait).
pub struct LibvirtDirtyRate<'a> {
    /// The manager whose connection is used.
    pub manager: &'a LibvirtDomainManager,
    /// The domain's name (`<namespace>_<vmi>`).
    pub name: &'a str,
}

fn libvirt_error() -> ManagerError {
    virt::error::Error::last_error().into()
}

/// `virDomainStartDirtyRateCalc(dom, seconds, PAGE_SAMPLING)`.
fn start_dirty_rate_calc(d: &VirtDomain, seconds: i32) -> Result<(), ManagerError> {
    // SAFETY: `d` is a live domain handle for the duration of the call; the
    // function takes no pointers besides it.
    let r = unsafe {
        sys::virDomainStartDirtyRateCalc(
            d.as_ptr(),
            seconds,
            sys::VIR_DOMAIN_DIRTYRATE_MODE_PAGE_SAMPLING,
        )
    };
    if r < 0 {
        return Err(libvirt_error());
    }
    Ok(())
}

/// The `dirtyrate.*` fields of `d`'s bulk statistics record.
fn dirty_rate_stats(d: &VirtDomain) -> Result<DomainStatsDirtyRate, ManagerError> {
    let mut doms = [d.as_ptr(), std::ptr::null_mut()];
    let mut records: *mut sys::virDomainStatsRecordPtr = std::ptr::null_mut();
    // SAFETY: `doms` is a NULL-terminated array of live domain handles;
    // libvirt allocates `records` (freed below) and fills it with one
    // record per listed domain.
    let n = unsafe {
        sys::virDomainListGetStats(
            doms.as_mut_ptr(),
            sys::VIR_DOMAIN_STATS_DIRTYRATE,
            &mut records,
            0,
        )
    };
    if n < 0 {
        return Err(libvirt_error());
    }
    let mut out = DomainStatsDirtyRate::default();
    let mut failed = None;
    if n > 0 && !records.is_null() {
        // SAFETY: `records` holds `n` (>0) valid record pointers; the
        // first record's `params` array has `nparams` entries, alive until
        // the list is freed below. The getters copy scalars out.
        unsafe {
            let rec = *records;
            if !rec.is_null() {
                let (p, np) = ((*rec).params, (*rec).nparams);
                let mut status = 0;
                let mut start = 0;
                let mut period = 0;
                let mut mbs = 0;
                let found = [
                    sys::virTypedParamsGetInt(
                        p,
                        np,
                        sys::VIR_DOMAIN_STATS_DIRTYRATE_CALC_STATUS.as_ptr(),
                        &mut status,
                    ),
                    sys::virTypedParamsGetLLong(
                        p,
                        np,
                        sys::VIR_DOMAIN_STATS_DIRTYRATE_CALC_START_TIME.as_ptr(),
                        &mut start,
                    ),
                    sys::virTypedParamsGetInt(
                        p,
                        np,
                        sys::VIR_DOMAIN_STATS_DIRTYRATE_CALC_PERIOD.as_ptr(),
                        &mut period,
                    ),
                    sys::virTypedParamsGetLLong(
                        p,
                        np,
                        sys::VIR_DOMAIN_STATS_DIRTYRATE_MEGABYTES_PER_SECOND.as_ptr(),
                        &mut mbs,
                    ),
                ];
                if found.iter().any(|&f| f < 0) {
                    failed = Some(libvirt_error());
                }
                out = DomainStatsDirtyRate {
                    calc_status_set: found[0] == 1,
                    calc_status: status,
                    calc_start_time_set: found[1] == 1,
                    calc_start_time: start,
                    calc_period_set: found[2] == 1,
                    calc_period: period,
                    megabytes_per_second_set: found[3] == 1,
                    megabytes_per_second: mbs,
                };
            }
        }
    }
    if !records.is_null() {
        // SAFETY: `records` came from virDomainListGetStats and is freed once.
        unsafe { sys::virDomainStatsRecordListFree(records) };
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn failed(e: ManagerError) -> DirtyRateError {
    DirtyRateError::Libvirt(e.to_string())
}

impl DirtyRateDomain for LibvirtDirtyRate<'_> {
    fn start_calc(&self, seconds: i32) -> Result<bool, DirtyRateError> {
        let started = self
            .manager
            .with_domain(self.name, |d| {
                if !d.is_active()? {
                    return Ok(false);
                }
                start_dirty_rate_calc(d, seconds)?;
                Ok(true)
            })
            .map_err(failed)?;
        Ok(started.unwrap_or(false))
    }

    fn query(&self) -> Result<Option<DomainStatsDirtyRate>, DirtyRateError> {
        let stat = self
            .manager
            .with_domain(self.name, |d| {
                if !d.is_active()? {
                    return Ok(None);
                }
                dirty_rate_stats(d).map(Some)
            })
            .map_err(failed)?;
        Ok(stat.flatten())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    /// A domain whose calculation reads "measuring" `measuring_reads` times,
    /// then "measured" with `mbs`; it records the calls and sleeps.
    #[derive(Default)]
    struct Fake {
        running: bool,
        measuring_reads: Cell<u32>,
        mbs: Option<i64>,
        started: RefCell<Vec<i32>>,
        queries: Cell<u32>,
        slept: RefCell<Vec<Duration>>,
        fail_query: Option<String>,
    }

    impl DirtyRateDomain for Fake {
        fn start_calc(&self, seconds: i32) -> Result<bool, DirtyRateError> {
            self.started.borrow_mut().push(seconds);
            Ok(self.running)
        }
        fn query(&self) -> Result<Option<DomainStatsDirtyRate>, DirtyRateError> {
            self.queries.set(self.queries.get() + 1);
            if let Some(e) = &self.fail_query {
                return Err(DirtyRateError::Libvirt(e.clone()));
            }
            if !self.running {
                return Ok(None);
            }
            let measuring = self.measuring_reads.get() > 0;
            if measuring {
                self.measuring_reads.set(self.measuring_reads.get() - 1);
            }
            let mut s = DomainStatsDirtyRate {
                calc_status_set: true,
                calc_status: if measuring {
                    STATUS_MEASURING
                } else {
                    STATUS_MEASURED
                },
                calc_period_set: true,
                calc_period: 1,
                ..Default::default()
            };
            if let (false, Some(m)) = (measuring, self.mbs) {
                s.megabytes_per_second_set = true;
                s.megabytes_per_second = m;
            }
            Ok(Some(s))
        }
        fn sleep(&self, d: Duration) {
            self.slept.borrow_mut().push(d);
        }
    }

    fn running(mbs: Option<i64>, measuring_reads: u32) -> Fake {
        Fake {
            running: true,
            mbs,
            measuring_reads: Cell::new(measuring_reads),
            ..Default::default()
        }
    }

    #[test]
    fn measured_at_once_is_one_second_of_page_sampling_and_one_read() {
        let f = running(Some(42), 0);
        let s = measure(&f, CALC_DURATION).unwrap().unwrap();
        assert_eq!(rate_mbs(Some(&s)), Ok(42));
        assert_eq!(*f.started.borrow(), vec![1]);
        assert_eq!(*f.slept.borrow(), vec![Duration::from_secs(1)]);
        assert_eq!(f.queries.get(), 1);
    }

    #[test]
    fn shorter_calculations_are_raised_to_one_second() {
        let f = running(Some(1), 0);
        measure(&f, Duration::from_millis(10)).unwrap();
        assert_eq!(*f.started.borrow(), vec![1]);
        let f = running(Some(1), 0);
        measure(&f, Duration::from_millis(2500)).unwrap();
        assert_eq!(*f.started.borrow(), vec![2]);
    }

    #[test]
    fn still_measuring_is_read_again_every_200ms() {
        let f = running(Some(7), 3);
        let s = measure(&f, CALC_DURATION).unwrap().unwrap();
        assert_eq!(rate_mbs(Some(&s)), Ok(7));
        assert_eq!(f.queries.get(), 4);
        assert_eq!(
            *f.slept.borrow(),
            [vec![Duration::from_secs(1)], vec![RETRY_INTERVAL; 3]].concat()
        );
    }

    #[test]
    fn retries_stop_after_one_second_and_the_rate_is_not_set() {
        let f = running(Some(7), 100);
        let s = measure(&f, CALC_DURATION).unwrap().unwrap();
        assert_eq!(s.calc_status, STATUS_MEASURING);
        // 1 s of retries at 200 ms: five waits, six reads.
        assert_eq!(f.queries.get(), 6);
        let retried: Duration = f.slept.borrow()[1..].iter().sum();
        assert_eq!(retried, RETRY_BUDGET);
        assert_eq!(rate_mbs(Some(&s)), Err(DirtyRateError::NotSet));
    }

    #[test]
    fn measured_without_a_rate_is_kubevirts_not_set_message() {
        let f = running(None, 0);
        let s = measure(&f, CALC_DURATION).unwrap();
        assert_eq!(
            rate_mbs(s.as_ref()).map_err(|e| e.to_string()),
            Err("Dirty rate MegabytesPerSecondSet is false".to_owned())
        );
    }

    #[test]
    fn a_failed_libvirt_call_is_kubevirts_message() {
        let f = Fake {
            running: true,
            fail_query: Some("Domain not found".into()),
            ..Fake::default()
        };
        assert_eq!(
            measure(&f, CALC_DURATION).unwrap_err().to_string(),
            "failed to get domain dirty rate stats: Domain not found"
        );
    }

    #[test]
    fn no_running_domain_is_none_without_waiting_and_not_set() {
        let f = Fake::default();
        assert_eq!(measure(&f, CALC_DURATION), Ok(None));
        assert!(f.slept.borrow().is_empty());
        assert_eq!(f.queries.get(), 0);
        assert_eq!(rate_mbs(None), Err(DirtyRateError::NotSet));
    }

    #[test]
    fn a_zero_rate_is_a_rate() {
        let f = running(Some(0), 0);
        let s = measure(&f, CALC_DURATION).unwrap();
        assert_eq!(rate_mbs(s.as_ref()), Ok(0));
    }

    #[test]
    fn libvirt_failures_pass_through() {
        let f = Fake {
            running: true,
            fail_query: Some("boom".into()),
            ..Default::default()
        };
        assert_eq!(
            measure(&f, CALC_DURATION),
            Err(DirtyRateError::Libvirt("boom".into()))
        );
    }

    fn stat(mbs: i64) -> DomainStatsDirtyRate {
        DomainStatsDirtyRate {
            megabytes_per_second_set: true,
            megabytes_per_second: mbs,
            ..Default::default()
        }
    }

    #[test]
    fn cache_serves_a_result_for_three_seconds_then_recalculates() {
        let c = DirtyRateCache::default();
        let t0 = Instant::now();
        let at = |ms| move || t0 + Duration::from_millis(ms);
        let runs = Cell::new(0);
        let calc = |v| {
            let runs = &runs;
            move || {
                runs.set(runs.get() + 1);
                Ok(Some(stat(v)))
            }
        };
        assert_eq!(c.get_at(at(0), calc(1)), Ok(Some(stat(1))));
        assert_eq!(c.get_at(at(2999), calc(2)), Ok(Some(stat(1))));
        assert_eq!(runs.get(), 1);
        assert_eq!(c.get_at(at(3000), calc(3)), Ok(Some(stat(3))));
        assert_eq!(c.get_at(at(5999), calc(4)), Ok(Some(stat(3))));
        assert_eq!(runs.get(), 2);
    }

    #[test]
    fn cache_keeps_no_result_but_not_failures() {
        let c = DirtyRateCache::default();
        let t0 = Instant::now();
        assert_eq!(
            c.get_at(|| t0, || Err(DirtyRateError::Libvirt("down".into()))),
            Err(DirtyRateError::Libvirt("down".into()))
        );
        assert_eq!(c.get_at(|| t0, || Ok(None)), Ok(None));
        assert_eq!(c.get_at(|| t0, || Ok(Some(stat(5)))), Ok(None));
    }

    #[test]
    fn concurrent_callers_share_one_calculation() {
        let c = Arc::new(DirtyRateCache::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let n = 8;
        let gate = Arc::new(Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (c, runs, gate) = (Arc::clone(&c), Arc::clone(&runs), Arc::clone(&gate));
                std::thread::spawn(move || {
                    gate.wait();
                    c.get(|| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        // Long enough for every caller to arrive meanwhile.
                        std::thread::sleep(Duration::from_millis(300));
                        Ok(Some(stat(9)))
                    })
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), Ok(Some(stat(9))));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn waiters_share_a_failure_and_the_next_caller_retries() {
        let c = Arc::new(DirtyRateCache::default());
        let started = Arc::new(Barrier::new(2));
        let c2 = Arc::clone(&c);
        let s2 = Arc::clone(&started);
        let first = std::thread::spawn(move || {
            c2.get(|| {
                s2.wait();
                std::thread::sleep(Duration::from_millis(300));
                Err(DirtyRateError::Libvirt("libvirt down".into()))
            })
        });
        started.wait();
        // The calculation is running: this caller waits and shares it.
        let shared = c.get(|| Ok(Some(stat(1))));
        assert_eq!(shared, Err(DirtyRateError::Libvirt("libvirt down".into())));
        assert_eq!(
            first.join().unwrap(),
            Err(DirtyRateError::Libvirt("libvirt down".into()))
        );
        assert_eq!(c.get(|| Ok(Some(stat(2)))), Ok(Some(stat(2))));
    }

    #[test]
    fn a_panicking_calculation_releases_its_waiters() {
        let c = DirtyRateCache::default();
        let r = c.get(|| panic!("bug"));
        assert_eq!(r, Err(DirtyRateError::Panicked));
        assert_eq!(c.get(|| Ok(Some(stat(3)))), Ok(Some(stat(3))));
    }
}
