//! Packing fenced groups into transactions, and cutting them apart, table-driven.

use std::sync::Arc;

use crate::{Attributes, ItemWrite, Op};
use serde_dynamo::AttributeValue;

use futures_util::StreamExt as _;

use super::{Fence, Fenced, MAX_ACTIONS, MAX_TRANSACTION_BYTES, Unit, halves, pack, pack_as_ready, parts};

fn item(name: &str, bytes: usize) -> Attributes {
    let mut item = Attributes::with_capacity(2);
    item.push("pk", AttributeValue::S(name.to_owned()));
    item.push("body", AttributeValue::S("x".repeat(bytes)));
    item
}

fn group(name: &str, writes: usize, bytes: usize) -> Fenced {
    Fenced {
        fence: Fence {
            table: Arc::from("t"),
            head: item(&format!("%head#{name}"), 0),
            key: item(&format!("%head#{name}"), 0),
            version_attribute: "sidestream_seq",
            version: "1".to_owned(),
            origin: 0,
        },
        writes: (0..writes)
            .map(|n| ItemWrite {
                table: Arc::from("t"),
                op: Op::Put(item(&format!("{name}{n}"), bytes)),
                origin: n,
            })
            .collect(),
    }
}

/// The actions of each request a unit makes (a group's writes and its head's action):
/// `t100` a transaction of 100 actions, `p100` one part of a group too large for one.
fn shape(units: &[Unit]) -> Vec<String> {
    let actions = |groups: &[Fenced]| groups.iter().map(|g| g.writes.len() + 1).sum::<usize>();
    units
        .iter()
        .flat_map(|unit| match unit {
            Unit::Transaction(groups) => vec![format!("t{}", actions(groups))],
            Unit::Parts(parts) => parts.iter().map(|p| format!("p{}", p.writes.len() + 1)).collect(),
        })
        .collect()
}

/// Groups (writes, bytes a write), and the requests they make.
type Case = (Vec<(usize, usize)>, Vec<&'static str>);

/// Groups are packed whole under both limits, several to a transaction, and cut into parts
/// only when one is too large for a transaction alone.
#[test]
fn groups_are_packed_whole_under_both_limits_and_cut_into_parts_only_when_too_large() {
    let one = |n: usize| vec![(1, 10); n];
    let cases: Vec<Case> = vec![
        // 50 groups of one write and their heads: 100 actions fit one transaction.
        (one(50), vec!["t100"]),
        // A 51st does not fit beside them.
        (one(51), vec!["t100", "t2"]),
        // Nor does a group of two beside 49 (98 actions): a group is never split across
        // transactions.
        ([one(49), vec![(2, 10)]].concat(), vec!["t98", "t3"]),
        // 99 writes and the head: exactly 100.
        (vec![(99, 10)], vec!["t100"]),
        // 100 writes: two parts, each with its head's action.
        (vec![(100, 10)], vec!["p100", "p2"]),
        // 250 writes: three parts of at most 99 writes; the small group after them is packed.
        (vec![(250, 10), (1, 10)], vec!["p100", "p100", "p53", "t2"]),
        // Size: ten 400 KB writes make 4 MB, past the limit: cut by bytes.
        (vec![(10, 400_000)], vec!["p9", "p3"]),
        // Two groups that fit by count but not together by size go to two transactions.
        (vec![(5, 400_000), (5, 400_000)], vec!["t6", "t6"]),
    ];
    for (groups, expected) in cases {
        let groups: Vec<Fenced> =
            groups.into_iter().enumerate().map(|(n, (w, b))| group(&format!("g{n}-"), w, b)).collect();
        let writes: usize = groups.iter().map(|g| g.writes.len()).sum();
        let requests = super::requests_for_fenced(&groups);
        let units = pack(groups);
        assert_eq!(requests, shape(&units).len(), "requests counted as packed: {expected:?}");
        assert_eq!(shape(&units), expected, "{expected:?}");
        let mut sent = 0;
        for unit in &units {
            let (Unit::Transaction(groups) | Unit::Parts(groups)) = unit;
            for g in groups {
                assert!(g.writes.len() < MAX_ACTIONS);
                sent += g.writes.len();
            }
            if let Unit::Transaction(groups) = unit {
                assert!(groups.iter().map(super::group_size).sum::<usize>() <= MAX_TRANSACTION_BYTES);
            }
        }
        // Every write is sent exactly once.
        assert_eq!(sent, writes);
    }
}

#[test]
fn a_head_alone_is_a_group_of_one_action() {
    assert_eq!(shape(&pack(vec![group("a", 0, 0)])), ["t1"], "a head alone still moves");
    assert_eq!(parts(group("a", 250, 10)).len(), 3);
}

#[test]
fn a_rejected_transaction_is_halved_between_groups() {
    let actions: Vec<super::Action> = (0..5)
        .flat_map(|g| {
            (0..3).map(move |n| super::Action {
                group: g,
                origin: g * 3 + n,
                head: n == 2,
                writes: true,
                item: aws_sdk_dynamodb::types::TransactWriteItem::builder().build(),
            })
        })
        .collect();
    let (first, second) = halves(actions);
    let groups = |a: &[super::Action]| {
        let mut g: Vec<usize> = a.iter().map(|a| a.group).collect();
        g.dedup();
        g
    };
    assert_eq!(groups(&first), [0, 1]);
    assert_eq!(groups(&second), [2, 3, 4]);
}

/// Groups that come in lots (a plan made in steps) are packed exactly as all at once: the same
/// transactions, so the same requests.
#[tokio::test]
async fn groups_coming_in_lots_are_packed_as_if_they_came_at_once() {
    let groups: Vec<Fenced> =
        (0..300).map(|n| group(&format!("g{n}-"), if n % 50 == 0 { 120 } else { n % 7 }, 10)).collect();
    let whole = pack(groups.clone());
    for lot in [1, 7, 50, 300] {
        let lots: Vec<Vec<Fenced>> = groups.chunks(lot).map(<[Fenced]>::to_vec).collect();
        let streamed: Vec<Unit> = pack_as_ready(futures_util::stream::iter(lots)).collect().await;
        assert_eq!(streamed, whole, "lots of {lot}");
    }
}
