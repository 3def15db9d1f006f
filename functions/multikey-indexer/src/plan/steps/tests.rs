//! Tests of cutting a batch by item: every step holds whole items, and the steps' plans together
//! are the whole batch's plan, write for write.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use stream_runtime::EventRecord;

use super::*;
use crate::plan::tests::{issue, record};
use crate::plan::{Plan, PlanError};

fn synthetic() -> Indexes {
    Indexes::from_json(crate::synthetic::INDEXES_JSON).unwrap()
}

/// What a plan leaves (writes, failures, skipped values, each described), in an order that does
/// not depend on how it was cut, and its count of unindexed records.
type Left = (Vec<String>, Vec<(usize, String)>, Vec<String>, usize);

fn sorted(plan: &Plan) -> Left {
    let mut writes: Vec<String> = plan.writes.iter().map(|w| format!("{w:?}")).collect();
    writes.sort_unstable();
    let mut failures: Vec<(usize, String)> = plan
        .failures
        .rejected
        .iter()
        .chain(&plan.failures.stopped)
        .map(|f| (f.record, f.error.to_string()))
        .collect();
    failures.sort_unstable();
    let mut skipped: Vec<String> = plan.skipped.iter().map(|s| format!("{s:?}")).collect();
    skipped.sort_unstable();
    (writes, failures, skipped, plan.unindexed_records)
}

fn stepped(indexes: &Indexes, records: &[WireRecord<'_>], steps: &[Vec<usize>]) -> Plan {
    let mut all = Plan::default();
    for step in steps {
        let plan = Plan::from_wire_at(indexes, records, step, crate::plan::Order::Stream, 0);
        all.writes.extend(plan.writes);
        all.skipped.extend(plan.skipped);
        all.failures.rejected.extend(plan.failures.rejected);
        assert!(plan.failures.stopped.is_none(), "no record here stops a plan");
        all.unindexed_records += plan.unindexed_records;
    }
    all
}

#[test]
fn the_steps_plans_together_are_the_whole_batchs_plan_write_for_write() {
    let indexes = synthetic();
    for (records, issues, seed) in [(3_000, 200, 1), (2_000, 40, 2), (1_100, 1_000, 3), (600, 5, 4)] {
        let events: Vec<EventRecord> = crate::synthetic::batch(records, issues, seed).records;
        let wire = WireRecord::view_all(&events);
        let steps = by_item(&indexes, &wire, STEP_RECORDS);
        assert_eq!(steps.len(), records.div_ceil(STEP_RECORDS), "{records} records");
        let whole = Plan::from_wire(&indexes, &wire);
        let whole_writes = whole.writes.len();
        let cut = stepped(&indexes, &wire, &steps);
        // The same number of writes: nothing is written twice, so the requests are the same too.
        assert_eq!(cut.writes.len(), whole_writes, "seed {seed}");
        assert_eq!(sorted(&cut), sorted(&whole), "seed {seed}");
    }
}

/// The oracle reads each record's `id` from its JSON, not through the plan's key reading.
#[test]
fn every_record_is_in_one_step_with_every_other_record_of_its_item_in_order() {
    let indexes = synthetic();
    let events = crate::synthetic::batch(5_000, 300, 7).records;
    let wire = WireRecord::view_all(&events);
    let steps = by_item(&indexes, &wire, STEP_RECORDS);
    assert_eq!(steps.len(), 10);
    let mut step_of_item: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (n, step) in steps.iter().enumerate() {
        assert!(step.windows(2).all(|w| w[0] < w[1]), "step {n} is in the batch's order");
        for &at in step {
            assert!(seen.insert(at), "record {at} is in two steps");
            let id = serde_json::to_value(&events[at].change.keys).unwrap()["id"]["S"]
                .as_str()
                .unwrap()
                .to_owned();
            let first = *step_of_item.entry(id.clone()).or_insert(n);
            assert_eq!(first, n, "item {id} is in steps {first} and {n}");
        }
    }
    assert_eq!(seen.len(), events.len());
    // The cut spreads items: no step holds more than twice its share.
    let largest = steps.iter().map(Vec::len).max().unwrap();
    assert!(largest <= 2 * STEP_RECORDS, "a step of {largest} records");
}

#[test]
fn one_step_holds_the_whole_batch_when_it_is_small() {
    let indexes = synthetic();
    let events = crate::synthetic::batch(STEP_RECORDS, 50, 5).records;
    let wire = WireRecord::view_all(&events);
    assert_eq!(by_item(&indexes, &wire, STEP_RECORDS), vec![(0..STEP_RECORDS).collect::<Vec<_>>()]);
    assert_eq!(by_item(&indexes, &[], STEP_RECORDS), vec![Vec::<usize>::new()]);
}

/// DynamoDB takes `1`, `1.0` and `10E-1` for one key: the records of that item share a step.
#[test]
fn an_items_numbers_spelled_differently_are_one_item() {
    let indexes = Indexes::from_json(
        r#"{"base_key":["id"],"indexes":[{"name":"f","table":"t","source":"custom_fields","scope":["project"]}]}"#,
    )
    .unwrap();
    let with_id = |id: &str, seq: u32| {
        let mut image = issue("x", 1, &json!({"f": {"S": "a"}}));
        image["id"] = json!({"N": id});
        record("MODIFY", Some(image.clone()), Some(image), seq)
    };
    let events: Vec<EventRecord> = ["1", "1.0", "10E-1", "2", "3", "4", "5", "6"]
        .iter()
        .zip(1..)
        .map(|(id, seq)| with_id(id, seq))
        .collect();
    let wire = WireRecord::view_all(&events);
    let steps = by_item(&indexes, &wire, 1);
    assert_eq!(steps.len(), 8);
    let holding = |at: usize| steps.iter().position(|s| s.contains(&at)).unwrap();
    assert_eq!((holding(1), holding(2)), (holding(0), holding(0)));
    // And the cut does spread the other items.
    let used: BTreeSet<usize> = (0..8).map(holding).collect();
    assert!(used.len() >= 3, "steps used: {used:?}");
}

/// A record without its item's key goes to the first step, whose plan stops at it as the whole
/// batch's does.
#[test]
fn a_record_without_its_key_is_planned_in_the_first_step() {
    let indexes = synthetic();
    let mut events = crate::synthetic::batch(40, 10, 9).records;
    events[17].change.keys = serde_json::from_value(json!({"other": {"S": "x"}})).unwrap();
    let wire = WireRecord::view_all(&events);
    let steps = by_item(&indexes, &wire, 8);
    assert!(steps[0].contains(&17));
    let stopped = Plan::from_wire_at(&indexes, &wire, &steps[0], crate::plan::Order::Stream, 0)
        .failures
        .stopped
        .unwrap();
    assert_eq!(stopped.record, 17);
    assert!(matches!(stopped.error, PlanError::MissingKeyAttribute { .. }));
}
