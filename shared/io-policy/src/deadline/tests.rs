//! Tests of the deadline: epoch deadlines and emulator timeouts read as time left.

use std::time::Duration;

use super::time_left;

#[test]
fn time_left_reads_epoch_deadlines_and_emulator_timeouts() {
    let now: u128 = 1_795_000_000_000;
    let cases: [(u64, u128, u64); 6] = [
        // Lambda: an epoch time in the future.
        (1_795_000_060_000, now, 60_000),
        (1_795_000_000_001, now, 1),
        // A real deadline that has passed leaves nothing.
        (1_794_999_999_000, now, 0),
        // An emulator that sends the timeout itself: up to 15 minutes is time left.
        (600_000, now, 600_000),
        (900_000, now, 900_000),
        // Past 15 minutes it is an epoch time again (long past).
        (900_001, now, 0),
    ];
    for (deadline, at, left) in cases {
        assert_eq!(time_left(deadline, at), Duration::from_millis(left), "deadline {deadline} at {at}");
    }
}
