//! Tests for what plans report: every plan's loop.

use super::*;

/// Every plan's loop: record-permanent failures are rejected and planning goes on; any other
/// kind stops planning at its record, and nothing after it is planned.
#[test]
fn planning_rejects_record_permanent_failures_and_stops_at_any_other() {
    use io_policy::FailureKind::{RecordPermanent, Systemic, Transient};
    type Case = (&'static str, Vec<Option<FailureKind>>, Vec<usize>, Option<usize>, usize);
    let cases: Vec<Case> = vec![
        ("all planned", vec![None, None, None], vec![], None, 3),
        (
            "rejected, then on",
            vec![None, Some(RecordPermanent), None, Some(RecordPermanent)],
            vec![1, 3],
            None,
            4,
        ),
        ("systemic stops", vec![None, Some(Systemic), None], vec![], Some(1), 2),
        ("transient stops", vec![Some(Transient), None], vec![], Some(0), 1),
        (
            "rejected before the stop",
            vec![Some(RecordPermanent), Some(Systemic), Some(RecordPermanent)],
            vec![0],
            Some(1),
            2,
        ),
    ];
    for (name, records, rejected, stopped, planned) in cases {
        let mut seen = 0;
        let failures = PlanFailures::plan_each(
            &records,
            |kind: &FailureKind| *kind,
            |_, outcome| {
                seen += 1;
                outcome.map_or(Ok(()), Err)
            },
        );
        assert_eq!(
            failures.rejected.iter().map(|r| r.record).collect::<Vec<_>>(),
            rejected,
            "{name}: rejected"
        );
        assert_eq!(failures.stopped.map(|s| s.record), stopped, "{name}: stopped");
        assert_eq!(seen, planned, "{name}: records planned");
    }
}
