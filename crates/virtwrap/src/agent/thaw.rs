//! The automatic thaw after a freeze (KubeVirt's safety unfreeze,
//! `scheduleSafetyVMIUnfreeze`): at most one pending thaw per agent, served
//! by one thread that sleeps on a condition variable until the earliest
//! deadline — not a sleeping thread per freeze (issue 19: every freeze
//! left a thread asleep for up to `unfreezeTimeoutSeconds`, an int32 of
//! seconds, even after an explicit thaw).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// What the thread runs when a deadline passes: the freeze's generation.
pub(super) type ThawAction = Box<dyn Fn(u64) + Send + Sync>;

#[derive(Default)]
struct State {
    /// The pending thaw: when, and the freeze it belongs to.
    due: Option<(Instant, u64)>,
    /// The thread exists.
    started: bool,
    /// The agent is gone: the thread exits.
    stop: bool,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    wake: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The one pending automatic thaw of an agent.
pub(super) struct ThawTimer {
    inner: Arc<Inner>,
    action: Arc<ThawAction>,
}

impl ThawTimer {
    /// A timer that runs `action(generation)` when a scheduled thaw is due.
    pub(super) fn new(action: ThawAction) -> ThawTimer {
        ThawTimer {
            inner: Arc::default(),
            action: Arc::new(action),
        }
    }

    /// Schedules the thaw of freeze `generation` after `after`, replacing
    /// any pending one (as KubeVirt cancels the previous safety unfreeze at
    /// every freeze). A deadline beyond what the clock can represent is
    /// never reached: nothing is scheduled. The thread starts at the first
    /// schedule.
    ///
    /// # Errors
    /// The thread's spawn error.
    pub(super) fn schedule(&self, after: Duration, generation: u64) -> std::io::Result<()> {
        let mut st = self.inner.lock();
        st.due = Instant::now().checked_add(after).map(|t| (t, generation));
        if !st.started {
            let inner = Arc::clone(&self.inner);
            let action = Arc::clone(&self.action);
            std::thread::Builder::new()
                .name("auto-thaw".into())
                .spawn(move || serve(&inner, &action))?;
            st.started = true;
        }
        drop(st);
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Drops the pending thaw, if any.
    pub(super) fn cancel(&self) {
        self.inner.lock().due = None;
        self.inner.wake.notify_one();
    }
}

impl Drop for ThawTimer {
    fn drop(&mut self) {
        let mut st = self.inner.lock();
        st.stop = true;
        st.due = None;
        drop(st);
        self.inner.wake.notify_one();
    }
}

fn serve(inner: &Inner, action: &ThawAction) {
    let mut st = inner.lock();
    loop {
        if st.stop {
            return;
        }
        match st.due {
            None => st = inner.wake.wait(st).unwrap_or_else(PoisonError::into_inner),
            Some((when, generation)) => {
                let now = Instant::now();
                if now >= when {
                    st.due = None;
                    drop(st);
                    action(generation);
                    st = inner.lock();
                } else {
                    st = inner
                        .wake
                        .wait_timeout(st, when - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }
}
