//! The invocation's deadline as a monotonic instant.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When the invocation times out. Lambda states it in wall-clock milliseconds since the epoch;
/// this holds it as an [`Instant`] so that clock adjustments during the invocation don't move it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline Lambda passes in `Context::deadline`.
    pub fn from_epoch_millis(deadline_ms: u64) -> Deadline {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let left = u128::from(deadline_ms).saturating_sub(now_ms);
        Deadline::after(Duration::from_millis(u64::try_from(left).unwrap_or(u64::MAX)))
    }

    /// A deadline `time` from now (for tools and tests that run outside Lambda).
    pub fn after(time: Duration) -> Deadline {
        let now = Instant::now();
        Deadline(
            now.checked_add(time)
                .unwrap_or(now + Duration::from_secs(86_400 * 365)),
        )
    }

    /// The instant `margin` before the deadline: when work must stop to leave time to report.
    pub fn less(self, margin: Duration) -> Instant {
        self.0.checked_sub(margin).unwrap_or(self.0)
    }
}
