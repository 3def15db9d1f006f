//! `sidestream plan multikey-indexer`: the plan of a batch as JSON, one object per planned write,
//! each written as it is made.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_dynamo::AttributeValue;
use stream_runtime::wire::WireRecord;
use stream_runtime::{Attributes, ExplainError, Explainer, Op, Vars};

use crate::{Indexes, Plan};

/// One JSON object per planned write: `{"item":{…},"key":{…},"op":"put"|"delete","record":N,
/// "table":…}` (deletes have no `item`; `record` is the position of the record the write
/// finishes), with the index definitions `MULTIKEY_INDEXES` gives. Names come in order, at every
/// depth, so the same plan prints the same text. What planning left out, and what it rejected or
/// stopped at, are notes.
pub(crate) fn explain(
    vars: &Vars<'_>,
    records: &[WireRecord<'_>],
    out: &mut Explainer<'_>,
) -> Result<(), ExplainError> {
    let indexes = Indexes::from_vars(vars)?;
    let plan = Plan::from_wire(&indexes, records);
    for write in &plan.writes {
        let index = indexes.indexes.iter().find(|i| *i.table == *write.table).ok_or_else(|| {
            ExplainError::Write(format!("a write for {}, which no index names", write.table))
        })?;
        let (item, key_source) = match &write.op {
            Op::Put(item) => (Some(item), item),
            Op::Delete(key) => (None, key),
        };
        let key: Vec<(&str, &AttributeValue)> = [&index.partition_key, &index.sort_key]
            .into_iter()
            .filter_map(|name| key_source.get(name).map(|v| (name.as_str(), v)))
            .collect();
        out.write(&Line {
            item: item.map(Sorted::of),
            key: Sorted::new(key),
            op: write.op.name(),
            record: write.origin,
            table: &write.table,
        })?;
    }
    for s in &plan.skipped {
        out.note(format_args!(
            "record {}: index {}: {} left out: {}",
            s.record, s.index, s.member, s.reason
        ))?;
    }
    out.note_failures(records, &plan.failures)
}

/// One line of the plan, its fields in the order of their names.
#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<Sorted<'a>>,
    key: Sorted<'a>,
    op: &'static str,
    record: usize,
    table: &'a str,
}

/// Attributes written in the order of their names.
struct Sorted<'a>(Vec<(&'a str, &'a AttributeValue)>);

impl<'a> Sorted<'a> {
    fn new(mut pairs: Vec<(&'a str, &'a AttributeValue)>) -> Sorted<'a> {
        pairs.sort_unstable_by_key(|&(name, _)| name);
        Sorted(pairs)
    }

    fn of(item: &'a Attributes) -> Sorted<'a> {
        Sorted::new(item.iter().collect())
    }
}

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for &(name, value) in &self.0 {
            map.serialize_entry(name, &Value(value))?;
        }
        map.end()
    }
}

/// An attribute value whose maps, at any depth, are written in the order of their names.
struct Value<'a>(&'a AttributeValue);

impl Serialize for Value<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            AttributeValue::M(m) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("M", &Sorted::new(m.iter().map(|(n, v)| (n.as_str(), v)).collect()))?;
                map.end()
            }
            AttributeValue::L(l) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("L", &l.iter().map(Value).collect::<Vec<_>>())?;
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_owned())
    }

    /// What the plan printed when each line was built as a `serde_json::Value` (whose maps sort
    /// their names): the same text, maps and lists at any depth included.
    #[test]
    fn a_line_prints_as_its_json_value_would_names_sorted_at_every_depth() {
        let inner: HashMap<String, AttributeValue> =
            [("z", s("1")), ("a", AttributeValue::N("2".into())), ("m", s("3"))]
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v))
                .collect();
        let list =
            AttributeValue::L(vec![AttributeValue::M(inner.clone()), s("x"), AttributeValue::Bool(true)]);
        let items: [Vec<(&str, AttributeValue)>; 3] = [
            vec![("sk", s("b")), ("pk", s("a"))],
            vec![("value", AttributeValue::M(inner)), ("pk", s("a")), ("entry", s("e"))],
            vec![("list", list), ("Upper", s("u")), ("lower", AttributeValue::Null(true))],
        ];
        for pairs in items {
            let mut item = Attributes::default();
            for (n, v) in pairs {
                item.push(n, v);
            }
            let printed = serde_json::to_string(&Sorted::of(&item)).expect("serializes");
            let as_value = serde_json::to_value(&item).expect("serializes").to_string();
            assert_eq!(printed, as_value);
        }
    }
}
