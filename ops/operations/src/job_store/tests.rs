//! The bounds of a job's object calls: each within a minute, none past its invocation's margin,
//! and a step's other work ended in time for the last write.

use std::time::{Duration, Instant};

use super::{OBJECT_TIME, object_budget, work_until};

#[test]
fn an_object_call_ends_within_its_minute_and_before_the_invocations_margin() {
    let margin = io_policy::Policy::default().margin;
    // A far deadline: the call's own minute, counted from when its budget is made.
    let before = Instant::now();
    let far = object_budget(before + Duration::from_secs(900));
    let after = Instant::now();
    assert!(far.stop_at >= before + OBJECT_TIME && far.stop_at <= after + OBJECT_TIME);
    // A near one: the deadline less the margin, to the instant.
    let near = before + Duration::from_secs(30);
    assert_eq!(margin, Duration::from_secs(2), "the policy's margin, which the next line counts");
    assert_eq!(object_budget(near).stop_at, before + Duration::from_secs(28));
    // Closer than the margin: no time at all.
    let budget = object_budget(before + Duration::from_secs(1));
    assert!(budget.stop_at <= before && budget.expired());
}

#[test]
fn a_steps_work_ends_in_time_for_its_last_write() {
    let margin = io_policy::Policy::default().margin;
    let deadline = Instant::now() + Duration::from_secs(900);
    assert_eq!(deadline - work_until(deadline), OBJECT_TIME + margin);
    // Less time than the write's: the work has none.
    let close = Instant::now() + Duration::from_secs(30);
    assert!(work_until(close) <= Instant::now());
}
