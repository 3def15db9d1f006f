//! When to retry, how long to wait, and the writer's configuration.

use std::time::Duration;

use stream_kit::{ConfigError, Vars};

/// How an attempt's failure is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Throttling or capacity: retry after backing off.
    Throttled,
    /// A server error, timeout or broken connection: retry after backing off.
    Transient,
    /// A client error (validation, missing table, bad credentials): retrying cannot help.
    Permanent,
}

impl ErrorClass {
    /// Classifies a service error by its error code and HTTP status.
    pub fn of_service_error(code: Option<&str>, status: u16) -> ErrorClass {
        match code {
            Some(
                "ProvisionedThroughputExceededException"
                | "RequestLimitExceeded"
                | "ThrottlingException"
                | "Throttling"
                | "TooManyRequestsException"
                | "SlowDown",
            ) => ErrorClass::Throttled,
            Some("InternalServerError" | "ServiceUnavailable" | "ReplicatedWriteConflictException") => {
                ErrorClass::Transient
            }
            _ if status >= 500 => ErrorClass::Transient,
            _ if status == 429 => ErrorClass::Throttled,
            _ => ErrorClass::Permanent,
        }
    }

    /// Whether another attempt may succeed.
    pub fn is_retryable(self) -> bool {
        self != ErrorClass::Permanent
    }
}

/// Exponential backoff with full jitter: before retry `n` (1-based), wait a uniformly random time
/// in `[0, min(max_delay, base_delay × 2^(n-1))]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// The backoff ceiling before the first retry.
    pub base_delay: Duration,
    /// The largest backoff ceiling.
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// The wait before retry `retry` (1 for the first), given `unit`, a uniform random number in
    /// `[0, 1)`.
    pub fn backoff(&self, retry: u32, unit: f64) -> Duration {
        let exp = retry.saturating_sub(1).min(30);
        let ceiling = self.base_delay.saturating_mul(1_u32 << exp).min(self.max_delay);
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }
}

/// The writer's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// Requests in flight at once (`WRITE_CONCURRENCY`, 1-64, default 4).
    pub concurrency: usize,
    /// Retry policy (`WRITE_MAX_ATTEMPTS`, 1-20, default 8; backoff 50 ms doubling to 5 s).
    pub retry: RetryPolicy,
    /// How long before the invocation deadline to stop writing (`DEADLINE_MARGIN_MS`, 100-60000,
    /// default 2000), leaving time to report failures and flush logs.
    pub margin: Duration,
    /// The longest one attempt may take before it is abandoned and retried.
    pub attempt_timeout: Duration,
}

impl Default for WriterConfig {
    fn default() -> WriterConfig {
        WriterConfig {
            concurrency: 4,
            retry: RetryPolicy {
                max_attempts: 8,
                base_delay: Duration::from_millis(50),
                max_delay: Duration::from_secs(5),
            },
            margin: Duration::from_secs(2),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

impl WriterConfig {
    /// Reads `WRITE_CONCURRENCY`, `WRITE_MAX_ATTEMPTS` and `DEADLINE_MARGIN_MS`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<WriterConfig, ConfigError> {
        let d = WriterConfig::default();
        Ok(WriterConfig {
            concurrency: vars.integer("WRITE_CONCURRENCY", d.concurrency, 1, 64)?,
            retry: RetryPolicy {
                max_attempts: vars.integer("WRITE_MAX_ATTEMPTS", d.retry.max_attempts, 1, 20)?,
                ..d.retry
            },
            margin: Duration::from_millis(vars.integer("DEADLINE_MARGIN_MS", 2000, 100, 60_000)?),
            ..d
        })
    }
}

#[cfg(test)]
mod tests;
