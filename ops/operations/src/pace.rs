//! A token bucket in capacity units per second: how the backfill, the verify and the restore pace
//! what they spend of a production table.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Spends at most `rate` units per second on average: from the start, where it holds no credit
/// (so a run of any length spends at most `rate` times its length), and after a pause with
/// bursts of up to the one second's worth the pause earned.
#[derive(Debug)]
pub(crate) struct Pacer {
    rate: Option<f64>,
    /// When the units spent so far are paid for.
    paid_until: Mutex<Option<Instant>>,
}

impl Pacer {
    /// A pacer at `rate` units per second; `None` does not pace.
    pub(crate) fn new(rate: Option<f64>) -> Pacer {
        Pacer { rate: rate.filter(|r| r.is_finite() && *r > 0.0), paid_until: Mutex::new(None) }
    }

    /// How long to wait, from `now`, before spending `units`; records them as spent.
    pub(crate) fn reserve(&self, units: f64, now: Instant) -> Duration {
        let Some(rate) = self.rate else {
            return Duration::ZERO;
        };
        let mut paid = self.paid_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Unused time earns at most one second of credit; the first spend none.
        let floor = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
        let start = paid.map_or(now, |p| p.max(floor));
        let end = start + Duration::from_secs_f64(units.max(0.0) / rate);
        *paid = Some(end);
        end.saturating_duration_since(now)
    }

    /// Waits until `units` may be spent, and spends them.
    pub(crate) async fn spend(&self, units: f64) {
        let wait = self.reserve(units, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests;
