//! Tests for the fail-fast batch response.

use serde_json::json;

use super::*;

fn batch(sequence_numbers: &[Option<&str>]) -> Vec<WireRecord<'static>> {
    sequence_numbers
        .iter()
        .map(|seq| WireRecord {
            event_id: "1".into(),
            event_name: "INSERT".into(),
            sequence_number: seq.map(|s| s.to_owned().into()),
            ..WireRecord::default()
        })
        .collect()
}

fn reported(records: &[WireRecord<'_>], stopped_at: Option<usize>) -> Result<Vec<String>, NoCheckpoint> {
    let response = Checkpoint::response(records, stopped_at)?;
    Ok(response.batch_item_failures.into_iter().map(|f| f.item_identifier.unwrap()).collect())
}

#[test]
fn a_finished_batch_reports_nothing() {
    assert_eq!(reported(&batch(&[Some("1"), Some("2")]), None), Ok(vec![]));
    assert_eq!(reported(&[], None), Ok(vec![]));
}

#[test]
fn the_first_unfinished_record_is_the_checkpoint() {
    let records = batch(&[Some("100"), Some("200"), Some("300")]);
    assert_eq!(reported(&records, Some(0)), Ok(vec!["100".to_owned()]));
    assert_eq!(reported(&records, Some(1)), Ok(vec!["200".to_owned()]));
    assert_eq!(reported(&records, Some(2)), Ok(vec!["300".to_owned()]));
}

#[test]
fn unusable_sequence_numbers_move_the_checkpoint_back() {
    let records = batch(&[Some("100"), Some(""), None, Some("not-a-number"), Some("500")]);
    for stopped_at in 1..=3 {
        assert_eq!(
            Checkpoint::at(&records, stopped_at),
            Ok(Checkpoint { index: 0, sequence_number: "100".to_owned() })
        );
    }
    assert_eq!(reported(&records, Some(4)), Ok(vec!["500".to_owned()]));
}

#[test]
fn without_any_usable_sequence_number_the_whole_batch_must_fail() {
    let records = batch(&[None, Some(""), Some("200")]);
    assert_eq!(reported(&records, Some(1)), Err(NoCheckpoint { stopped_at: 1 }));
    assert_eq!(reported(&[], Some(0)), Err(NoCheckpoint { stopped_at: 0 }));
    assert!(NoCheckpoint { stopped_at: 1 }.to_string().contains("whole batch is retried"));
}

#[test]
fn the_response_serialises_as_lambda_expects() {
    let response = Checkpoint::response(&batch(&[Some("42")]), Some(0)).unwrap();
    assert_eq!(
        serde_json::to_value(response).unwrap(),
        json!({"batchItemFailures": [{"itemIdentifier": "42"}]})
    );
}
