//! The pacer's arithmetic, on a fixed clock.

use std::time::{Duration, Instant};

use super::Pacer;

#[test]
fn spending_beyond_the_credit_a_pause_earned_waits_in_proportion() {
    let now = Instant::now() + Duration::from_secs(10);
    let pacer = Pacer::new(Some(100.0));
    // (units, wait in ms): no credit at the start, each unit costs 10 ms.
    let cases = [(100.0, 1000), (50.0, 1500), (50.0, 2000), (1.0, 2010)];
    for (units, wait) in cases {
        assert_eq!(pacer.reserve(units, now), Duration::from_millis(wait), "{units}");
    }
    // Two seconds after the debt is paid, one second of credit is back, and no more.
    assert_eq!(pacer.reserve(100.0, now + Duration::from_millis(4010)), Duration::ZERO);
    assert_eq!(pacer.reserve(10.0, now + Duration::from_millis(4010)), Duration::from_millis(100));
}

#[test]
fn no_rate_never_waits() {
    let pacer = Pacer::new(None);
    assert_eq!(pacer.reserve(1e9, Instant::now()), Duration::ZERO);
    assert_eq!(Pacer::new(Some(0.0)).reserve(1.0, Instant::now()), Duration::ZERO);
}
