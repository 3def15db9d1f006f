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
    /// Several required variables are unset or empty: every one a configuration reaches, named
    /// at once ([`Vars::build`]).
    #[error("environment variables are not set: {}", .vars.iter().map(|(var, hint)| format!("{var} ({hint})")).collect::<Vec<_>>().join("; "))]
    MissingMany {
        /// Each variable, with what it should hold, in the order the configuration reads them.
        vars: Vec<(&'static str, &'static str)>,
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

/// What [`Vars::build`] gives a missing variable while it looks for the others: a name valid as
/// a table, a bucket or a prefix, so that a configuration reads on past it.
const STAND_IN: &str = "sidestream-stand-in";

/// Reads variables through a lookup function.
pub struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Vars<'a> {
    /// Variables from a lookup function (the process environment, or a map in tests).
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Vars<'a> {
        Vars { lookup }
    }

    /// Builds a configuration with `build`, and when a required variable is missing, names every
    /// one missing, not only the first. A configuration stops at the first error it meets, so
    /// each variable found missing is given a stand-in and `build` is run again, until it
    /// succeeds or fails for another reason: the variables found missing by then are those a
    /// reader must set. (A stand-in that is not a valid value ends the search: the error then
    /// names the variables found so far.) `build` must do no I/O: it is run once per missing
    /// variable.
    pub fn build<T>(&self, build: impl Fn(&Vars<'_>) -> Result<T, ConfigError>) -> Result<T, ConfigError> {
        let first = match build(self) {
            Err(ConfigError::Missing { var, hint }) => (var, hint),
            other => return other,
        };
        let mut missing = vec![first];
        loop {
            let stand_in = |name: &str| {
                if missing.iter().any(|(var, _)| *var == name) {
                    Some(STAND_IN.to_owned())
                } else {
                    (self.lookup)(name)
                }
            };
            match build(&Vars::new(&stand_in)) {
                Err(ConfigError::Missing { var, hint }) if !missing.iter().any(|(v, _)| *v == var) => {
                    missing.push((var, hint));
                }
                _ => break,
            }
        }
        Err(match missing.as_slice() {
            [(var, hint)] => ConfigError::Missing { var, hint },
            _ => ConfigError::MissingMany { vars: missing },
        })
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
