//! A progress bar on stderr for long commands: done out of total, rate and ETA.
//! On a terminal it redraws one line; elsewhere (a CI log, a pipe) it prints a line at most every
//! few seconds.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

/// Off a terminal, at most one line per this long.
const PRINT_EVERY: Duration = Duration::from_secs(5);

/// The bar's width in characters.
const WIDTH: usize = 30;

/// One long job's bar.
pub struct Bar {
    unit: &'static str,
    started: Instant,
    printed: Option<Instant>,
    terminal: bool,
}

impl Bar {
    /// A bar counting `unit`s (`"ops"`, `"items"`).
    pub fn new(unit: &'static str) -> Bar {
        Bar { unit, started: Instant::now(), printed: None, terminal: std::io::stderr().is_terminal() }
    }

    /// Shows `done` of `total`, then `extra`; `last` ends the bar.
    pub fn show(&mut self, done: u64, total: u64, extra: &str, last: bool) {
        let now = Instant::now();
        if !self.terminal && !last && self.printed.is_some_and(|at| now - at < PRINT_EVERY) {
            return;
        }
        self.printed = Some(now);
        let elapsed = self.started.elapsed().as_secs_f64();
        #[expect(clippy::cast_precision_loss, reason = "a rate for people")]
        let (rate, left) = (done as f64 / elapsed.max(0.001), total.saturating_sub(done) as f64);
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a bar's width"
        )]
        let filled = if total == 0 { WIDTH } else { ((done as f64 / total as f64) * WIDTH as f64) as usize }
            .min(WIDTH);
        let eta = if done > 0 && done < total {
            format!(" ETA {:.0}s", left / rate.max(0.001))
        } else {
            String::new()
        };
        let line = format!(
            "[{}{}] {done}/{total} {} {rate:.0}/s{eta}{extra} ({elapsed:.0}s)",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            self.unit
        );
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r{line}\x1b[K");
            if last {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(err, "{line}");
        }
    }
}
