//! The `--faults` spec of a chaos run: the fault proxy's keys (AWS faults on the wire) and the
//! replayer's (Lambda-side faults) in one comma-separated list, with one shared seed.

use crate::fault_proxy::Spec;
use crate::replayer::LambdaFaults;

use crate::chaos::ChaosError;

/// What `--faults default` means for a chaos run: every AWS fault and every Lambda fault, at
/// rates a run of a few thousand records meets each of many times. Stalls last 3 s, past the
/// 1 s attempt timeout a chaos stack gives its functions; a late write is sent 4 s after its
/// client gave up on it, after its invocation's retry (and often the item's next records) wrote.
pub const DEFAULT_SPEC: &str = "throttle=0.05,5xx=0.02,partial=0.2,apply-then-fail=0.02,reset=0.01,stall=0.002,stall-for=3000ms,late=0.003,late-for=4000ms,latency=1ms,kill=0.02,timeout=0.02,duplicate=0.03,seed=1";

/// Both halves of a spec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// Injected by the proxy between the functions and the emulator.
    pub wire: Spec,
    /// Injected by the replayer into invocations.
    pub lambda: LambdaFaults,
}

impl Faults {
    /// Parses a spec (`default` is [`DEFAULT_SPEC`]); `seed`, when given, replaces the spec's.
    pub fn parse(text: &str, seed: Option<u64>) -> Result<Faults, ChaosError> {
        let text = if text.trim() == "default" { DEFAULT_SPEC } else { text };
        let (mut wire, mut lambda) = (Vec::new(), Vec::new());
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let key = part.split_once('=').map_or(part, |(k, _)| k);
            match key {
                "seed" => {
                    wire.push(part);
                    lambda.push(part);
                }
                "kill" | "timeout" | "duplicate" => lambda.push(part),
                _ => wire.push(part),
            }
        }
        let spec = |e: &dyn std::fmt::Display| ChaosError::Spec(format!("--faults {text:?}: {e}"));
        let mut faults = Faults {
            wire: Spec::parse(&wire.join(",")).map_err(|e| spec(&e))?,
            lambda: LambdaFaults::parse(&lambda.join(",")).map_err(|e| spec(&e))?,
        };
        if let Some(seed) = seed {
            faults.wire.seed = seed;
            faults.lambda.seed = seed;
        }
        Ok(faults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_splits_into_wire_and_lambda_faults() {
        let faults = Faults::parse("throttle=0.1,kill=0.2,duplicate=0.3,seed=4", None).unwrap();
        assert!((faults.wire.throttle - 0.1).abs() < f64::EPSILON);
        assert!((faults.lambda.kill - 0.2).abs() < f64::EPSILON);
        assert!((faults.lambda.duplicate - 0.3).abs() < f64::EPSILON);
        assert_eq!((faults.wire.seed, faults.lambda.seed), (4, 4));
        let seeded = Faults::parse("default", Some(9)).unwrap();
        assert_eq!((seeded.wire.seed, seeded.lambda.seed), (9, 9));
        assert!(seeded.lambda.any() && seeded.wire.partial > 0.0);
    }

    #[test]
    fn a_bad_spec_names_the_part() {
        let error = Faults::parse("kill=3", None).unwrap_err().to_string();
        assert!(error.contains("kill=3"), "{error}");
        let error = Faults::parse("thrttle=0.1", None).unwrap_err().to_string();
        assert!(error.contains("thrttle"), "{error}");
    }
}
