//! What every stream function reads from its environment, once, at cold start.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `PARKING_BUCKET` | required | The bucket records that can never succeed are parked in. |
//! | `PARKING_PREFIX` | `parked/` | Key prefix of parked records; a `/` is appended when missing. |
//! | `WRITE_CONCURRENCY` | 4 | Requests in flight at the start of a batch (1-64). |
//! | `WRITE_MAX_CONCURRENCY` | 16, or `WRITE_CONCURRENCY` if larger | The most requests in flight: the window grows to it while answers are clean and halves on throttling (`WRITE_CONCURRENCY`-64; equal to `WRITE_CONCURRENCY` for a fixed window). |
//! | `WRITE_MAX_ATTEMPTS` | 8 | Attempts per request, the first included (1-20). |
//! | `ATTEMPT_TIMEOUT_MS` | 10000 | The longest one attempt may take (100-300000). |
//! | `DEADLINE_MARGIN_MS` | 2000 | Stop this long before the invocation's deadline (100-60000). |
//! | `PRIME_AT_INIT` | `true` | At cold start, check each table the function writes (`DescribeTable`: it exists, its key schema matches) and the archive bucket (`HeadBucket`), opening the connection before the first batch (`true`/`false`/`1`/`0`). |
//! | `SOURCE_TABLE` | none | The table whose DynamoDB stream the function reads: priming checks its stream's view type gives the images the function needs (`DescribeTable`). Unset for a Kinesis source, whose records always carry both images. |
//! | `S3_FORCE_PATH_STYLE` | `false` | Path-style S3 addressing, for local emulators (`true`/`false`/`1`/`0`). |
//! | `METRICS_NAMESPACE` | the function's (`StreamFunction::NAMESPACE`) | The EMF namespace. |
//! | `AWS_LAMBDA_FUNCTION_NAME` | the function's name | The EMF `Function` dimension (Lambda sets it). |

use std::time::Duration;

use crate::{ConfigError, Metrics, Vars};
use io_policy::Policy;

/// The runtime's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Counters for each invocation.
    pub metrics: Metrics,
    /// Retries, timeouts, the deadline margin and concurrency.
    pub policy: Policy,
    /// Where records that can never succeed go.
    pub parking: ParkingPlace,
    /// `S3_FORCE_PATH_STYLE`.
    pub force_path_style: bool,
    /// `PRIME_AT_INIT`: check the function's resources at cold start ([`crate::prime`]).
    pub prime: bool,
    /// `CHANGE_SOURCE`: where the records come from ([`crate::source`]).
    pub source: crate::Source,
    /// `SOURCE_TABLE`: the table whose stream the records come from, when it is a DynamoDB
    /// stream and the deployment names it.
    pub source_table: Option<String>,
}

/// Where parked records go: an S3 bucket and prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkingPlace {
    /// `PARKING_BUCKET`.
    pub bucket: String,
    /// `PARKING_PREFIX`, ending in `/`.
    pub prefix: String,
}

/// The default `PARKING_PREFIX`.
pub(crate) const DEFAULT_PARKING_PREFIX: &str = "parked/";

impl Settings {
    /// Reads the variables for the function `name`, whose metrics go to `namespace` unless
    /// `METRICS_NAMESPACE` says otherwise; errors name the variable.
    pub fn from_vars(vars: &Vars<'_>, name: &str, namespace: &str) -> Result<Settings, ConfigError> {
        Ok(Settings {
            metrics: Metrics::from_vars(vars, name, namespace)?,
            policy: policy(vars)?,
            parking: ParkingPlace::from_vars(vars)?,
            force_path_style: path_style(vars)?,
            prime: vars.flag("PRIME_AT_INIT", true)?,
            source: crate::Source::from_vars(vars)?,
            source_table: source_table(vars)?,
        })
    }
}

/// Reads `SOURCE_TABLE`: a DynamoDB table name (3-255 of `A-Z a-z 0-9 _ - .`).
fn source_table(vars: &Vars<'_>) -> Result<Option<String>, ConfigError> {
    let Some(name) = vars.optional("SOURCE_TABLE") else {
        return Ok(None);
    };
    let valid = (3..=255).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !valid {
        return Err(ConfigError::Invalid {
            var: "SOURCE_TABLE",
            reason: format!(
                "{name:?} is not a DynamoDB table name (3-255 characters of letters, digits, '_', '-' and '.')"
            ),
        });
    }
    Ok(Some(name))
}

impl ParkingPlace {
    /// Reads `PARKING_BUCKET` and `PARKING_PREFIX`.
    pub(crate) fn from_vars(vars: &Vars<'_>) -> Result<ParkingPlace, ConfigError> {
        let bucket =
            bucket(vars, "PARKING_BUCKET", "the S3 bucket where records that can never succeed are parked")?;
        let prefix = vars.optional("PARKING_PREFIX").unwrap_or_else(|| DEFAULT_PARKING_PREFIX.to_owned());
        let prefix = normalize_prefix(&prefix)
            .map_err(|reason| ConfigError::Invalid { var: "PARKING_PREFIX", reason })?;
        Ok(ParkingPlace { bucket, prefix })
    }
}

/// Reads `WRITE_CONCURRENCY`, `WRITE_MAX_CONCURRENCY`, `WRITE_MAX_ATTEMPTS`, `ATTEMPT_TIMEOUT_MS` and `DEADLINE_MARGIN_MS`.
pub fn policy(vars: &Vars<'_>) -> Result<Policy, ConfigError> {
    let d = Policy::default();
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let concurrency = vars.integer("WRITE_CONCURRENCY", d.concurrency, 1, 64)?;
    let max_concurrency = vars.integer("WRITE_MAX_CONCURRENCY", d.max_concurrency.max(concurrency), 1, 64)?;
    if max_concurrency < concurrency {
        return Err(ConfigError::Invalid {
            var: "WRITE_MAX_CONCURRENCY",
            reason: format!(
                "{max_concurrency} is below WRITE_CONCURRENCY ({concurrency}): the window starts there and only grows \
                 up to this (set them equal for a fixed window)"
            ),
        });
    }
    Ok(Policy {
        concurrency,
        max_concurrency,
        max_attempts: vars.integer("WRITE_MAX_ATTEMPTS", d.max_attempts, 1, 20)?,
        attempt_timeout: Duration::from_millis(vars.integer(
            "ATTEMPT_TIMEOUT_MS",
            ms(d.attempt_timeout),
            100,
            300_000,
        )?),
        margin: Duration::from_millis(vars.integer("DEADLINE_MARGIN_MS", ms(d.margin), 100, 60_000)?),
        ..d
    })
}

/// Reads `S3_FORCE_PATH_STYLE`: `true`/`1` or `false`/`0` (unset: false).
pub fn path_style(vars: &Vars<'_>) -> Result<bool, ConfigError> {
    vars.flag("S3_FORCE_PATH_STYLE", false)
}

/// The longest key prefix: S3 keys are at most 1024 bytes, and what follows a prefix needs up to
/// about 400 of them.
pub(crate) const MAX_PREFIX_BYTES: usize = 512;

/// Checks an S3 key prefix and makes it end in `/` (an empty prefix stays empty).
pub fn normalize_prefix(raw: &str) -> Result<String, String> {
    if raw.starts_with('/') {
        return Err(format!(
            "{raw:?} starts with '/'; S3 keys have no leading slash (write \"archive/\", not \"/archive/\")"
        ));
    }
    if raw.len() > MAX_PREFIX_BYTES {
        return Err(format!(
            "{} bytes is too long: at most {MAX_PREFIX_BYTES}, so that keys stay under S3's 1024",
            raw.len()
        ));
    }
    if let Some(c) = raw.chars().find(|c| c.is_control()) {
        return Err(format!("{raw:?} contains the control character {c:?}"));
    }
    let mut prefix = raw.to_owned();
    if !prefix.is_empty() && !prefix.ends_with('/') {
        prefix.push('/');
    }
    Ok(prefix)
}

/// Reads the required bucket name `var` (`what` says what it is for), checked by `check_bucket`.
pub fn bucket(vars: &Vars<'_>, var: &'static str, what: &'static str) -> Result<String, ConfigError> {
    let bucket = vars.required(var, what)?;
    check_bucket(&bucket).map_err(|reason| ConfigError::Invalid { var, reason })?;
    Ok(bucket)
}

/// S3's bucket naming rules (general purpose buckets): 3-63 characters of lowercase letters,
/// digits, `.` and `-`, starting and ending with a letter or digit.
pub(crate) fn check_bucket(name: &str) -> Result<(), String> {
    let ok_chars =
        name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    let ok_ends = name
        .bytes()
        .next()
        .zip(name.bytes().last())
        .is_some_and(|(a, z)| a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric());
    if (3..=63).contains(&name.len()) && ok_chars && ok_ends {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not an S3 bucket name (3-63 lowercase letters, digits, '.' and '-', \
             starting and ending with a letter or digit)"
        ))
    }
}

#[cfg(test)]
mod tests;
