//! Tests of the TTL sweeper: what expires, and which REMOVEs carry the service's identity.

use stream_runtime::fixture::Change;

use super::expired;

#[test]
fn ttl_values_expire_like_dynamodb() {
    let now = 1_800_000_000;
    let five_years = 5 * 365 * 24 * 3600;
    let cases = [
        ("1799999999", true),
        ("1799999999.5", true),
        ("1800000000", false),
        ("1800000001", false),
        (&*(now - five_years).to_string(), true),
        (&*(now - five_years - 1).to_string(), false),
        ("0", false),
        ("-5", false),
        ("1.7e9", true),
        ("soon", false),
        ("", false),
    ];
    for (value, due) in cases {
        assert_eq!(expired(value, now), due, "{value}");
    }
}

fn remove(id: &str, state: &str) -> aws_lambda_events::event::dynamodb::EventRecord {
    Change::remove(serde_json::json!({"id": {"S": id}}))
        .old_image(serde_json::json!({"id": {"S": id}, "state": {"S": state}}))
        .record()
        .unwrap()
}

fn change(
    name: &str,
    id: &str,
    new_image: serde_json::Value,
) -> aws_lambda_events::event::dynamodb::EventRecord {
    Change::named(name, serde_json::json!({"id": {"S": id}}))
        .old_image(serde_json::json!({"id": {"S": id}, "state": {"S": "open"}}))
        .new_image(new_image)
        .record()
        .unwrap()
}

#[test]
fn the_stream_tells_which_items_are_due() {
    use super::Expiries;
    let now = 1_800_000_000;
    let with_ttl = |id: &str, at: i64| serde_json::json!({"id": {"S": id}, "ttl": {"N": at.to_string()}});
    let without = |id: &str| serde_json::json!({"id": {"S": id}});
    let key = ["id".to_owned()];
    let mut expiries = Expiries::default();
    // (record, the ids due at `now` after it): each check forgets the due ones, as a sweep does
    // once their deletes are answered, so later rows start from what is left.
    let cases: Vec<(aws_lambda_events::event::dynamodb::EventRecord, Vec<&str>)> = vec![
        (change("INSERT", "a", with_ttl("a", now - 10)), vec!["a"]),
        (change("INSERT", "b", with_ttl("b", now + 10)), vec![]),
        // b's TTL moved into the past: due.
        (change("MODIFY", "b", with_ttl("b", now - 1)), vec!["b"]),
        (change("INSERT", "f", with_ttl("f", now + 100)), vec![]),
    ];
    for (i, (record, due)) in cases.into_iter().enumerate() {
        expiries.observe(&record, "ttl", &key);
        let mut taken = Vec::new();
        let ids = expiries.due(now);
        // Until forgotten (its delete answered), an item stays due: a failed sweep tries again.
        assert_eq!(expiries.due(now), ids, "record {i}");
        for id in ids {
            match expiries.key(&id).and_then(|k| k.get("id")) {
                Some(aws_sdk_dynamodb::types::AttributeValue::S(name)) => taken.push(name.clone()),
                other => panic!("key {other:?}"),
            }
            expiries.forget(&id);
        }
        taken.sort();
        assert_eq!(taken, due, "record {i}");
    }
    assert_eq!(expiries.len(), 1, "f waits");
    // A TTL moved into the future before the sweep: not due.
    expiries.observe(&change("INSERT", "c", with_ttl("c", now - 5)), "ttl", &key);
    expiries.observe(&change("MODIFY", "c", with_ttl("c", now + 5)), "ttl", &key);
    assert!(expiries.due(now).is_empty());
    let later = expiries.due(now + 10);
    assert_eq!(later.len(), 1, "c is due at its new TTL");
    expiries.forget(&later[0]);
    // A TTL taken away, and a deletion, forget the item before it is due.
    expiries.observe(&change("INSERT", "g", with_ttl("g", now + 100)), "ttl", &key);
    expiries.observe(&change("MODIFY", "g", without("g")), "ttl", &key);
    expiries.observe(&remove("f", "open"), "ttl", &key);
    assert!(expiries.due(now + 1000).is_empty());
    assert!(expiries.is_empty());
    assert!(!expiries.blind());
    // A record with no new image (a KEYS_ONLY stream): the stream cannot say.
    expiries.observe(&change("INSERT", "h", serde_json::json!({})), "ttl", &key);
    assert!(expiries.blind());
}
