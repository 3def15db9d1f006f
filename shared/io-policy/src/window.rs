//! The write window: how many requests one invocation keeps in flight, adapted to throttling.
//!
//! Additive increase, multiplicative decrease, as TCP's congestion window: every clean answer
//! adds `1 / size` (one more request in flight per window's worth of clean answers), and a
//! throttling answer (or `UnprocessedItems`) halves it, at most once per `Window::HOLD` so
//! that one burst of throttled requests already in flight counts as one signal. The size stays
//! between 1 and the cap. A window whose cap is its start size never changes: a fixed setting.
//!
//! Every attempt made under a budget holds a `Slot` of its window while it is in flight
//! (`Window::enter` waits for one), so a request backing off before its retry leaves its slot
//! to others: the window bounds requests on the wire, not callers.
//! [`crate::Budget::in_window`] runs a caller's tasks, as many at once as the window's size.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// A window of requests in flight.
#[derive(Debug)]
pub struct Window {
    cap: usize,
    fixed: bool,
    state: Mutex<State>,
    freed: Notify,
}

/// A request's place in the window, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot<'w>(&'w Window);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.update(|_, s| s.in_flight = s.in_flight.saturating_sub(1));
        self.0.freed.notify_one();
    }
}

#[derive(Debug, Clone, Copy)]
struct State {
    size: f64,
    cut_at: Option<Instant>,
    cuts: u64,
    peak: usize,
    in_flight: usize,
}

impl Window {
    /// At most one halving per this long.
    pub(crate) const HOLD: Duration = Duration::from_millis(100);

    /// A window of `start` requests that may grow to `cap` (a fixed one when `cap <= start`).
    pub fn new(start: usize, cap: usize) -> Window {
        let start = start.max(1);
        Window {
            cap: cap.max(start),
            fixed: cap <= start,
            state: Mutex::new(State { size: real(start), cut_at: None, cuts: 0, peak: start, in_flight: 0 }),
            freed: Notify::new(),
        }
    }

    /// Requests that may be in flight now.
    pub fn size(&self) -> usize {
        self.read(|s| whole(s.size).clamp(1, self.cap))
    }

    /// The largest size reached.
    pub fn peak(&self) -> usize {
        self.read(|s| s.peak)
    }

    /// Halvings so far.
    pub fn cuts(&self) -> u64 {
        self.read(|s| s.cuts)
    }

    /// Waits for a slot: until fewer requests than the window's size are in flight.
    pub(crate) async fn enter(&self) -> Slot<'_> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so that a slot freed in between is not missed.
            freed.as_mut().enable();
            let mut entered = false;
            self.update(|w, s| {
                if s.in_flight < whole(s.size).clamp(1, w.cap) {
                    s.in_flight += 1;
                    entered = true;
                }
            });
            if entered {
                return Slot(self);
            }
            freed.await;
        }
    }

    /// A request answered cleanly: the window grows by `1 / size`, up to the cap.
    pub fn clean(&self) {
        let mut grew = false;
        self.update(|w, s| {
            if w.fixed() {
                return;
            }
            let before = whole(s.size);
            s.size = (s.size + 1.0 / s.size).min(real(w.cap));
            s.peak = s.peak.max(whole(s.size));
            grew = whole(s.size) > before;
        });
        if grew {
            self.freed.notify_one();
        }
    }

    /// A request throttled at `now`: the window halves, unless it did less than
    /// `Window::HOLD` ago.
    pub fn throttled(&self, now: Instant) {
        self.update(|w, s| {
            if w.fixed() || s.cut_at.is_some_and(|at| now.saturating_duration_since(at) < Window::HOLD) {
                return;
            }
            s.size = (s.size / 2.0).max(1.0);
            s.cut_at = Some(now);
            s.cuts += 1;
        });
    }

    /// Whether the window never changes (its cap is its start).
    pub fn fixed(&self) -> bool {
        self.fixed
    }

    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        let state = self.state.lock().map_or_else(|poisoned| *poisoned.into_inner(), |s| *s);
        f(&state)
    }

    fn update(&self, f: impl FnOnce(&Window, &mut State)) {
        if let Ok(mut state) = self.state.lock() {
            f(self, &mut state);
        }
    }
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a size of at least 1")]
fn whole(size: f64) -> usize {
    size.max(1.0) as usize
}

fn real(n: usize) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests;
