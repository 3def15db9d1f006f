//! Configuration from environment variables, validated once at cold start.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `ARCHIVE_BUCKET` | required | The bucket archives are written to. |
//! | `ARCHIVE_PREFIX` | empty | Key prefix before the `table=…/` partitions; a `/` is appended when missing. |
//! | `ARCHIVE_STORAGE_CLASS` | `STANDARD` | The objects' S3 storage class. |
//! | `ARCHIVE_GZIP_LEVEL` | 6 | Gzip level, 1 (fastest) to 9 (smallest). |
//! | `S3_FORCE_PATH_STYLE` | `false` | Path-style S3 addressing, for local emulators. |
//! | `DEADLINE_MARGIN_MS` | 2000 | Stop starting uploads this long before the invocation's deadline. |
//! | `METRICS_NAMESPACE` | `Sidestream` | The EMF namespace. |

use std::time::Duration;

use stream_kit::{ConfigError, Metrics, Vars};

/// The storage classes `ARCHIVE_STORAGE_CLASS` accepts (S3's `PutObject` names).
pub const STORAGE_CLASSES: [&str; 8] = [
    "STANDARD",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "GLACIER",
    "DEEP_ARCHIVE",
    "REDUCED_REDUNDANCY",
];

/// The longest `ARCHIVE_PREFIX`: S3 keys are at most 1024 bytes, and the partitions and object
/// name need up to about 400 of them.
pub const MAX_PREFIX_BYTES: usize = 512;

/// How archive objects are named and compressed: all the plan needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `ARCHIVE_PREFIX`, empty or ending in `/`.
    pub prefix: String,
    /// `ARCHIVE_GZIP_LEVEL`.
    pub gzip_level: u32,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            prefix: String::new(),
            gzip_level: 6,
        }
    }
}

impl Layout {
    /// Reads `ARCHIVE_PREFIX` and `ARCHIVE_GZIP_LEVEL`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Layout, ConfigError> {
        let prefix = match vars.optional("ARCHIVE_PREFIX") {
            None => String::new(),
            Some(raw) => normalize_prefix(&raw).map_err(|reason| ConfigError::Invalid {
                var: "ARCHIVE_PREFIX",
                reason,
            })?,
        };
        Ok(Layout {
            prefix,
            gzip_level: vars.integer("ARCHIVE_GZIP_LEVEL", 6, 1, 9)?,
        })
    }
}

/// Checks a key prefix and makes it end in `/`.
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
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    Ok(prefix)
}

/// Where archives go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveConfig {
    /// `ARCHIVE_BUCKET`.
    pub bucket: String,
    /// `ARCHIVE_STORAGE_CLASS`, one of [`STORAGE_CLASSES`].
    pub storage_class: String,
    /// `S3_FORCE_PATH_STYLE`.
    pub force_path_style: bool,
    /// `DEADLINE_MARGIN_MS`.
    pub deadline_margin: Duration,
}

impl ArchiveConfig {
    /// Reads and checks the variables.
    pub fn from_vars(vars: &Vars<'_>) -> Result<ArchiveConfig, ConfigError> {
        let bucket = vars.required(
            "ARCHIVE_BUCKET",
            "the name of the S3 bucket that receives the archive",
        )?;
        check_bucket(&bucket).map_err(|reason| ConfigError::Invalid {
            var: "ARCHIVE_BUCKET",
            reason,
        })?;
        let storage_class = vars
            .optional("ARCHIVE_STORAGE_CLASS")
            .unwrap_or_else(|| "STANDARD".to_owned());
        if !STORAGE_CLASSES.contains(&storage_class.as_str()) {
            return Err(ConfigError::Invalid {
                var: "ARCHIVE_STORAGE_CLASS",
                reason: format!("{storage_class:?} is not one of {}", STORAGE_CLASSES.join(", ")),
            });
        }
        let force_path_style = match vars.optional("S3_FORCE_PATH_STYLE").as_deref() {
            None | Some("false" | "0") => false,
            Some("true" | "1") => true,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    var: "S3_FORCE_PATH_STYLE",
                    reason: format!("{other:?} is not true or false"),
                });
            }
        };
        let margin_ms = vars.integer("DEADLINE_MARGIN_MS", 2_000, 100, 60_000)?;
        Ok(ArchiveConfig {
            bucket,
            storage_class,
            force_path_style,
            deadline_margin: Duration::from_millis(margin_ms),
        })
    }
}

/// S3's bucket naming rules (general purpose buckets): 3-63 characters of lowercase letters,
/// digits, `.` and `-`, starting and ending with a letter or digit.
fn check_bucket(name: &str) -> Result<(), String> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
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

/// Everything the function reads from its environment at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// Object names and compression.
    pub layout: Layout,
    /// Bucket, storage class, addressing, deadline margin.
    pub archive: ArchiveConfig,
    /// `METRICS_NAMESPACE`, `AWS_LAMBDA_FUNCTION_NAME`.
    pub metrics: Metrics,
}

impl Config {
    /// Reads the configuration; errors name the variable.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        Ok(Config {
            layout: Layout::from_vars(vars)?,
            archive: ArchiveConfig::from_vars(vars)?,
            metrics: Metrics::from_vars(vars, env!("CARGO_PKG_NAME"))?,
        })
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_vars(&Vars::new(&Vars::process_lookup))
    }
}

#[cfg(test)]
mod tests;
