//! Configuration from environment variables, validated once at cold start.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `ARCHIVE_BUCKET` | required | The bucket archives are written to. |
//! | `ARCHIVE_PREFIX` | empty | Key prefix before the `table=…/` partitions; a `/` is appended when missing. |
//! | `ARCHIVE_STORAGE_CLASS` | `STANDARD` | The objects' S3 storage class. |
//! | `ARCHIVE_GZIP_LEVEL` | 6 | libdeflate's gzip level, 1 (fastest) to 9 (smallest; about 5× the time of 6 for 11% less, in the archive bench). |
//! | `ARCHIVE_REPLICATED_TTL_ATTRIBUTE` | unset | On a global table's archiving Region: the table's TTL attribute. A `REMOVE` without the TTL service's identity is then archived too when its old image's TTL value had passed when it was deleted (a TTL delete replicated from another Region, if replication drops the identity; see `docs/global-tables.md`). |
//!
//! The runtime's own settings (parking, the I/O policy, `S3_FORCE_PATH_STYLE`, metrics) are read
//! by `stream-runtime`.

use stream_runtime::settings::{bucket, normalize_prefix};
use stream_runtime::{ConfigError, Vars};

/// The storage classes `ARCHIVE_STORAGE_CLASS` accepts (S3's `PutObject` names).
pub(crate) const STORAGE_CLASSES: [&str; 8] = [
    "STANDARD",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "GLACIER",
    "DEEP_ARCHIVE",
    "REDUCED_REDUNDANCY",
];

/// Which deletes are archived, and how archive objects are named and compressed: all the plan
/// needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSettings {
    /// `ARCHIVE_PREFIX`, empty or ending in `/`.
    pub prefix: String,
    /// `ARCHIVE_GZIP_LEVEL`.
    pub gzip_level: u32,
    /// `ARCHIVE_REPLICATED_TTL_ATTRIBUTE`: the TTL attribute by which a `REMOVE` without the TTL
    /// service's identity is still taken for a TTL delete (a global table's archiving Region).
    pub replicated_ttl_attribute: Option<String>,
}

impl Default for ObjectSettings {
    fn default() -> ObjectSettings {
        ObjectSettings { prefix: String::new(), gzip_level: 6, replicated_ttl_attribute: None }
    }
}

impl ObjectSettings {
    /// Reads `ARCHIVE_PREFIX` and `ARCHIVE_GZIP_LEVEL`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<ObjectSettings, ConfigError> {
        let prefix = match vars.optional("ARCHIVE_PREFIX") {
            None => String::new(),
            Some(raw) => normalize_prefix(&raw)
                .map_err(|reason| ConfigError::Invalid { var: "ARCHIVE_PREFIX", reason })?,
        };
        let replicated_ttl_attribute = vars.optional("ARCHIVE_REPLICATED_TTL_ATTRIBUTE");
        if let Some(name) = replicated_ttl_attribute.as_deref().filter(|a| a.len() > 255) {
            return Err(ConfigError::Invalid {
                var: "ARCHIVE_REPLICATED_TTL_ATTRIBUTE",
                reason: format!("{} bytes; a TTL attribute's name is 255 bytes at most", name.len()),
            });
        }
        Ok(ObjectSettings {
            prefix,
            gzip_level: vars.integer("ARCHIVE_GZIP_LEVEL", 6, 1, 9)?,
            replicated_ttl_attribute,
        })
    }
}

/// Where archives go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveConfig {
    /// `ARCHIVE_BUCKET`.
    pub bucket: String,
    /// `ARCHIVE_STORAGE_CLASS`, one of [`STORAGE_CLASSES`].
    pub storage_class: String,
}

impl ArchiveConfig {
    /// Reads and checks the variables.
    pub(crate) fn from_vars(vars: &Vars<'_>) -> Result<ArchiveConfig, ConfigError> {
        let bucket = bucket(vars, "ARCHIVE_BUCKET", "the name of the S3 bucket that receives the archive")?;
        let storage_class = vars.optional("ARCHIVE_STORAGE_CLASS").unwrap_or_else(|| "STANDARD".to_owned());
        if !STORAGE_CLASSES.contains(&storage_class.as_str()) {
            return Err(ConfigError::Invalid {
                var: "ARCHIVE_STORAGE_CLASS",
                reason: format!("{storage_class:?} is not one of {}", STORAGE_CLASSES.join(", ")),
            });
        }
        Ok(ArchiveConfig { bucket, storage_class })
    }
}

/// Everything the function reads from its environment at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// Object names and compression.
    pub layout: ObjectSettings,
    /// Bucket and storage class.
    pub archive: ArchiveConfig,
}

impl Config {
    /// Reads the configuration; errors name the variable.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        Ok(Config { layout: ObjectSettings::from_vars(vars)?, archive: ArchiveConfig::from_vars(vars)? })
    }
}

#[cfg(test)]
mod tests;
