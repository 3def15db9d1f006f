//! Configuration from environment variables, with errors that name the variable.
//!
//! Functions read their configuration once, at cold start, through [`Vars`]. Reading through a
//! lookup function rather than the process environment keeps configuration parsing testable
//! without touching global state.

use std::fmt::Display;
use std::str::FromStr;

/// A configuration error; it always names the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is unset or empty.
    #[error("environment variable {var} is not set: {hint}")]
    Missing {
        /// The variable.
        var: &'static str,
        /// What it should hold.
        hint: &'static str,
    },
    /// A variable is set to something unusable.
    #[error("environment variable {var} is invalid: {reason}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// What is wrong, and what is expected.
        reason: String,
    },
}

/// Reads variables through a lookup function.
pub struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Vars<'a> {
    /// Variables from a lookup function (the process environment, or a map in tests).
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Vars<'a> {
        Vars { lookup }
    }

    /// The process environment. A value that is not valid UTF-8 is passed on lossily, so that it
    /// fails validation with a message instead of looking unset.
    pub fn process_lookup(name: &str) -> Option<String> {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    }

    /// The value of `var`, if it is set and not blank.
    pub fn optional(&self, var: &str) -> Option<String> {
        (self.lookup)(var).filter(|v| !v.trim().is_empty())
    }

    /// The value of `var`, which must be set.
    pub fn required(&self, var: &'static str, hint: &'static str) -> Result<String, ConfigError> {
        self.optional(var).ok_or(ConfigError::Missing { var, hint })
    }

    /// One of `choices` (each a value and what it means), or the first when unset; any other
    /// value is refused with the choices named.
    pub fn choice<T: Copy>(&self, var: &'static str, choices: &[(&str, T)]) -> Result<T, ConfigError> {
        let Some(raw) = self.optional(var) else {
            return choices
                .first()
                .map(|(_, v)| *v)
                .ok_or(ConfigError::Invalid { var, reason: "no choices".to_owned() });
        };
        let raw = raw.trim();
        choices.iter().find(|(name, _)| *name == raw).map(|(_, v)| *v).ok_or_else(|| ConfigError::Invalid {
            var,
            reason: format!(
                "{raw:?}: expected {}",
                choices.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(" or ")
            ),
        })
    }

    /// `true`/`1` or `false`/`0`, or `default` when unset.
    pub fn flag(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.optional(var).as_deref().map(str::trim) {
            None => Ok(default),
            Some("false" | "0") => Ok(false),
            Some("true" | "1") => Ok(true),
            Some(other) => {
                Err(ConfigError::Invalid { var, reason: format!("{other:?} is not true or false") })
            }
        }
    }

    /// A positive rate (capacity units per second), or `None` when unset.
    pub fn rate(&self, var: &'static str) -> Result<Option<f64>, ConfigError> {
        self.optional(var)
            .map(|text| match text.trim().parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
                _ => Err(ConfigError::Invalid {
                    var,
                    reason: format!("{text:?} is not a positive number of capacity units per second"),
                }),
            })
            .transpose()
    }

    /// An integer in `min..=max`, or `default` when unset.
    pub fn integer<T>(&self, var: &'static str, default: T, min: T, max: T) -> Result<T, ConfigError>
    where
        T: FromStr + PartialOrd + Display + Copy,
    {
        let Some(raw) = self.optional(var) else {
            return Ok(default);
        };
        match raw.trim().parse::<T>() {
            Ok(v) if v >= min && v <= max => Ok(v),
            _ => Err(ConfigError::Invalid {
                var,
                reason: format!("{raw:?} is not an integer from {min} to {max}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
