//! Tests of the merge: exact totals under duplicate delivery, retries from the middle, and any
//! order of batches, on the fixtures and on random increments.

use std::collections::{BTreeMap, HashMap};

use stream_runtime::{Event, EventRecord};

use super::*;
use crate::plan::Plan;

macro_rules! fixture {
    ($name:literal) => {
        serde_json::from_str::<Event>(include_str!(concat!("../../../../events/counter-aggregator/", $name)))
            .unwrap()
            .records
    };
}

/// The totals table, as the handler would leave it: counter name → stored total.
type Store = HashMap<String, Total>;

/// Applies a batch as the handler does (plan, then merge each update, writing only changes),
/// storing through the item form. Returns the number of writes.
fn apply(store: &mut Store, records: &[EventRecord]) -> usize {
    let plan = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(records));
    let mut writes = 0;
    for update in &plan.updates {
        let stored = store.get(&update.name).cloned().unwrap_or_default();
        if let Some(merged) = stored.merge(update) {
            let item = merged.to_item("pk", "k");
            let read = Total::from_item("k", &item).unwrap();
            assert_eq!(item.get("total"), Some(&AttributeValue::N(read.sum().to_string())));
            store.insert(update.name.clone(), read);
            writes += 1;
        }
    }
    writes
}

fn sums(store: &Store) -> BTreeMap<String, i128> {
    store.iter().map(|(k, t)| (k.clone(), t.sum())).collect()
}

/// The true totals: each shard's last count (0 once removed), summed per counter.
fn truth(records: &[EventRecord]) -> BTreeMap<String, i128> {
    let mut shards: BTreeMap<String, (String, i128)> = BTreeMap::new();
    for r in records {
        let Some(AttributeValue::S(pk)) = r.change.keys.get("pk") else {
            continue;
        };
        let Some(formats::counter::CounterKey::Shard { name, .. }) = formats::counter::CounterKey::parse(pk)
        else {
            continue;
        };
        let value = match r.change.new_image.get("count") {
            Some(AttributeValue::N(n)) if r.event_name != "REMOVE" => n.parse().unwrap(),
            _ => 0,
        };
        shards.insert(pk.clone(), (name, value));
    }
    let mut totals = BTreeMap::new();
    for (name, value) in shards.into_values() {
        *totals.entry(name).or_insert(0) += value;
    }
    totals
}

/// Expected totals per counter.
type Totals = &'static [(&'static str, i128)];

#[test]
fn fixture_totals_are_exact() {
    #[rustfmt::skip]
    let cases: [(Vec<EventRecord>, Totals, usize); 4] = [
        (fixture!("increments.json"), &[("votes/alice", 11), ("votes/bob", 2)], 2),
        (fixture!("duplicate.json"), &[("likes/post-7", 3)], 1),
        (fixture!("shard-removal.json"), &[("visits/home", 4)], 1),
        (fixture!("foreign.json"), &[("votes/carol", 2)], 1),
    ];
    for (records, want, writes) in cases {
        let mut store = Store::new();
        assert_eq!(apply(&mut store, &records), writes, "one write per counter");
        let want: BTreeMap<String, i128> = want.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
        assert_eq!(sums(&store), want);
        assert_eq!(sums(&store), truth(&records));
    }
}

/// Deterministic random increments and shard removals over 5 counters of 4 shards.
fn random_batch(n: usize, seed: u64) -> Vec<EventRecord> {
    crate::synthetic::increments(n, 5, 4, seed).records
}

#[test]
fn the_same_batch_twice_changes_nothing() {
    for seed in 0..8 {
        let records = random_batch(400, seed);
        let mut store = Store::new();
        let writes = apply(&mut store, &records);
        assert_eq!(writes, 5, "one write per counter");
        let once = store.clone();
        assert_eq!(apply(&mut store, &records), 0, "a duplicate delivery writes nothing");
        assert_eq!(store, once);
        assert_eq!(sums(&store), truth(&records));
    }
}

#[test]
fn retries_from_the_middle_and_any_batch_order_give_exact_totals() {
    for seed in 0..8 {
        let records = random_batch(300, seed);
        let want = truth(&records);
        for (stop, resume) in [(100, 100), (150, 40), (299, 0), (1, 1)] {
            // The first delivery got through `stop` records; Lambda resumed from `resume`.
            let mut store = Store::new();
            apply(&mut store, &records[..stop]);
            apply(&mut store, &records[resume..]);
            assert_eq!(sums(&store), want, "seed {seed}, stop {stop}, resume {resume}");
        }
        // Concurrent invocations may apply a later batch first (for different shards).
        let mut store = Store::new();
        apply(&mut store, &records[200..]);
        apply(&mut store, &records[..200]);
        apply(&mut store, &records[100..250]);
        assert_eq!(sums(&store), want, "seed {seed}, out of order");
    }
}

#[test]
fn foreign_total_items_are_refused_with_the_reason() {
    let item = |pairs: serde_json::Value| -> HashMap<String, AttributeValue> {
        serde_json::from_value::<Item>(pairs).unwrap().into_inner()
    };
    #[rustfmt::skip]
    let cases = [
        (serde_json::json!({"total": {"N": "3"}}), "version is None, not a number"),
        (serde_json::json!({"version": {"N": "1"}}), "it has no shards map"),
        (serde_json::json!({"version": {"N": "1"}, "shards": {"M": {"x": {"M": {}}}}}), "shards has a key \"x\""),
        (serde_json::json!({"version": {"N": "1"}, "shards": {"M": {"0": {"M": {"v": {"N": "1"}}}}}}), "shards.0 is not {v: N, q: S}"),
        (serde_json::json!({"version": {"N": "1"}, "shards": {"M": {"0": {"M": {"v": {"N": "1"}, "q": {"S": "12"}}}}}}), "not a 40-digit sequence number"),
    ];
    for (json, expected) in cases {
        let err = Total::from_item("COUNTER#x#TOTAL", &item(json)).unwrap_err().to_string();
        assert!(err.starts_with("total item \"COUNTER#x#TOTAL\": ") && err.contains(expected), "{err}");
    }
}

/// The total item's format (docs/formats.md, "Counter total items"), attribute by attribute.
#[test]
fn the_total_item_format_is_pinned() {
    let q = |n: u128| SequenceNumber::from_fixed_width(&format!("{n:040}")).unwrap();
    let total = Total {
        shards: BTreeMap::from([
            (0, ShardState { value: 41, sequence_number: q(500_000_000_000_000_000_012) }),
            (3, ShardState { value: -2, sequence_number: q(7) }),
        ]),
        version: 9,
    };
    let n = |s: &str| AttributeValue::N(s.to_owned());
    let s = |s: &str| AttributeValue::S(s.to_owned());
    let shard =
        |v: &str, q: &str| AttributeValue::M(HashMap::from([("v".to_owned(), n(v)), ("q".to_owned(), s(q))]));
    let expected = Item::from(HashMap::from([
        ("pk".to_owned(), s("COUNTER#votes#TOTAL")),
        ("total".to_owned(), n("39")),
        ("version".to_owned(), n("9")),
        (
            "shards".to_owned(),
            AttributeValue::M(HashMap::from([
                ("0".to_owned(), shard("41", "0000000000000000000500000000000000000012")),
                ("3".to_owned(), shard("-2", "0000000000000000000000000000000000000007")),
            ])),
        ),
    ]));
    assert_eq!(total.to_item("pk", "COUNTER#votes#TOTAL"), expected);
    let stored: HashMap<String, AttributeValue> = expected.into();
    assert_eq!(Total::from_item("COUNTER#votes#TOTAL", &stored).unwrap(), total);
}
