//! The emulated Kinesis records read back as the changes written, with change times that keep
//! each item's order; and the disorder bounded, seeded and counted.

use serde_json::json;
use stream_runtime::fixture::Change;

use super::{Writer, disorder};

fn change(id: &str, seq: u32, second: i64) -> aws_lambda_events::event::dynamodb::EventRecord {
    Change::modify(json!({"id": {"S": id}}))
        .new_image(json!({"id": {"S": id}, "n": {"N": seq.to_string()}}))
        .event_id(format!("e{seq}"))
        .sequence(1000 + seq)
        .at(second)
        .size(10)
        .record()
        .unwrap()
}

#[test]
fn written_records_read_back_as_the_changes_with_ordered_versions() {
    let stream = "arn:aws:kinesis:us-east-1:123456789012:stream/issues-changes";
    let mut writer = Writer::new(stream, "issues");
    // Three changes in one second, then one a second later.
    let changes = [
        change("a", 1, 1_795_000_000),
        change("b", 2, 1_795_000_000),
        change("a", 3, 1_795_000_000),
        change("a", 4, 1_795_000_001),
    ];
    let written: Vec<_> = changes.iter().map(|c| writer.write(c)).collect();
    let event = json!({"Records": written}).to_string();
    let batch = stream_runtime::kinesis::decode(event.as_bytes()).unwrap();
    let versions: Vec<u64> = batch
        .event
        .records
        .iter()
        .map(|r| r.change.sequence_number.as_deref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        versions,
        [1_795_000_000_000_000, 1_795_000_000_000_001, 1_795_000_000_000_002, 1_795_000_001_000_000]
    );
    for (back, original) in batch.event.records.iter().zip(&changes) {
        assert_eq!(back.event_id, original.event_id);
        assert_eq!(back.change.keys, original.change.keys);
        assert_eq!(back.change.new_image, original.change.new_image);
        assert_eq!(
            back.event_source_arn.as_deref(),
            Some("arn:aws:dynamodb:us-east-1:123456789012:table/issues")
        );
    }
    let sequence_numbers: Vec<&str> = batch.places.sequence_numbers().collect();
    assert!(sequence_numbers.windows(2).all(|w| w[0] < w[1]), "{sequence_numbers:?}");
}

#[test]
fn disorder_moves_records_within_the_window_and_counts_what_it_did() {
    // 200 records of 5 items, in the order written.
    let records: Vec<(usize, String)> = (0..200).map(|i| (i, format!("item-{}", i % 5))).collect();
    let item = |r: &(usize, String)| r.1.clone();
    let (alone, none) = disorder(&records, 0, 0.0, 1, item);
    assert_eq!(alone, records, "no window, no duplicate: the order written");
    assert_eq!((none.duplicated, none.crossed), (0, 0));

    let (shuffled, counts) = disorder(&records, 8, 0.0, 7, item);
    assert_eq!(shuffled.len(), 200);
    for (at, (written, _)) in shuffled.iter().enumerate() {
        assert!(at.abs_diff(*written) <= 8, "record {written} delivered at {at}");
    }
    assert!(counts.crossed > 0, "one item's records crossed: {counts:?}");
    assert_eq!(counts.duplicated, 0);

    let (twice, counts) = disorder(&records, 8, 0.1, 7, item);
    assert_eq!(twice.len(), 200 + counts.duplicated);
    assert!(counts.duplicated > 5 && counts.duplicated < 40, "{counts:?}");
    let mut seen: Vec<usize> = twice.iter().map(|r| r.0).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 200, "every record delivered");
    assert_eq!(disorder(&records, 8, 0.1, 7, item).0, twice, "seeded");
}
