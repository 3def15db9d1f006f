//! The status for people: one screen, a line per function, then the stack's parts, then what
//! needs an operator.

use std::fmt;

use crate::status::{Status, VERIFY_METRIC};

fn lag(ms: Option<f64>) -> String {
    match ms {
        None => "-".to_owned(),
        Some(ms) if ms < 1000.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{:.1} s", ms / 1000.0),
    }
}

fn age(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86_400 => format!("{}.{} h", seconds / 3600, seconds % 3600 / 360),
        _ => format!("{}.{} days", seconds / 86_400, seconds % 86_400 / 8640),
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Stack {}, {}; metrics over the last {}",
            self.stack,
            self.checked_at,
            age(self.window_seconds)
        )?;
        let width = self.functions.iter().map(|s| s.function.len()).max().unwrap_or(8).max(8);
        writeln!(
            f,
            "\n  {:<width$}  {:>9}  {:>8}  {:>6}  {:>8}  {:>8}  alarms",
            "function", "lag", "events", "parked", "given up", "systemic"
        )?;
        if self.functions.is_empty() {
            writeln!(f, "  (no function of the stack has reported metrics)")?;
        }
        for s in &self.functions {
            writeln!(
                f,
                "  {:<width$}  {:>9}  {:>8}  {:>6}  {:>8}  {:>8}  {}",
                s.function,
                lag(s.lag_ms),
                s.events,
                s.parked,
                s.failures_pending,
                s.systemic_failures,
                if s.alarms.is_empty() { "-".to_owned() } else { s.alarms.join(", ") }
            )?;
        }
        writeln!(f)?;
        for index in &self.indexes {
            match (index.drift, &index.verified_at) {
                (Some(drift), Some(at)) => writeln!(
                    f,
                    "  index verify {}: drift {drift} at the last verification ({at})",
                    index.verifier
                )?,
                _ => writeln!(f, "  index verify {}: no verification in the verify window", index.verifier)?,
            }
        }
        for place in &self.given_up {
            writeln!(f, "  ranges given up, not yet replayed: {} ({})", place.pending, place.location)?;
        }
        let parked: u64 = self.parked.values().sum();
        writeln!(f, "  parked records not yet replayed: {parked}")?;
        if let Some(archive) = &self.archive {
            match (&archive.newest, archive.age_seconds) {
                (Some(key), Some(seconds)) => {
                    writeln!(
                        f,
                        "  archive {}: newest object {} old ({key})",
                        archive.location,
                        age(seconds)
                    )?;
                }
                _ => writeln!(f, "  archive {}: empty", archive.location)?,
            }
        }
        if self.alarms.is_empty() {
            writeln!(f, "  alarms in ALARM: none")?;
        } else {
            writeln!(f, "  alarms in ALARM:")?;
            for alarm in &self.alarms {
                writeln!(f, "    {} ({}): {}", alarm.name, alarm.metric, alarm.reason)?;
            }
        }
        if !self.insufficient_data.is_empty() {
            writeln!(f, "  alarms in INSUFFICIENT_DATA:")?;
            for silent in &self.insufficient_data {
                let alarm = &silent.alarm;
                let since = silent.since.as_deref().unwrap_or("-");
                let verify = alarm.metric.ends_with(&format!("/{VERIFY_METRIC}"));
                let what = match (silent.since_created, verify) {
                    (false, _) => format!("no data since {since}, after having had data: {}", alarm.reason),
                    (true, true) => format!(
                        "not verified yet: no verification has reported since the alarm was created ({since})"
                    ),
                    (true, false) => format!("nothing has reported since the alarm was created ({since})"),
                };
                writeln!(f, "    {} ({}): {what}", alarm.name, alarm.metric)?;
            }
        }
        self.verdict(f)
    }
}

impl Status {
    /// The report's last lines: what cannot be seen, then what needs an operator, or "Healthy"
    /// when the stack is known to be.
    fn verdict(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(unseen) = &self.unseen {
            write!(f, "\nUNKNOWN: {unseen}")?;
            if self.attention.is_empty() {
                return Ok(());
            }
            writeln!(f)?;
        }
        if self.attention.is_empty() {
            return write!(f, "\nHealthy: nothing needs an operator.");
        }
        writeln!(f, "\nNEEDS AN OPERATOR:")?;
        for (i, line) in self.attention.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  - {line}")?;
        }
        Ok(())
    }
}
