//! The I/O policy against a scripted endpoint: throttling, 5xx, unprocessed items and keys, a
//! stalled attempt, and the deadline stop, each driven on purpose and counted request by request;
//! the counter-aggregator's conflict rounds, which stop before the invocation's deadline; and the
//! archiver when S3 fails in the middle of a batch.

use std::time::{Duration, Instant};

use counter_aggregator::Aggregator;
use formats::cursor::{Phase, Signer};
use io_policy::{Budget, Deadline, FailureKind, Policy};
use operations::grid::{Grid, GridSchema, Query};
use serde_json::{Value, json};
use sharded_counter::Counters;
use stream_runtime::Runtime;
use stream_runtime::fixture::Change;
use stream_runtime::writer::{Report, Writer};
use stream_runtime::{Event, EventRecord, ItemWrite, Metric, Op, Vars};

use crate::support::scripted::{Reply, Scripted};

/// Fast retries, so that the tests spend their time on what they test.
fn policy() -> Policy {
    Policy {
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(40),
        attempt_timeout: Duration::from_secs(5),
        ..Policy::default()
    }
}

fn budget(policy: Policy) -> Budget {
    policy.within(Duration::from_secs(30))
}

fn put(pk: usize) -> ItemWrite {
    let item: serde_dynamo::Item =
        serde_json::from_value(json!({"pk": {"S": format!("k{pk}")}, "sk": {"S": "s"}})).unwrap();
    ItemWrite { table: "index".into(), op: Op::Put(item.into()), origin: pk }
}

/// The partition keys a `BatchWriteItem` request carried, in order.
fn written(body: &Value) -> Vec<String> {
    body["RequestItems"]["index"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["PutRequest"]["Item"]["pk"]["S"].as_str().unwrap().to_owned())
        .collect()
}

async fn write(endpoint: &Scripted, writes: usize, budget: &Budget) -> Report {
    Writer::new(endpoint.dynamodb()).write((0..writes).map(put).collect(), budget).await
}

fn all_done() -> Reply {
    Reply::ok(json!({"UnprocessedItems": {}}))
}

#[tokio::test]
async fn throttled_batch_writes_are_retried_until_they_are_applied() {
    let endpoint = Scripted::replies(vec![Reply::throttled(), Reply::throttled()], all_done()).await;
    let budget = budget(policy());
    let report = write(&endpoint, 3, &budget).await;
    assert_eq!((report.writes, report.failed), (3, 0), "{:?}", report.failures);
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (3, 2));
    let seen = endpoint.seen();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|r| written(&r.body) == ["k0", "k1", "k2"]));
}

#[tokio::test]
async fn a_server_error_is_transient_and_retried() {
    let endpoint = Scripted::replies(vec![Reply::server_error()], all_done()).await;
    let budget = budget(policy());
    let report = write(&endpoint, 2, &budget).await;
    assert_eq!((report.writes, report.failed), (2, 0), "{:?}", report.failures);
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (2, 1));
    assert_eq!(endpoint.operations(), ["BatchWriteItem", "BatchWriteItem"]);
}

#[tokio::test]
async fn unprocessed_items_and_only_they_are_sent_again() {
    // The first answer leaves k1 unprocessed, in the form DynamoDB returns it.
    let first = Reply::ok(json!({"UnprocessedItems": {"index": [
        {"PutRequest": {"Item": {"pk": {"S": "k1"}, "sk": {"S": "s"}}}}
    ]}}));
    let endpoint = Scripted::replies(vec![first], all_done()).await;
    let budget = budget(policy());
    let report = write(&endpoint, 3, &budget).await;
    assert_eq!((report.writes, report.failed), (3, 0), "{:?}", report.failures);
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (2, 1));
    let seen = endpoint.seen();
    assert_eq!(written(&seen[0].body), ["k0", "k1", "k2"]);
    assert_eq!(written(&seen[1].body), ["k1"]);
}

#[tokio::test]
async fn unprocessed_items_that_stay_unprocessed_fail_as_transient_after_max_attempts() {
    let stuck = Reply::ok(json!({"UnprocessedItems": {"index": [
        {"PutRequest": {"Item": {"pk": {"S": "k0"}, "sk": {"S": "s"}}}}
    ]}}));
    let endpoint = Scripted::replies(vec![], stuck).await;
    let budget = budget(Policy { max_attempts: 4, ..policy() });
    let report = write(&endpoint, 2, &budget).await;
    assert_eq!((report.writes, report.failed), (1, 1));
    let (origin, failure) = &report.failures[0];
    assert_eq!((*origin, failure.kind), (0, FailureKind::Transient));
    assert!(failure.message.contains("gave up after 4 attempts"), "{}", failure.message);
    assert_eq!(endpoint.seen().len(), 4);
}

#[tokio::test]
async fn a_stalled_attempt_is_cut_off_at_the_attempt_timeout_and_retried() {
    let endpoint = Scripted::replies(vec![all_done().after(Duration::from_secs(30))], all_done()).await;
    let budget = budget(Policy { attempt_timeout: Duration::from_millis(300), ..policy() });
    let report = write(&endpoint, 2, &budget).await;
    assert_eq!((report.writes, report.failed), (2, 0), "{:?}", report.failures);
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (2, 1));
    assert_eq!(endpoint.seen().len(), 2);
}

#[tokio::test]
async fn sustained_throttling_stops_at_the_deadline_not_after_it() {
    let endpoint = Scripted::replies(vec![], Reply::throttled()).await;
    let policy = Policy {
        max_attempts: 10_000,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        margin: Duration::from_millis(500),
        ..policy()
    };
    let deadline = Deadline::after(Duration::from_millis(1500));
    let budget = policy.budget(deadline);
    let report = write(&endpoint, 2, &budget).await;
    let returned = Instant::now();
    assert_eq!((report.writes, report.failed), (0, 2));
    for (_, failure) in &report.failures {
        assert_eq!(failure.kind, FailureKind::Transient);
        assert!(failure.message.contains("deadline"), "{}", failure.message);
    }
    let seen = endpoint.seen();
    // Many attempts were made (the throttling path ran), none of them past the deadline.
    assert!(seen.len() >= 3, "{} requests", seen.len());
    // Every request is counted; the last may be cut off by the deadline before the endpoint
    // has read it.
    let (counted, seen_n) = (budget.tally.requests(), seen.len() as u64);
    assert!(counted == seen_n || counted == seen_n + 1, "{counted} counted, {seen_n} seen");
    let end = deadline.less(Duration::ZERO);
    assert!(seen.iter().all(|r| r.at < end));
    assert!(returned < end, "the writer returned after the deadline");
}

/// A grid over scripted tables: `project-num` lists two items that lack the field, and the first
/// `BatchGetItem` leaves the second one's key unprocessed.
#[tokio::test]
async fn unprocessed_keys_of_the_grid_are_asked_again_under_the_policy() {
    let mut batch_gets = 0;
    let endpoint = Scripted::start(move |request| {
        let base = |id: &str, num: u32| json!({"id": {"S": id}, "project": {"S": "p1"}, "num": {"N": num.to_string()}});
        match request.operation.as_str() {
            "Query" if request.body.get("IndexName").is_some() => Reply::ok(json!({
                "Items": [{"id": {"S": "a"}, "project": {"S": "p1"}, "num": {"N": "1"}},
                          {"id": {"S": "b"}, "project": {"S": "p1"}, "num": {"N": "2"}}],
                "Count": 2, "ScannedCount": 2
            })),
            "Query" => Reply::ok(json!({"Items": [], "Count": 0, "ScannedCount": 0})),
            "BatchGetItem" => {
                batch_gets += 1;
                match batch_gets {
                    1 => Reply::throttled(),
                    2 => {
                        let mut rest = request.body["RequestItems"]["issues"].clone();
                        rest["Keys"] = json!([{"id": {"S": "b"}}]);
                        Reply::ok(json!({"Responses": {"issues": [base("a", 1)]},
                                          "UnprocessedKeys": {"issues": rest}}))
                    }
                    _ => Reply::ok(json!({"Responses": {"issues": [base("b", 2)]}, "UnprocessedKeys": {}})),
                }
            }
            other => Reply::error(400, "ValidationException", &format!("unscripted {other}")),
        }
    })
    .await;
    let indexes = multikey_indexer::Indexes::from_json(
        &include_str!("../../functions/multikey-indexer/indexes.example.json")
            .replace("issue-attrib-index", "index"),
    )
    .unwrap();
    let layout = GridSchema::new(&indexes, None, "issues", "project-num").unwrap();
    let grid = Grid::new(endpoint.dynamodb(), layout, Signer::new(b"scripted", 60))
        .with_policy(io_policy::Bounded::new(policy(), Duration::from_secs(30)));
    let query = Query {
        scope: "p1".into(),
        field: "f".into(),
        descending: false,
        limit: 10,
        filter: operations::grid::Filter::None,
        attributes: vec![],
    };
    let page = grid.page(&query, None).await.unwrap();
    assert_eq!(page.phase, Phase::Nulls);
    let ids: Vec<&str> = page.rows.iter().map(|r| r.item["id"]["S"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!((page.requests.queries, page.requests.batch_gets, page.requests.retries), (2, 3, 2));
    let seen = endpoint.seen();
    let keys = |i: usize| seen[i].body["RequestItems"]["issues"]["Keys"].as_array().unwrap().len();
    assert_eq!((keys(3), keys(4)), (2, 1), "{:?}", endpoint.operations());
}

#[tokio::test]
async fn unprocessed_keys_of_an_exact_counter_read_are_asked_again() {
    let mut calls = 0;
    let endpoint = Scripted::start(move |request| {
        calls += 1;
        let shard = |k: u32, n: u32| json!({"pk": {"S": format!("COUNTER#votes#SHARD#{k}")}, "count": {"N": n.to_string()}});
        if calls == 1 {
            let mut rest = request.body["RequestItems"]["counters"].clone();
            rest["Keys"] = json!([{"pk": {"S": "COUNTER#votes#SHARD#2"}}]);
            Reply::ok(json!({"Responses": {"counters": [shard(0, 5), shard(1, 6)]},
                              "UnprocessedKeys": {"counters": rest}}))
        } else {
            Reply::ok(json!({"Responses": {"counters": [shard(2, 7)]}, "UnprocessedKeys": {}}))
        }
    })
    .await;
    let counters =
        Counters::new(endpoint.dynamodb(), "counters", formats::counter::Sharding::new(3).unwrap())
            .with_policy(io_policy::Bounded::new(policy(), Duration::from_secs(30)));
    assert_eq!(counters.exact("votes").await.unwrap(), 18);
    let seen = endpoint.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].body["RequestItems"]["counters"]["Keys"],
        json!([{"pk": {"S": "COUNTER#votes#SHARD#2"}}])
    );
}

/// The records a batch response reports as failed.
fn failures(
    response: Result<stream_runtime::DynamoDbEventResponse, stream_runtime::NoCheckpoint>,
) -> Vec<String> {
    response.unwrap().batch_item_failures.into_iter().map(|f| f.item_identifier.unwrap_or_default()).collect()
}

/// The function `F` under the stream runtime against `endpoint`, configured from `env` plus a
/// parking bucket and a function name.
fn scripted_runtime<F: stream_runtime::StreamFunction>(
    endpoint: &Scripted,
    env: &[(&str, &str)],
) -> Runtime<F> {
    let mut vars: std::collections::HashMap<String, String> =
        env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    vars.insert("PARKING_BUCKET".to_owned(), "parking".to_owned());
    vars.insert("AWS_LAMBDA_FUNCTION_NAME".to_owned(), format!("{}-test", F::NAME));
    let lookup = |name: &str| vars.get(name).cloned();
    Runtime::from_vars(&Vars::new(&lookup), &endpoint.sdk()).unwrap()
}

fn shard_record(seq: u64, k: u32, count: i64) -> EventRecord {
    let key = json!({"pk": {"S": format!("COUNTER#votes#SHARD#{k}")}});
    Change::modify(key.clone())
        .new_image(json!({"pk": key["pk"], "count": {"N": count.to_string()}}))
        .event_id(format!("e{seq}"))
        .sequence(format!("{seq:021}"))
        .size(60)
        .table("counters")
        .record()
        .unwrap()
}

/// Another writer wins every round: each conditional `PutItem` of the total fails. The
/// aggregator's read-merge-write rounds must stop before the invocation's deadline and report
/// the batch's first record as the checkpoint, however many rounds the policy would allow.
#[tokio::test]
async fn the_aggregator_stops_its_conflict_rounds_before_the_deadline() {
    let endpoint = Scripted::start(|request| match request.operation.as_str() {
        "GetItem" => Reply::ok(json!({"Item": {
            "pk": {"S": "COUNTER#votes#TOTAL"}, "total": {"N": "1"}, "version": {"N": "1"},
            "shards": {"M": {"0": {"M": {"v": {"N": "1"}, "q": {"S": "0".repeat(40)}}}}}
        }})),
        "PutItem" => Reply::error(400, "ConditionalCheckFailedException", "The conditional request failed"),
        other => Reply::error(400, "ValidationException", &format!("unscripted {other}")),
    })
    .await;
    let runtime: Runtime<Aggregator> = scripted_runtime(
        &endpoint,
        &[("COUNTER_TABLE", "counters"), ("WRITE_MAX_ATTEMPTS", "20"), ("DEADLINE_MARGIN_MS", "1000")],
    );
    let mut event = Event::default();
    event.records = vec![shard_record(1, 0, 3), shard_record(2, 1, 4)];
    let deadline = Deadline::after(Duration::from_secs(3));
    let (response, metrics) = runtime.handle_counted(event, deadline).await;
    let returned = Instant::now();

    let failures = failures(response);
    assert_eq!(failures, ["000000000000000000001"]);
    assert_eq!(metrics.get(Metric::TransientFailures), 1);
    assert_eq!(metrics.get(Metric::ParkedRecords), 0);
    let seen = endpoint.seen();
    let conflicts = metrics.get(Metric::Conflicts);
    // The conflict path ran, round after round, and every round was counted.
    assert!(conflicts >= 3, "{conflicts} conflicts");
    // Every answered PutItem was a conflict; the last one may instead have been cut off at the
    // stop instant, unanswered in time, and that one is the deadline's, not a conflict.
    let puts = seen.iter().filter(|r| r.operation == "PutItem").count() as u64;
    assert!(puts == conflicts || puts == conflicts + 1, "{puts} PutItems, {conflicts} conflicts");
    let end = deadline.less(Duration::ZERO);
    assert!(seen.iter().all(|r| r.at < end), "a request was sent past the deadline");
    assert!(returned < end, "the invocation outlived its deadline");
}

/// A page of `ListObjectsV2`'s answer holding `keys`, truncated with `next` as its token if any.
fn listing(keys: &[&str], next: Option<&str>) -> String {
    let contents: String =
        keys.iter().flat_map(|k| ["<Contents><Key>", k, "</Key><Size>1</Size></Contents>"]).collect();
    let truncated = next.map_or("<IsTruncated>false</IsTruncated>".to_owned(), |token| {
        format!("<IsTruncated>true</IsTruncated><NextContinuationToken>{token}</NextContinuationToken>")
    });
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>jobs</Name><Prefix>run/</Prefix><KeyCount>{}</KeyCount><MaxKeys>1000</MaxKeys>{truncated}{contents}</ListBucketResult>",
        keys.len()
    )
}

/// The runtime's S3 reads with the SDK's own retries off, as the task Lambdas build their
/// clients (`Aws`): a `GetObject` answered `SlowDown` and then a 500 is sent a third time and
/// read; a listing's pages are each sent again after a `SlowDown` and followed by their
/// continuation token; a missing key is `None` at once, a listing whose truncated page repeats
/// its token fails instead of going round, and an access denial is not retried.
#[tokio::test]
async fn s3_reads_and_listings_are_retried_under_the_budget() {
    let endpoint = Scripted::replies(
        vec![
            Reply::s3_error(503, "SlowDown"),
            Reply::s3_error(500, "InternalError"),
            Reply::s3_body("application/json", r#"{"segment":1}"#),
            Reply::s3_error(503, "SlowDown"),
            Reply::s3_body("application/xml", &listing(&["run/a", "run/skip"], Some("next-page"))),
            Reply::s3_error(503, "SlowDown"),
            Reply::s3_body("application/xml", &listing(&["run/c", "run/b"], None)),
            Reply::s3_error(404, "NoSuchKey"),
            Reply::s3_body("application/xml", &listing(&["run/a"], Some("again"))),
            Reply::s3_body("application/xml", &listing(&["run/b"], Some("again"))),
        ],
        Reply::s3_error(403, "AccessDenied"),
    )
    .await;
    let s3 = stream_runtime::aws::s3(&endpoint.sdk(), true);
    let budget = budget(policy());

    let object = stream_runtime::aws::get_object(&s3, "jobs", "run/a", &budget).await.unwrap();
    assert_eq!(object.as_deref(), Some(br#"{"segment":1}"#.as_slice()));
    let keys =
        stream_runtime::aws::list_keys(&s3, "jobs", "run/", |k| k != "run/skip", &budget).await.unwrap();
    assert_eq!(keys, ["run/a", "run/b", "run/c"], "both pages, kept and sorted");
    assert_eq!(stream_runtime::aws::get_object(&s3, "jobs", "run/gone", &budget).await.unwrap(), None);
    let endless = stream_runtime::aws::list_keys(&s3, "jobs", "run/", |_| true, &budget).await.unwrap_err();
    assert_eq!(endless.kind, FailureKind::Systemic, "a repeated token ends the listing: {endless}");
    let denied = stream_runtime::aws::get_object(&s3, "jobs", "run/a", &budget).await.unwrap_err();
    assert_eq!(denied.kind, FailureKind::Systemic, "{denied}");

    // 3 + 2 + 2 + 1 + 2 + 1 requests, of which the four after a SlowDown or a 500 are retries.
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (11, 4));
    let seen = endpoint.seen();
    assert_eq!(seen.len(), 11);
    let pages: Vec<&str> = seen[3..7].iter().map(|r| r.path.as_str()).collect();
    assert!(pages.iter().all(|p| p.contains("list-type=2")), "{pages:?}");
    assert!(
        !pages[0].contains("continuation-token") && !pages[1].contains("continuation-token"),
        "{pages:?}"
    );
    assert!(pages[2..].iter().all(|p| p.contains("continuation-token=next-page")), "{pages:?}");
}

/// The archiver over a scripted S3 that rejects every upload of one day's run (`SlowDown`, 503)
/// until `healthy` is set: runs before it are uploaded, the batch stops at its first record,
/// and no later run is uploaded; the redelivery from there uploads the rest. Four days of ten
/// TTL deletes each: four runs, eight objects.
#[tokio::test]
async fn an_s3_failure_in_the_middle_of_a_batch_checkpoints_at_its_run_and_loses_nothing() {
    let healthy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&healthy);
    let endpoint = Scripted::start(move |request| {
        if request.operation != "PUT" {
            return Reply::s3_error(400, "InvalidRequest");
        }
        if !flag.load(std::sync::atomic::Ordering::Relaxed) && request.path.contains("/day=22/") {
            Reply::s3_error(503, "SlowDown")
        } else {
            Reply::s3_ok()
        }
    })
    .await;
    let runtime: Runtime<ttl_archiver::Archiver> = scripted_runtime(
        &endpoint,
        &[
            ("ARCHIVE_BUCKET", "archive"),
            ("ARCHIVE_PREFIX", "archive/"),
            ("S3_FORCE_PATH_STYLE", "true"),
            ("WRITE_MAX_ATTEMPTS", "3"),
        ],
    );
    // 2026-11-20 00:00 UTC, one delete every 2.4 hours: ten a day, days 20 to 23.
    let batch = ttl_archiver::synthetic::ttl_batch(40, 3, 1_795_132_800, 8_640.0);
    let sequence = |i: usize| batch.records[i].change.sequence_number.clone().unwrap_or_default();
    let deadline = || Deadline::after(Duration::from_secs(60));

    let (response, metrics) = runtime.handle_counted(batch.clone(), deadline()).await;
    let failures = failures(response);
    assert_eq!(failures, [sequence(20)], "the checkpoint is day 22's first record");
    assert_eq!(metrics.get(Metric::TransientFailures), 1);
    let first: Vec<String> = endpoint.seen().into_iter().map(|r| r.path).collect();
    let day = |d: u32| format!("/day={d}/");
    assert_eq!(first.iter().filter(|p| p.contains(&day(20)) || p.contains(&day(21))).count(), 4);
    assert!(first.iter().filter(|p| p.contains(&day(22))).count() >= 3, "day 22 was retried: {first:?}");
    assert!(!first.iter().any(|p| p.contains(&day(23))), "no run after the failed one is uploaded");

    healthy.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut again = Event::default();
    again.records = batch.records[20..].to_vec();
    let (response, _) = runtime.handle_counted(again, deadline()).await;
    assert!(response.unwrap().batch_item_failures.is_empty());
    // What S3 accepted: the first delivery's uploads but day 22's, and all of the second's.
    let second: Vec<String> = endpoint.seen()[first.len()..].iter().map(|r| r.path.clone()).collect();
    assert!(second.iter().all(|p| p.contains(&day(22)) || p.contains(&day(23))), "{second:?}");
    let uploaded: std::collections::BTreeSet<&String> =
        first.iter().filter(|p| !p.contains(&day(22))).chain(&second).collect();
    assert_eq!(uploaded.len(), 8, "every run's item and metadata objects: {uploaded:?}");
    for d in 20..=23 {
        assert_eq!(uploaded.iter().filter(|p| p.contains(&day(d))).count(), 2, "day {d}");
    }
}
