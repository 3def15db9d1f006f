//! Table-driven tests of the delta writes: expressions, values and the sum they add.

use std::collections::BTreeMap;

use key_codec::SequenceNumber;

use super::*;

fn update(shards: &[(u32, i128, Before)]) -> CounterUpdate {
    let state = |value: i128, q: u32| ShardState {
        value,
        sequence_number: SequenceNumber::parse(&format!("{}", 4_100 + q)).unwrap(),
    };
    CounterUpdate {
        name: "votes".to_owned(),
        shards: shards.iter().map(|&(k, v, _)| (k, state(v, k))).collect(),
        before: shards.iter().map(|&(k, _, b)| (k, b)).collect::<BTreeMap<_, _>>(),
        first_record: 0,
        records: vec![0],
    }
}

/// Shards (key, new value, what they held before), the update, the condition, the delta.
type Case = (&'static [(u32, i128, Before)], &'static str, &'static str, i128);

#[test]
fn a_delta_write_sets_the_shards_and_adds_their_change() {
    #[rustfmt::skip]
    let cases: [Case; 4] = [
        (&[(3, 7, Before::Value(5))],
         "SET #s.#k0 = :s0 ADD #t :d, #v :one",
         "attribute_exists(#s) AND #s.#k0.v = :o0 AND #s.#k0.q < :q0", 2),
        (&[(0, 4, Before::Absent)],
         "SET #s.#k0 = :s0 ADD #t :d, #v :one",
         "attribute_exists(#s) AND (attribute_not_exists(#s.#k0) OR (#s.#k0.v = :z AND #s.#k0.q < :q0))", 4),
        (&[(1, 0, Before::Value(9)), (2, 3, Before::Value(1))],
         "SET #s.#k0 = :s0, #s.#k1 = :s1 ADD #t :d, #v :one",
         "attribute_exists(#s) AND #s.#k0.v = :o0 AND #s.#k0.q < :q0 AND #s.#k1.v = :o1 AND #s.#k1.q < :q1", -7),
        (&[(5, -2, Before::Value(0))],
         "SET #s.#k0 = :s0 ADD #t :d, #v :one",
         "attribute_exists(#s) AND #s.#k0.v = :o0 AND #s.#k0.q < :q0", -2),
    ];
    for (shards, set, condition, delta) in cases {
        let writes = delta_writes(&update(shards)).unwrap();
        assert_eq!(writes.len(), 1);
        let w = &writes[0];
        assert_eq!((w.update.as_str(), w.condition.as_str(), w.delta), (set, condition, delta));
        assert_eq!(w.values[":d"], AttributeValue::N(delta.to_string()));
        for (i, &(k, v, _)) in shards.iter().enumerate() {
            assert_eq!(w.names[&format!("#k{i}")], k.to_string());
            let AttributeValue::M(state) = &w.values[&format!(":s{i}")] else {
                panic!("the state of shard {k} is not a map");
            };
            assert_eq!(state["v"], AttributeValue::N(v.to_string()));
            assert_eq!(state["q"], w.values[&format!(":q{i}")]);
        }
        assert_eq!(
            (w.names["#s"].as_str(), w.names["#t"].as_str(), w.names["#v"].as_str()),
            ("shards", "total", "version")
        );
    }
}

#[test]
fn an_unknown_before_state_means_no_delta_write() {
    assert_eq!(delta_writes(&update(&[(0, 1, Before::Value(0)), (1, 2, Before::Unknown)])), None);
    let mut missing = update(&[(0, 1, Before::Value(0))]);
    missing.before.clear();
    assert_eq!(delta_writes(&missing), None);
}

#[test]
fn many_shards_split_into_writes_that_each_add_their_own_change() {
    let shards: Vec<(u32, i128, Before)> =
        (0..50).map(|k| (k, i128::from(k) + 1, Before::Value(1))).collect();
    let writes = delta_writes(&update(&shards)).unwrap();
    let sizes: Vec<usize> = writes.iter().map(|w| w.update.matches(" = :s").count()).collect();
    assert_eq!(sizes, [24, 24, 2]);
    let total: i128 = writes.iter().map(|w| w.delta).sum();
    assert_eq!(total, (1..=50).sum::<i128>() - 50);
    assert!(writes.iter().all(|w| w.condition.len() + w.update.len() < 4_096));
}
