//! Tests of order-insensitive planning: any arrival order, duplicates and retries end in the
//! index that in-order application gives.

use std::collections::HashMap;

use formats::head::{Head, is_head};
use serde_dynamo::AttributeValue;
use serde_json::json;
use stream_runtime::EventRecord;

use super::*;
use crate::plan::tests::{Model, apply, key_of};

/// The entries of a model, heads left out and versions dropped (they are provenance).
fn entries(model: &Model) -> Model {
    model
        .iter()
        .filter(|((pk, _), _)| !is_head(pk))
        .map(|(k, item)| {
            let mut item = item.clone();
            item.remove(formats::VERSION_ATTRIBUTE);
            (k.clone(), item)
        })
        .collect()
}

/// The index in-order planning leaves, one record at a time.
fn in_order(ix: &Indexes, records: &[EventRecord]) -> Model {
    let mut model = Model::new();
    for r in records {
        apply(
            &mut model,
            &Plan::from_wire(ix, &stream_runtime::WireRecord::view_all(std::slice::from_ref(r))).writes,
        );
    }
    entries(&model)
}

/// What one delivery of `batch` does to `model`, as the handler does it: heads read, resolved,
/// entries written, then heads; `fail` makes the entry writes of records it names fail, so
/// that their heads are not written. Returns (stale, superseded).
fn deliver(
    ix: &Indexes,
    model: &mut Model,
    batch: &[EventRecord],
    fail: impl Fn(usize) -> bool,
) -> (usize, usize) {
    let changes = Changes::new(ix, batch);
    let superseded = changes.superseded;
    let mut heads = HashMap::new();
    for (_, keys) in changes.heads_by_table(ix) {
        for key in keys {
            if let Some(item) = model.get(&key_of(&*key)) {
                let AttributeValue::S(pk) = &key["pk"] else { panic!() };
                heads.insert(pk.clone(), Head::read(item).unwrap());
            }
        }
    }
    let resolved = resolve(ix, changes, &heads);
    assert_eq!(resolved.plan.failures.stopped, None);
    apply(model, resolved.plan.writes.iter().filter(|w| !fail(w.origin)));
    apply(model, resolved.heads.iter().map(|h| &h.write).filter(|w| !fail(w.origin)));
    (resolved.stale, superseded)
}

/// A small deterministic generator (xorshift), so that orders are reproducible by seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n as u64).unwrap_or(0)
    }
}

/// `records` shuffled within windows of `window`, with about one in `dup` delivered twice.
fn disordered(records: &[EventRecord], window: usize, dup: usize, rng: &mut Rng) -> Vec<EventRecord> {
    let mut out = Vec::new();
    for chunk in records.chunks(window) {
        let mut chunk = chunk.to_vec();
        for i in (1..chunk.len()).rev() {
            chunk.swap(i, rng.below(i + 1));
        }
        for r in chunk {
            if rng.below(dup) == 0 {
                out.push(r.clone());
            }
            out.push(r);
        }
    }
    out
}

fn synthetic_indexes() -> Indexes {
    Indexes::from_json(crate::synthetic::INDEXES_JSON).unwrap()
}

#[test]
fn shuffled_and_duplicated_records_in_any_batches_leave_the_in_order_index() {
    let ix = synthetic_indexes();
    let (mut stale, mut superseded) = (0, 0);
    for seed in 1..=12 {
        let records = crate::synthetic::batch(400, 25, seed).records;
        let expected = in_order(&ix, &records);
        let mut rng = Rng(seed * 7919);
        let arrived = disordered(&records, 2 + rng.below(40), 5, &mut rng);
        let mut model = Model::new();
        let mut at = 0;
        while at < arrived.len() {
            let n = 1 + rng.below(60);
            let batch = &arrived[at..(at + n).min(arrived.len())];
            let (s, p) = deliver(&ix, &mut model, batch, |_| false);
            (stale, superseded) = (stale + s, superseded + p);
            at += n;
        }
        assert!(entries(&model) == expected, "seed {seed}");
    }
    // The disorder was real: older records and duplicates were met, across batches and within.
    assert!(stale > 100, "stale {stale}");
    assert!(superseded > 100, "superseded {superseded}");
}

#[test]
fn a_failed_delivery_retried_from_its_first_failure_leaves_the_in_order_index() {
    let ix = synthetic_indexes();
    let records = crate::synthetic::batch(300, 20, 99).records;
    let expected = in_order(&ix, &records);
    let mut rng = Rng(4242);
    let arrived = disordered(&records, 16, 6, &mut rng);
    let mut retried = 0;
    for k in [0, 1, 40, 150, arrived.len() - 1] {
        let mut model = Model::new();
        // Every third record from k on fails its writes (and so keeps its old head); Lambda
        // redelivers from k.
        deliver(&ix, &mut model, &arrived, |origin| origin >= k && origin % 3 == 0);
        let changes = Changes::new(&ix, &arrived[k..]);
        retried += changes.items.len();
        deliver(&ix, &mut model, &arrived[k..], |_| false);
        assert!(entries(&model) == expected, "retried from {k}");
    }
    assert!(retried > 0);
}

fn issue(id: &str, fields: &serde_json::Value) -> serde_json::Value {
    crate::plan::tests::issue(id, 1, fields)
}

/// A record of version `seq`, or with no sequence number.
fn record(
    name: &str,
    old: Option<serde_json::Value>,
    new: Option<serde_json::Value>,
    seq: Option<u32>,
) -> EventRecord {
    let mut record = crate::plan::tests::record(name, old, new, seq.unwrap_or(0));
    if seq.is_none() {
        record.change.sequence_number = None;
    }
    record
}

/// The members the model's entries hold, as `pk` values.
fn members(model: &Model) -> Vec<String> {
    entries(model).keys().map(|(pk, _)| pk.clone()).collect()
}

#[test]
fn each_arrival_order_of_one_items_history() {
    let ix = Indexes::from_json(include_str!("../../../indexes.example.json")).unwrap();
    let v = |f: &str| issue("i1", &json!({f: {"S": "x"}}));
    // INSERT {a}, then a→b, then b→c, then REMOVE, then INSERT {d}.
    let history = [
        record("INSERT", None, Some(v("a")), Some(1)),
        record("MODIFY", Some(v("a")), Some(v("b")), Some(2)),
        record("MODIFY", Some(v("b")), Some(v("c")), Some(3)),
        record("REMOVE", Some(v("c")), None, Some(4)),
        record("INSERT", None, Some(v("d")), Some(5)),
    ];
    #[rustfmt::skip]
    let cases: &[(&[usize], &[&str], usize)] = &[
        // arrival order (one record a batch), entries left, stale records
        (&[0, 1, 2],       &["p1#c"], 0),
        (&[0, 2, 1],       &["p1#c"], 1),  // b→c's diff alone would leave a
        (&[2, 0, 1],       &["p1#c"], 2),
        (&[0, 0, 1, 1],    &["p1#b"], 2),  // duplicates
        (&[0, 1, 3, 2],    &[],       1),  // a late MODIFY after the REMOVE
        (&[3, 0],          &[],       1),  // a late INSERT after the REMOVE
        (&[0, 4, 2, 3],    &["p1#d"], 2),
        (&[1],             &["p1#b"], 0),  // no head yet: every entry put
    ];
    for (order, left, stale) in cases {
        let mut model = Model::new();
        let mut got_stale = 0;
        for &i in *order {
            got_stale += deliver(&ix, &mut model, std::slice::from_ref(&history[i]), |_| false).0;
        }
        assert_eq!(members(&model), *left, "order {order:?}");
        assert_eq!(got_stale, *stale, "stale, order {order:?}");
        // The same records as one batch: the newest wins within it.
        let mut model = Model::new();
        let batch: Vec<EventRecord> = order.iter().map(|&i| history[i].clone()).collect();
        deliver(&ix, &mut model, &batch, |_| false);
        assert_eq!(members(&model), *left, "one batch, order {order:?}");
    }
}

#[test]
fn a_members_unchanged_by_the_first_record_to_arrive_is_put_all_the_same() {
    let ix = Indexes::from_json(include_str!("../../../indexes.example.json")).unwrap();
    let ab = issue("i1", &json!({"a": {"S": "x"}, "b": {"S": "x"}}));
    let ac = issue("i1", &json!({"a": {"S": "x"}, "c": {"S": "x"}}));
    let insert = record("INSERT", None, Some(ab.clone()), Some(1));
    let modify = record("MODIFY", Some(ab), Some(ac), Some(2));
    for batches in
        [vec![vec![modify.clone()], vec![insert.clone()]], vec![vec![modify.clone(), insert.clone()]]]
    {
        let mut model = Model::new();
        for batch in &batches {
            deliver(&ix, &mut model, batch, |_| false);
        }
        assert_eq!(members(&model), ["p1#a", "p1#c"], "{} batches", batches.len());
    }
}

#[test]
fn an_unchanged_newer_record_writes_only_its_head_and_a_record_without_a_version_is_parked() {
    let ix = Indexes::from_json(include_str!("../../../indexes.example.json")).unwrap();
    let a = issue("i1", &json!({"f": {"S": "x"}}));
    let mut touched_elsewhere = a.clone();
    touched_elsewhere["description"] = json!({"S": "not indexed"});
    let mut model = Model::new();
    deliver(&ix, &mut model, &[record("INSERT", None, Some(a.clone()), Some(1))], |_| false);
    let changes = Changes::new(&ix, &[record("MODIFY", Some(a.clone()), Some(touched_elsewhere), Some(2))]);
    let heads = HashMap::from([(
        changes.items[0].head.pk.clone(),
        Head::read(
            model.values().find(|i| matches!(&i["pk"], AttributeValue::S(pk) if is_head(pk))).unwrap(),
        )
        .unwrap(),
    )]);
    let resolved = resolve(&ix, changes, &heads);
    assert_eq!((resolved.plan.writes.len(), resolved.heads.len()), (0, 1));

    let resolved = resolve(&ix, Changes::new(&ix, &[record("INSERT", None, Some(a), None)]), &HashMap::new());
    let rejected: Vec<String> = resolved.plan.failures.rejected.iter().map(|f| f.error.to_string()).collect();
    assert_eq!(
        rejected,
        [
            "the record has no sequence number to order it by; order-insensitive indexing (MULTIKEY_ORDER=any) needs one"
        ]
    );
    assert!(resolved.plan.writes.is_empty() && resolved.heads.is_empty());
}
