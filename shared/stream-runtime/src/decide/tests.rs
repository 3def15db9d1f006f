//! Tests of the batch's decision: the checkpoint, and which records are parked.

use io_policy::{Failure, FailureKind};

use super::decide;
use crate::RecordFailure;

fn f(record: usize, kind: FailureKind) -> RecordFailure {
    RecordFailure::new(record, Failure::new(kind, format!("{kind} at {record}")))
}

#[test]
fn the_earliest_stopping_failure_is_the_checkpoint_and_permanent_ones_before_it_are_parked() {
    use FailureKind::{RecordPermanent as P, Systemic as S, Transient as T};
    // (failures, checkpoint, parked)
    let cases: [(Vec<RecordFailure>, Option<usize>, Vec<usize>); 7] = [
        (vec![], None, vec![]),
        (vec![f(3, P)], None, vec![3]),
        (vec![f(5, P), f(1, P), f(5, P)], None, vec![1, 5]),
        (vec![f(4, T)], Some(4), vec![]),
        (vec![f(2, P), f(4, S), f(6, P)], Some(4), vec![2]),
        (vec![f(7, T), f(4, S), f(1, P)], Some(4), vec![1]),
        // A record that failed both ways stops the batch: it is redelivered, not parked.
        (vec![f(3, P), f(3, T)], Some(3), vec![]),
    ];
    for (failures, checkpoint, parked) in cases {
        let d = decide(&failures);
        assert_eq!(d.checkpoint.as_ref().map(|c| c.record), checkpoint, "{failures:?}");
        assert_eq!(d.park.iter().map(|p| p.record).collect::<Vec<_>>(), parked, "{failures:?}");
    }
}

#[test]
fn a_record_that_cannot_be_parked_becomes_the_checkpoint() {
    let mut d = decide(&[f(1, FailureKind::RecordPermanent), f(3, FailureKind::RecordPermanent)]);
    d.unparked(3, Failure::transient("S3 SlowDown"));
    assert_eq!(d.checkpoint.as_ref().map(|c| c.record), Some(3));
    assert_eq!(d.park.iter().map(|p| p.record).collect::<Vec<_>>(), [1]);
    d.unparked(1, Failure::transient("S3 SlowDown"));
    assert_eq!(d.checkpoint.map(|c| c.record), Some(1));
    assert!(d.park.is_empty());
}
