//! The generated workload of a chaos run, the same for the same seed: issues created, modified
//! (values changed, fields added and removed, re-scoped to another project, renamed,
//! renumbered, replaced whole) and deleted; items that expire by TTL; hot counters incremented.

use serde_json::{Map, Value, json};

/// Custom fields an issue may carry.
const FIELDS: [&str; 12] =
    ["3812", "882a", "3fe6", "47e5", "5b10", "6c21", "7d32", "8e43", "9f54", "a065", "b176", "c287"];
const WORDS: [&str; 10] =
    ["Approved", "Pending", "Rejected", "Blocked", "Girder", "Paint", "Rust", "Bridge", "Ünïcødé", ""];
/// Projects: an issue's scope.
const PROJECTS: usize = 20;
/// Counters and how hot the first is: half of all increments go to `hot-0`.
const COUNTERS: usize = 8;

/// One write to the base tables.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Put an issue whole (created or modified).
    Put(Value),
    /// Delete the issue with this id.
    Delete(String),
    /// Put an item that expires: past its TTL (the sweeper deletes it and the archiver must
    /// archive it) or not yet.
    Expiring {
        /// The item.
        item: Value,
        /// Whether its TTL has passed.
        expired: bool,
    },
    /// Increment a counter.
    Increment {
        /// The counter.
        counter: String,
        /// By how much (may be negative).
        by: i64,
    },
}

impl Op {
    /// The item or counter the op writes, which orders it: ops on one item are made in order.
    pub(crate) fn subject(&self) -> &str {
        match self {
            Op::Put(item) | Op::Expiring { item, .. } => item["id"].as_str().unwrap_or_default(),
            Op::Delete(id) => id,
            Op::Increment { counter, .. } => counter,
        }
    }
}

/// `records` ops from `seed`, with `now` (epoch seconds) to set TTLs from.
pub fn generate(records: u64, seed: u64, now: i64) -> Vec<Op> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let pool = usize::try_from(records / 8).unwrap_or(usize::MAX).clamp(10, 50_000);
    let mut issues: Vec<Option<Value>> = vec![None; pool];
    let mut ops = Vec::with_capacity(usize::try_from(records).unwrap_or(0));
    for n in 0..records {
        let roll = rng.f64();
        let op = if roll < 0.55 {
            let slot = rng.usize(..pool);
            let next = match &issues[slot] {
                None => new_issue(&mut rng, slot),
                Some(old) => modified(&mut rng, old),
            };
            issues[slot] = Some(next.clone());
            Op::Put(next)
        } else if roll < 0.63 {
            let slot = rng.usize(..pool);
            if let Some(old) = issues[slot].take() {
                Op::Delete(old["id"].as_str().unwrap_or_default().to_owned())
            } else {
                let item = new_issue(&mut rng, slot);
                issues[slot] = Some(item.clone());
                Op::Put(item)
            }
        } else if roll < 0.72 {
            let expired = rng.f64() < 0.85;
            let expires_at = if expired { now - rng.i64(60..86_400) } else { now + rng.i64(3_600..86_400) };
            let mut item = new_issue(&mut rng, 0);
            item["id"] = json!(format!("ttl-{n:07}"));
            item["expires_at"] = json!(expires_at);
            Op::Expiring { item, expired }
        } else {
            let counter = if rng.bool() { 0 } else { rng.usize(1..COUNTERS) };
            Op::Increment { counter: format!("hot-{counter}"), by: rng.i64(-5..=100) }
        };
        ops.push(op);
    }
    ops
}

fn new_issue(rng: &mut fastrand::Rng, slot: usize) -> Value {
    let mut fields = Map::new();
    for _ in 0..rng.usize(0..=4) {
        fields.insert(FIELDS[rng.usize(..FIELDS.len())].to_owned(), value(rng));
    }
    json!({
        "id": format!("issue-{slot:06}"),
        "project": format!("p{:02}", rng.usize(..PROJECTS)),
        "num": rng.u32(1..100_000),
        "name": format!("{} needs work", WORDS[rng.usize(..WORDS.len())]),
        "state": if rng.bool() { "open" } else { "closed" },
        "custom_fields": fields,
    })
}

/// A custom field's value: mostly keyable (numbers, text, dates, booleans), sometimes not (a
/// nested map, null).
fn value(rng: &mut fastrand::Rng) -> Value {
    match rng.u8(..20) {
        0..=5 => json!(rng.i64(-1_000_000..1_000_000)),
        6 => json!(f64::from(rng.i32(-100_000..100_000)) / 8.0),
        7..=11 => json!(WORDS[rng.usize(..WORDS.len())]),
        12..=15 => json!(format!("2026-{:02}-{:02}", rng.u8(1..=12), rng.u8(1..=28))),
        16 | 17 => json!(rng.bool()),
        18 => json!({"nested": rng.u8(..)}),
        _ => Value::Null,
    }
}

fn modified(rng: &mut fastrand::Rng, old: &Value) -> Value {
    let mut new = old.clone();
    let fields = new["custom_fields"].as_object_mut();
    match (rng.u8(..9), fields) {
        (0..=2, Some(fields)) => {
            fields.insert(FIELDS[rng.usize(..FIELDS.len())].to_owned(), value(rng));
        }
        (3, Some(fields)) => {
            let keys: Vec<String> = fields.keys().cloned().collect();
            if !keys.is_empty() {
                fields.remove(&keys[rng.usize(..keys.len())]);
            }
        }
        // Re-scoped: every entry moves to another index partition.
        (4, _) => new["project"] = json!(format!("p{:02}", rng.usize(..PROJECTS))),
        // Renamed: an included attribute changes on every entry.
        (5, _) => new["name"] = json!(format!("Renamed {}", rng.u32(..))),
        // Renumbered: a tiebreaker changes on every entry.
        (6, _) => new["num"] = json!(rng.u32(1..100_000)),
        (7, _) => new["updated_at"] = json!(rng.u32(..)),
        _ => {
            let slot = old["id"].as_str().unwrap_or_default();
            let mut fresh = new_issue(rng, 0);
            fresh["id"] = json!(slot);
            new = fresh;
        }
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_workload_with_every_kind_of_op() {
        let ops = generate(5_000, 3, 1_000_000);
        assert_eq!(ops, generate(5_000, 3, 1_000_000));
        assert_ne!(ops, generate(5_000, 4, 1_000_000));
        let count = |f: &dyn Fn(&Op) -> bool| ops.iter().filter(|op| f(op)).count();
        assert!(count(&|op| matches!(op, Op::Delete(_))) > 100);
        assert!(count(&|op| matches!(op, Op::Expiring { expired: true, .. })) > 100);
        assert!(count(&|op| matches!(op, Op::Expiring { expired: false, .. })) > 10);
        assert!(count(&|op| matches!(op, Op::Increment { .. })) > 1_000);
        // Issues re-scoped and renamed: the same id seen in two projects, and under two names.
        let mut seen: std::collections::HashMap<&str, (&Value, &Value)> = std::collections::HashMap::new();
        let (mut rescoped, mut renamed) = (0, 0);
        for op in &ops {
            if let Op::Put(item) = op {
                let id = item["id"].as_str().unwrap_or_default();
                if let Some((project, name)) = seen.get(id) {
                    rescoped += usize::from(*project != &item["project"]);
                    renamed += usize::from(*name != &item["name"]);
                }
                seen.insert(id, (&item["project"], &item["name"]));
            }
        }
        assert!(rescoped > 50 && renamed > 50, "{rescoped} re-scoped, {renamed} renamed");
    }
}
