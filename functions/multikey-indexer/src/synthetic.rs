//! Deterministic synthetic stream batches, for benchmarks, property checks and load tests.
//!
//! [`batch`] simulates a base table of issues shaped like the article's (an `id` key, `project`,
//! `num`, `name`, `state` and a `custom_fields` map) and records every change to it as a stream
//! record with both images: inserts of new issues, removals, and modifications that change a
//! custom field's value, add or drop a field, renumber an issue, rename it, move it to another
//! project (a re-key of every entry across index partitions), change its state, or touch an
//! attribute no index reads. The same seed always gives the same batch.

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use serde_dynamo::{AttributeValue, Item};
use serde_json::json;
use stream_runtime::fixture::Change;

/// The index configuration the synthetic issues are shaped for (the article's worked example).
pub const INDEXES_JSON: &str = r#"{"base_key":["id"],"indexes":[{"name":"custom-fields","table":"issue-attrib-index","source":"custom_fields","scope":["project"],"tiebreakers":["num"],"include":["name","state"]}]}"#;

/// A batch of `records` stream records over a table of about `issues` issues.
pub fn batch(records: usize, issues: usize, seed: u64) -> Event {
    let mut sim = Sim { rng: seed ^ 0x9E37_79B9_7F4A_7C15, table: vec![None; issues.max(1)], seq: 0 };
    let mut event = Event::default();
    event.records = (0..records).map(|_| sim.next_record()).collect();
    event
}

struct Sim {
    rng: u64,
    table: Vec<Option<Item>>,
    seq: u64,
}

const FIELDS: [&str; 10] = ["3812", "882a", "3fe6", "47e5", "5b10", "6c21", "7d32", "8e43", "9f54", "a065"];
const WORDS: [&str; 8] = ["Approved", "Pending", "Rejected", "Blocked", "Girder", "Paint", "Rust", "Bridge"];

impl Sim {
    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    fn field_value(&mut self) -> AttributeValue {
        match self.below(3) {
            0 => AttributeValue::S(format!("2023-{:02}-{:02}", 1 + self.below(12), 1 + self.below(28))),
            1 => AttributeValue::N(format!("{}", self.below(100_000))),
            _ => AttributeValue::S(WORDS[self.below(WORDS.len())].to_owned()),
        }
    }

    fn new_issue(&mut self, slot: usize) -> Item {
        let mut fields = HashMap::new();
        for _ in 0..2 {
            let f = FIELDS[self.below(FIELDS.len())];
            let v = self.field_value();
            fields.insert(f.to_owned(), v);
        }
        let mut item = HashMap::new();
        item.insert("id".to_owned(), AttributeValue::S(format!("{slot:08x}")));
        item.insert("project".to_owned(), AttributeValue::S(format!("p{:03}", slot % 37)));
        item.insert("num".to_owned(), AttributeValue::N(format!("{}", 1 + self.below(10_000))));
        item.insert(
            "name".to_owned(),
            AttributeValue::S(format!("{} needs work", WORDS[self.below(WORDS.len())])),
        );
        item.insert("state".to_owned(), AttributeValue::S("open".to_owned()));
        item.insert("custom_fields".to_owned(), AttributeValue::M(fields));
        Item::from(item)
    }

    fn modified(&mut self, old: &Item) -> Item {
        let mut new = old.clone();
        match self.below(8) {
            0 | 1 => {
                let v = self.field_value();
                if let Some(AttributeValue::M(fields)) = new.get_mut("custom_fields") {
                    let f = FIELDS[self.below(FIELDS.len())];
                    fields.insert(f.to_owned(), v);
                }
            }
            2 => {
                if let Some(AttributeValue::M(fields)) = new.get_mut("custom_fields") {
                    let f = FIELDS[self.below(FIELDS.len())];
                    fields.remove(f);
                }
            }
            3 => {
                let n = AttributeValue::N(format!("{}", 1 + self.below(10_000)));
                new.insert("num".to_owned(), n);
            }
            4 => {
                let s = if self.below(2) == 0 { "closed" } else { "open" };
                new.insert("state".to_owned(), AttributeValue::S(s.to_owned()));
            }
            5 => {
                let name = format!("{} renamed", WORDS[self.below(WORDS.len())]);
                new.insert("name".to_owned(), AttributeValue::S(name));
            }
            6 => {
                let project = format!("p{:03}", self.below(37));
                new.insert("project".to_owned(), AttributeValue::S(project));
            }
            _ => {
                let t = AttributeValue::N(format!("{}", self.next() % 1_000_000));
                new.insert("updated_at".to_owned(), t);
            }
        }
        new
    }

    fn next_record(&mut self) -> EventRecord {
        let slot = self.below(self.table.len());
        let (name, old, new) = match self.table[slot].clone() {
            None => {
                let item = self.new_issue(slot);
                ("INSERT", None, Some(item))
            }
            Some(old) if self.below(10) == 0 => ("REMOVE", Some(old), None),
            Some(old) => {
                let new = self.modified(&old);
                ("MODIFY", Some(old), Some(new))
            }
        };
        self.table[slot].clone_from(&new);
        self.seq += 1;
        let id = AttributeValue::S(format!("{slot:08x}"));
        let mut change = Change::named(name, json!({"id": id}))
            .event_id(format!("{:032x}", self.seq))
            .sequence(49_000_000_000_000_000_000_u128 + u128::from(self.seq))
            .at(1_700_000_000)
            .size(300);
        if let Some(old) = old {
            change = change.old_image(serde_json::to_value(old).expect("an item serialises"));
        }
        if let Some(new) = new {
            change = change.new_image(serde_json::to_value(new).expect("an item serialises"));
        }
        change.record().expect("synthetic records are well-formed")
    }
}
