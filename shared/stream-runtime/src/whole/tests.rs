//! A record whole: as delivered from the invocation's text, as written from decoded records,
//! and through a combined function's part.

use crate::Event;
use crate::fixture::{self, Change};
use serde_json::{Value, json};

use super::*;

fn event() -> Value {
    // A field no version of the event has had yet, which a record whole must keep.
    let record = |id: &str, at: Value| {
        Change::insert(json!({"id": {"S": id}}))
            .new_image(json!({"id": {"S": id}}))
            .event_id(id)
            .at(at)
            .with("/somethingNew", json!({"kept": true}))
    };
    fixture::event([record("a", json!(1_700_000_000.5)), record("b", json!(1)), record("c", json!(2))])
}

#[test]
fn from_text_a_record_is_as_lambda_delivered_it() {
    let delivered = event();
    let text = delivered.to_string();
    let opened = Whole::text(&text).open();
    for i in 0..3 {
        assert_eq!(opened.json(i).as_ref(), Some(&delivered["Records"][i]), "record {i}");
    }
    assert_eq!(opened.json(3), None);
}

#[test]
fn from_decoded_records_a_record_is_as_aws_lambda_events_writes_it() {
    let decoded: Event = serde_json::from_value(event()).unwrap();
    let opened = Whole::events(&decoded.records).open();
    let first = opened.json(0).unwrap();
    assert_eq!(first, serde_json::to_value(&decoded.records[0]).unwrap());
    // Not as delivered: aws_lambda_events writes the time as whole seconds.
    assert_eq!(first["dynamodb"]["ApproximateCreationDateTime"], json!(1_700_000_000));
}

#[test]
fn a_part_reads_its_own_records_by_their_place_in_the_batch() {
    let delivered = event();
    let text = delivered.to_string();
    let decoded: Event = serde_json::from_value(delivered.clone()).unwrap();
    let positions = [2, 0];
    for whole in [Whole::text(&text), Whole::events(&decoded.records)] {
        let opened = whole.part(&positions).open();
        let ids: Vec<Value> = (0..2).map(|i| opened.json(i).unwrap()["eventID"].clone()).collect();
        assert_eq!(ids, [json!("c"), json!("a")]);
        assert_eq!(opened.json(2), None);
    }
}
