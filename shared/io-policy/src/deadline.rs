//! The invocation's deadline as a monotonic instant.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest a Lambda invocation can run.
pub(crate) const MAX_INVOCATION: Duration = Duration::from_secs(15 * 60);

/// Time left before `deadline_ms`, at `now_ms` (both epoch milliseconds); see
/// [`Deadline::from_epoch_millis`] for deadlines that are really timeouts.
fn time_left(deadline_ms: u64, now_ms: u128) -> Duration {
    let left = if u128::from(deadline_ms) <= MAX_INVOCATION.as_millis() {
        u128::from(deadline_ms)
    } else {
        u128::from(deadline_ms).saturating_sub(now_ms)
    };
    Duration::from_millis(u64::try_from(left).unwrap_or(u64::MAX))
}

/// When the invocation times out. Lambda states it in wall-clock milliseconds since the epoch;
/// this holds it as an [`Instant`] so that clock adjustments during the invocation don't move it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline Lambda passes in `Context::deadline`.
    ///
    /// Some local Runtime API emulators (`cargo lambda watch` 1.9 among them) send the function's
    /// timeout, e.g. `600000`, where Lambda sends an epoch time. A value no longer than
    /// `MAX_INVOCATION` can never be a real deadline (it is in January 1970), so it is read as
    /// time left, with a warning, instead of as a deadline that passed long ago.
    pub fn from_epoch_millis(deadline_ms: u64) -> Deadline {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        if u128::from(deadline_ms) <= MAX_INVOCATION.as_millis() {
            tracing::warn!(
                deadline_ms,
                "the runtime's deadline is not an epoch time (a local emulator?); reading it as time left"
            );
        }
        Deadline::after(time_left(deadline_ms, now_ms))
    }

    /// A deadline `time` from now (for tools and tests that run outside Lambda).
    pub fn after(time: Duration) -> Deadline {
        let now = Instant::now();
        Deadline(now.checked_add(time).unwrap_or(now + Duration::from_secs(86_400 * 365)))
    }

    /// A deadline at `instant` (for tools that own an invocation's timeout, as Lambda does).
    pub fn at(instant: Instant) -> Deadline {
        Deadline(instant)
    }

    /// The instant `margin` before the deadline: when work must stop to leave time to report.
    pub fn less(self, margin: Duration) -> Instant {
        self.0.checked_sub(margin).unwrap_or(self.0)
    }
}

#[cfg(test)]
mod tests;
