//! Lambda-side faults the replayer can inject into its invocations, and the shard topology it
//! can lay over an emulator's stream, so that the functions meet what Lambda does to them:
//!
//! - `kill`: the function's process dies mid-batch, after some of its writes (the invocation is
//!   dropped at a random point within [`KILL_WITHIN`]); Lambda reports `Runtime.ExitError`.
//! - `timeout`: the invocation gets a short timeout, drawn within [`TIMEOUT_WITHIN`]; the function
//!   sees it as its deadline, and is cut off at it (`Sandbox.Timedout`) if it has not answered.
//! - `duplicate`: a batch is delivered twice, as when Lambda loses a function's answer and
//!   invokes again with the same records.
//!
//! The topology ([`Topology`]) is not a fault but what Lambda meets on a busy table: several
//! shards, a parent shard split into children (every record of a parent is processed before any
//! of its children's), and `ParallelizationFactor` batches at once per shard.
//!
//! A spec reads like the fault proxy's: `kill=0.02,timeout=0.02,duplicate=0.05,seed=7`.

use std::time::Duration;

use thiserror::Error;

/// A killed invocation dies at a random point within this time from its start.
pub(crate) const KILL_WITHIN: Duration = Duration::from_millis(60);

/// An injected timeout is drawn within this range.
pub(crate) const TIMEOUT_WITHIN: (Duration, Duration) =
    (Duration::from_millis(5), Duration::from_millis(120));

/// The keys of a spec that [`LambdaFaults::parse`] takes.
pub const KEYS: [&str; 4] = ["kill", "timeout", "duplicate", "seed"];

/// The most shards a split topology fans out to: a shard splits in two per generation until
/// this many, then each shard rolls over to one child.
pub(crate) const MAX_SPLIT_WIDTH: u32 = 8;

/// A spec that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("Lambda fault spec {spec:?}: {reason}")]
pub struct SpecError {
    /// The spec, or the part of it at fault.
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

/// Rates (0 to 1, per invocation) of each Lambda-side fault, and the seed of their draws.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LambdaFaults {
    /// The process is killed mid-batch.
    pub kill: f64,
    /// The invocation times out.
    pub timeout: f64,
    /// The batch is delivered twice.
    pub duplicate: f64,
    /// Seeds the draws.
    pub seed: u64,
}

/// What one invocation suffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing.
    None,
    /// Killed this long after it starts.
    Kill(Duration),
    /// Given this timeout instead of the function's.
    Timeout(Duration),
    /// Invoked twice with the same batch; the second answer counts.
    Duplicate,
}

impl LambdaFaults {
    /// No faults.
    pub const NONE: LambdaFaults = LambdaFaults { kill: 0.0, timeout: 0.0, duplicate: 0.0, seed: 0 };

    /// Parses `key=value` pairs separated by commas; keys are [`KEYS`], rates are between 0 and
    /// 1 and add up to at most 1.
    pub fn parse(text: &str) -> Result<LambdaFaults, SpecError> {
        let mut faults = LambdaFaults::NONE;
        let error = |part: &str, reason: String| SpecError { spec: part.to_owned(), reason };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                part.split_once('=').ok_or_else(|| error(part, "expected key=value".into()))?;
            if key == "seed" {
                faults.seed =
                    value.parse().map_err(|_| error(part, "the seed is not an unsigned integer".into()))?;
                continue;
            }
            let rate: f64 = value
                .parse()
                .ok()
                .filter(|r: &f64| (0.0..=1.0).contains(r))
                .ok_or_else(|| error(part, "a rate is a number from 0 to 1".into()))?;
            match key {
                "kill" => faults.kill = rate,
                "timeout" => faults.timeout = rate,
                "duplicate" => faults.duplicate = rate,
                other => {
                    return Err(error(
                        part,
                        format!("unknown key {other:?}; the keys are {}", KEYS.join(", ")),
                    ));
                }
            }
        }
        if faults.kill + faults.timeout + faults.duplicate > 1.0 {
            return Err(error(text, "kill, timeout and duplicate add up to more than 1".into()));
        }
        Ok(faults)
    }

    /// Whether any fault has a rate above 0.
    pub fn any(&self) -> bool {
        self.kill + self.timeout + self.duplicate > 0.0
    }

    /// Draws one invocation's fault.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> Fault {
        let roll = rng.f64();
        let within = |(low, high): (Duration, Duration), rng: &mut fastrand::Rng| {
            let span = u64::try_from(high.saturating_sub(low).as_micros()).unwrap_or(u64::MAX);
            low + Duration::from_micros(rng.u64(0..=span))
        };
        if roll < self.kill {
            Fault::Kill(within((Duration::ZERO, KILL_WITHIN), rng))
        } else if roll < self.kill + self.timeout {
            Fault::Timeout(within(TIMEOUT_WITHIN, rng))
        } else if roll < self.kill + self.timeout + self.duplicate {
            Fault::Duplicate
        } else {
            Fault::None
        }
    }
}

/// How the replayer lays shards over an emulator's stream (which has one shard per table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Topology {
    /// Split every shard after this many records of its stream: generation `g` covers records
    /// `g × every` to `(g + 1) × every − 1`, over `min(2^g, MAX_SPLIT_WIDTH)` shards; a record goes
    /// to the shard its item's key hashes to, and each child's parent is the shard its keys
    /// came from. `None`: the emulator's shards as they are.
    pub split_every: Option<u64>,
}

impl Topology {
    /// The generation and shard number of the `nth` record of a stream (from 0) whose item key
    /// hashes to `hash`.
    pub fn place(&self, nth: u64, hash: u64) -> (u32, u32) {
        let Some(every) = self.split_every.filter(|e| *e > 0) else {
            return (0, 0);
        };
        let generation = u32::try_from(nth / every).unwrap_or(u32::MAX);
        let width = width(generation);
        (generation, u32::try_from(hash % u64::from(width)).unwrap_or(0))
    }
}

/// Shards in generation `g`: doubling up to [`MAX_SPLIT_WIDTH`]. A power of two, so a key's
/// shard in generation `g + 1`, taken modulo generation `g`'s width, is its shard in `g`: its
/// parent.
pub fn width(generation: u32) -> u32 {
    1_u32.checked_shl(generation).unwrap_or(MAX_SPLIT_WIDTH).min(MAX_SPLIT_WIDTH)
}

/// A stable 64-bit FNV-1a hash, for placing item keys on shards and batches.
pub fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_name_the_part() {
        let faults = LambdaFaults::parse("kill=0.1, timeout=0.05,duplicate=0.2,seed=9").unwrap();
        assert_eq!(faults, LambdaFaults { kill: 0.1, timeout: 0.05, duplicate: 0.2, seed: 9 });
        assert!(!LambdaFaults::parse("").unwrap().any());
        for (spec, part) in [
            ("kill=2", "kill=2"),
            ("kill", "kill"),
            ("crash=0.1", "crash=0.1"),
            ("seed=-1", "seed=-1"),
            ("kill=0.6,timeout=0.6", "kill=0.6,timeout=0.6"),
        ] {
            assert_eq!(LambdaFaults::parse(spec).unwrap_err().spec, part, "{spec}");
        }
    }

    #[test]
    fn draws_follow_the_rates() {
        let faults = LambdaFaults::parse("kill=0.1,timeout=0.2,duplicate=0.3").unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        let mut seen = [0_u32; 4];
        for _ in 0..10_000 {
            match faults.draw(&mut rng) {
                Fault::Kill(after) => {
                    assert!(after <= KILL_WITHIN);
                    seen[0] += 1;
                }
                Fault::Timeout(limit) => {
                    assert!((TIMEOUT_WITHIN.0..=TIMEOUT_WITHIN.1).contains(&limit));
                    seen[1] += 1;
                }
                Fault::Duplicate => seen[2] += 1,
                Fault::None => seen[3] += 1,
            }
        }
        for (n, rate) in seen.iter().zip([0.1, 0.2, 0.3, 0.4]) {
            assert!((f64::from(*n) / 10_000.0 - rate).abs() < 0.02, "{seen:?}");
        }
    }

    #[test]
    fn a_key_moves_from_a_parent_to_its_child() {
        let topology = Topology { split_every: Some(10) };
        assert_eq!(topology.place(0, 77), (0, 0));
        for hash in [0_u64, 1, 6, 77, u64::MAX] {
            for nth in (10..200).step_by(10) {
                let (generation, shard) = topology.place(nth, hash);
                let (parent_generation, parent) = topology.place(nth - 10, hash);
                assert_eq!(parent_generation + 1, generation);
                assert_eq!(shard % width(parent_generation), parent, "hash {hash} at {nth}");
            }
        }
        assert_eq!((0..6).map(width).collect::<Vec<_>>(), [1, 2, 4, 8, 8, 8]);
        assert_eq!(width(200), MAX_SPLIT_WIDTH);
        assert_eq!(Topology::default().place(1_000, 5), (0, 0));
    }
}
