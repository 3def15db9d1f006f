//! The TTL archiver end to end against moto S3: the objects a batch uploads and their exact
//! lines, a rejected upload becoming the checkpoint, and archive → restore → the same items.
//!
//! moto never expires items, so the TTL deletes here are the fixture events (which carry the
//! DynamoDB service's `userIdentity`, as AWS's do) and synthetic batches.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::time::Duration;

use aws_sdk_dynamodb::types::ScalarAttributeType;
use io_policy::Deadline;
use operations::archive::{self as archive, Source};
use serde_json::{Value, json};
use stream_runtime::Runtime;
use stream_runtime::{Event, EventRecord};
use ttl_archiver::{Archiver, synthetic};

use crate::support::moto::{create_table, parked, runtime, s3, sdk, unique};

macro_rules! fixture {
    ($name:literal) => {
        serde_json::from_str::<Event>(include_str!(concat!("../../events/ttl-archiver/", $name))).unwrap()
    };
}

async fn archiver(bucket: &str) -> Runtime<Archiver> {
    runtime(&[("ARCHIVE_BUCKET", bucket), ("ARCHIVE_PREFIX", "archive/")]).await
}

/// An S3 client, a fresh archive bucket, and an archiver writing to it.
async fn archiving() -> (aws_sdk_s3::Client, String, Runtime<Archiver>) {
    let s3 = s3();
    let bucket = bucket(&s3).await;
    let archiver = archiver(&bucket).await;
    (s3, bucket, archiver)
}

async fn bucket(s3: &aws_sdk_s3::Client) -> String {
    let name = unique("archive");
    s3.create_bucket().bucket(&name).send().await.unwrap();
    name
}

/// A new table keyed like the synthetic sessions (`pk`, `sk`), named after `prefix`.
async fn sessions_table(dynamodb: &aws_sdk_dynamodb::Client, prefix: &str) -> String {
    let name = unique(prefix);
    create_table(dynamodb, &name, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
    name
}

/// Every object in the bucket: key → decompressed lines as JSON.
async fn objects(s3: &aws_sdk_s3::Client, bucket: &str) -> BTreeMap<String, Vec<Value>> {
    let listed = s3.list_objects_v2().bucket(bucket).send().await.unwrap();
    let mut out = BTreeMap::new();
    for key in listed.contents().iter().filter_map(|o| o.key()) {
        let got = s3.get_object().bucket(bucket).key(key).send().await.unwrap();
        let gz = got.body.collect().await.unwrap().into_bytes();
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(&gz[..]).read_to_string(&mut text).unwrap();
        let lines = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        out.insert(key.to_owned(), lines);
    }
    out
}

fn deadline() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

fn failures(response: &stream_runtime::DynamoDbEventResponse) -> Vec<String> {
    response.batch_item_failures.iter().filter_map(|f| f.item_identifier.clone()).collect()
}

/// The mixed fixture uploads exactly its three TTL deletes, as two runs (two deletion days), and
/// a redelivery of the batch leaves the same objects.
#[tokio::test]
async fn a_batch_uploads_exactly_its_ttl_deletes() {
    let (s3, bucket, archiver) = archiving().await;
    let event = fixture!("mixed.json");
    let response = archiver.handle(event.clone(), deadline()).await.unwrap();
    assert_eq!(failures(&response), Vec::<String>::new());

    let raw: Value = serde_json::to_value(&event).unwrap();
    let old = |i: usize| json!({"Item": raw["Records"][i]["dynamodb"]["OldImage"]});
    let meta = |i: usize, at: &str| {
        let r = &raw["Records"][i];
        json!({"v": 2, "eventID": r["eventID"], "sequenceNumber": r["dynamodb"]["SequenceNumber"],
               "deletedAt": at, "table": "issues", "keys": r["dynamodb"]["Keys"], "keysOnly": false})
    };
    let day20 = "table=issues/year=2026/month=11/day=20/0000000000000000000400000000000000000011-\
                 0000000000000000000400000000000000000016-e0011.json.gz";
    let day21 = "table=issues/year=2026/month=11/day=21/0000000000000000000400000000000000000017-\
                 0000000000000000000400000000000000000017-e0017.json.gz";
    let expected = BTreeMap::from([
        (format!("archive/{day20}"), vec![old(1), old(6)]),
        (format!("archive/{day21}"), vec![old(7)]),
        (
            format!("archive/_meta/{day20}"),
            vec![meta(1, "2026-11-20T10:00:00Z"), meta(6, "2026-11-20T10:05:00Z")],
        ),
        (format!("archive/_meta/{day21}"), vec![meta(7, "2026-11-21T01:40:00Z")]),
    ]);
    assert_eq!(objects(&s3, &bucket).await, expected);

    let head = s3.head_object().bucket(&bucket).key(format!("archive/{day20}")).send().await.unwrap();
    let metadata = head.metadata().unwrap();
    assert_eq!(
        (
            metadata.get("sidestream-archive").map(String::as_str),
            metadata.get("records").map(String::as_str),
            metadata.get("last-sequence-number").map(String::as_str),
        ),
        (Some("2"), Some("2"), Some("400000000000000000016"))
    );

    let again = archiver.handle(event, deadline()).await.unwrap();
    assert_eq!(failures(&again), Vec::<String>::new());
    assert_eq!(objects(&s3, &bucket).await, expected, "a redelivery overwrites its own objects");
}

/// When S3 rejects the upload (here: the bucket does not exist), the batch reports the first
/// record of that object; the user delete before it counts as done.
#[tokio::test]
async fn a_rejected_upload_reports_its_first_record() {
    let archiver = archiver(&unique("missing-bucket")).await;
    let response = archiver.handle(fixture!("mixed.json"), deadline()).await.unwrap();
    assert_eq!(failures(&response), ["400000000000000000011"]);
}

/// A malformed record (no eventSourceARN) is parked whole, and the batch goes on: the records
/// before and after it are archived, in one run named after its first and last.
#[tokio::test]
async fn a_malformed_record_is_parked_and_the_records_around_it_are_archived() {
    let s3 = s3();
    let bucket = bucket(&s3).await;
    let response = archiver(&bucket).await.handle(fixture!("poison.json"), deadline()).await.unwrap();
    assert!(failures(&response).is_empty(), "{response:?}");
    let objects = objects(&s3, &bucket).await;
    let keys: Vec<&String> = objects.keys().collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys.iter().all(|k| k.ends_with(
        "0000000000000000000400000000000000000040-0000000000000000000400000000000000000042-e0040.json.gz"
    )));
    let meta = objects.iter().find(|(k, _)| k.contains("_meta/")).unwrap().1;
    let archived: Vec<&Value> = meta.iter().map(|l| &l["eventID"]).collect();
    assert_eq!(archived, [&json!("e0040"), &json!("e0042")]);
    let parked = parked("ttl-archiver", "e0041").await;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0]["kind"], "record-permanent");
    assert!(parked[0]["error"].as_str().unwrap().contains("eventSourceARN"), "{}", parked[0]);
    assert_eq!(parked[0]["record"]["dynamodb"]["SequenceNumber"], "400000000000000000041");
}

async fn scan(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<serde_dynamo::Item> {
    let mut items: Vec<serde_dynamo::Item> = Vec::new();
    let mut pages = client.scan().table_name(table).into_paginator().send();
    while let Some(page) = pages.next().await {
        items.extend(page.unwrap().items().iter().cloned().map(serde_dynamo::Item::from));
    }
    items.sort_by_key(|item| serde_json::to_string(&formats::archive::DynamoJson(item)).unwrap());
    items
}

/// Restore options that put the items back exactly as archived.
fn keep() -> archive::RestoreOptions {
    archive::RestoreOptions {
        ttl_attribute: "expires_at".into(),
        ttl: Some(archive::TtlChoice::Keep),
        if_absent: false,
        now: 1_795_168_800,
    }
}

/// `table` holds exactly the old images of `batch`'s records.
async fn assert_holds_old_images(client: &aws_sdk_dynamodb::Client, table: &str, batch: &Event) {
    let want = batch.records.iter().map(|r| r.change.old_image.clone()).collect();
    assert_eq!(scan(client, table).await, sorted(want));
}

/// Archives `batch`, then the batch again from record `from` (Lambda's redelivery after a
/// checkpoint there): two objects, the second overlapping the first. Neither delivery fails.
async fn archive_with_redelivery(archiver: &Runtime<Archiver>, batch: &Event, from: usize) {
    assert_eq!(failures(&archiver.handle(batch.clone(), deadline()).await.unwrap()), Vec::<String>::new());
    let mut again = Event::default();
    again.records = batch.records[from..].to_vec();
    assert_eq!(failures(&archiver.handle(again, deadline()).await.unwrap()), Vec::<String>::new());
}

/// Restores the objects under `(bucket, prefix)` into `table` as they were archived.
async fn restore_kept(
    s3: &aws_sdk_s3::Client,
    config: &aws_sdk_dynamodb::Client,
    at: (&str, &str, &str),
) -> archive::Restored {
    archive::restore(s3, config, at, &keep(), &mut |_| {}).await.unwrap()
}

fn sorted(mut items: Vec<serde_dynamo::Item>) -> Vec<serde_dynamo::Item> {
    items.sort_by_key(|item| serde_json::to_string(&formats::archive::DynamoJson(item)).unwrap());
    items
}

/// Archive, restore, and get the very same items back: every attribute type (the every-type
/// fixture), keys-only records left out, and 1,000 synthetic sessions across two days.
#[tokio::test]
async fn archive_then_restore_gives_back_the_same_items() {
    let sdk = sdk();
    let (s3, bucket, archiver) = archiving().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = unique("restored-issues");
    create_table(&dynamodb, &issues, "id", None, false).await;
    let sessions = sessions_table(&dynamodb, "restored-sessions").await;

    let ttl_deletes: Vec<EventRecord> = ["every-type", "mixed", "keys-only"]
        .iter()
        .flat_map(|name| {
            let text = std::fs::read_to_string(format!(
                "{}/../events/ttl-archiver/{name}.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            serde_json::from_str::<Event>(&text).unwrap().records
        })
        .collect();
    for chunk in [&ttl_deletes[..1], &ttl_deletes[1..9], &ttl_deletes[9..]] {
        let mut event = Event::default();
        event.records = chunk.to_vec();
        let response = archiver.handle(event, deadline()).await.unwrap();
        assert_eq!(failures(&response), Vec::<String>::new());
    }
    // 1,000 sessions deleted a minute apart from 2026-11-20 10:00 UTC: two days, two runs.
    let batch = synthetic::ttl_batch(1_000, 5, 1_795_168_800, 60.0);
    let response = archiver.handle(batch.clone(), deadline()).await.unwrap();
    assert_eq!(failures(&response), Vec::<String>::new());

    let config = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let mut progress = Vec::new();
    let restored =
        archive::restore(&s3, &config, (&bucket, "archive/table=issues/", &issues), &keep(), &mut |p| {
            progress.push((p.object.to_owned(), p.objects, p.items));
        })
        .await
        .unwrap();
    assert_eq!((restored.objects, restored.items, restored.superseded), (3, 4, 0));
    let want: Vec<serde_dynamo::Item> = ttl_deletes
        .iter()
        .filter(|r| {
            let ttl = r.user_identity.as_ref().is_some_and(|id| {
                (id.type_.as_str(), id.principal_id.as_str()) == ("Service", "dynamodb.amazonaws.com")
            });
            ttl && !r.change.old_image.is_empty()
        })
        .map(|r| r.change.old_image.clone())
        .collect();
    assert_eq!(want.len(), 4);
    assert_eq!(scan(&dynamodb, &issues).await, sorted(want));
    assert_eq!(progress.len(), 3, "{progress:?}");
    let (object, objects, items) = &progress[2];
    assert!(object.starts_with("archive/table=issues/year=2026/month=11/day=21/"), "{object}");
    assert_eq!((*objects, *items), ((3, 3), (4, 4)));

    let restored = restore_kept(&s3, &config, (&bucket, "archive/table=sessions/", &sessions)).await;
    assert_eq!((restored.objects, restored.items), (2, 1_000));
    assert_holds_old_images(&dynamodb, &sessions, &batch).await;
}

/// A redelivery that starts inside a run already uploaded writes an overlapping object: its
/// lines repeat deletions the earlier object holds. Read back and restored, each deletion counts
/// once, by its `eventID`.
#[tokio::test]
async fn overlapping_objects_are_read_and_restored_once() {
    let sdk = sdk();
    let (s3, bucket, archiver) = archiving().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let batch = synthetic::ttl_batch(6, 9, 1_795_168_800, 1.0);
    // Lambda delivers the batch again from its fourth record (as after a checkpoint there).
    archive_with_redelivery(&archiver, &batch, 3).await;
    let data_objects = objects(&s3, &bucket)
        .await
        .into_iter()
        .filter(|(k, _)| !k.contains("/_meta/"))
        .map(|(_, lines)| lines.len())
        .collect::<Vec<_>>();
    assert_eq!(data_objects, [6, 3], "two objects, the second overlapping the first");

    let read = archive::items(&s3, &bucket, "archive/").await.unwrap();
    assert_eq!(read.len(), 6);
    let sessions = sessions_table(&dynamodb, "overlap-sessions").await;
    let config = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let restored = restore_kept(&s3, &config, (&bucket, "archive/", &sessions)).await;
    assert_eq!((restored.objects, restored.items, restored.duplicates), (2, 6, 3));
    assert_holds_old_images(&dynamodb, &sessions, &batch).await;
}

/// An archive becomes a new table through DynamoDB's `ImportTable` (`archive import`): the
/// request Sidestream builds from the archive prefix is one the emulator carries out, reading the
/// source table's item objects (not the metadata beside them), and the table it creates holds
/// the archived items; an overlapping object's repeated lines are the same items again. The CLI
/// does the same, and refuses a prefix with nothing to import.
#[tokio::test]
async fn an_archive_is_imported_into_a_new_table() {
    use operations::archive::import::{self, Import, KeyAttribute};
    let (s3, bucket, archiver) = archiving().await;
    let batch = synthetic::ttl_batch(40, 21, 1_795_168_800, 30.0);
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk());
    archive_with_redelivery(&archiver, &batch, 30).await;

    let key = || (KeyAttribute::parse("pk").unwrap(), Some(KeyAttribute::parse("sk").unwrap()));
    let table = unique("imported-sessions");
    let request = Import::of_source(&bucket, "archive/", "sessions", &table, key());
    let started = import::start(&s3, &dynamodb, &request).await.unwrap();
    let mut reads = 0;
    let done = import::wait(&dynamodb, &started.import_arn, &mut |_| reads += 1).await.unwrap();
    assert!(reads >= 1 && done.ended(), "{done:?}");
    // 50 lines read: the 40 deletions and the 10 the overlapping object repeats.
    assert_eq!((done.status.as_str(), done.processed_items, done.errors), ("COMPLETED", 50, 0), "{done:?}");
    assert_holds_old_images(&dynamodb, &table, &batch).await;

    let cli = unique("imported-by-cli");
    let args = ["archive", "import", "--bucket", &bucket, "--source", "sessions", "--table", &cli];
    let keys = ["--partition-key", "pk", "--sort-key", "sk:S", "--output", "json"];
    let ran = crate::support::process::sidestream(&[&args[..], &keys[..]].concat(), "", &[]);
    assert!(ran.ok, "{ran:?}");
    let state: Value = serde_json::from_str(&ran.out).unwrap();
    assert_eq!(
        (state["status"].as_str(), state["imported_items"].as_i64()),
        (Some("COMPLETED"), Some(50)),
        "{state}"
    );
    assert_holds_old_images(&dynamodb, &cli, &batch).await;

    let nothing = Import::of_source(&bucket, "archive/", "no-such-source", &unique("never"), key());
    let refused = import::start(&s3, &dynamodb, &nothing).await.unwrap_err().to_string();
    assert!(refused.contains("no archive objects (*.json.gz) under"), "{refused}");
}

/// `archive cat` reads an object from S3 as plain JSON lines; restore refuses what it cannot do.
#[tokio::test]
async fn cat_and_restore_errors() {
    let sdk = sdk();
    let (s3, bucket, archiver) = archiving().await;
    archiver.handle(fixture!("every-type.json"), deadline()).await.unwrap();
    archiver.handle(synthetic::ttl_batch(3, 1, 1_795_168_800, 1.0), deadline()).await.unwrap();

    let key = "archive/table=issues/year=2026/month=11/day=20/0000000000000000000400000000000000000030-\
               0000000000000000000400000000000000000030-e0030.json.gz";
    let bytes = Source::parse(&format!("s3://{bucket}/{key}")).unwrap().fetch(&s3).await.unwrap();
    let mut out = Vec::new();
    assert_eq!(archive::cat(&bytes, &mut out, false).unwrap(), 1);
    let line: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (&line["n38"], &line["bs"], &line["ns"], &line["nothing"], &line["m"]["nested"]["deep"]),
        (
            &serde_json::from_str::<Value>("12345678901234567890123456789012345678").unwrap(),
            &json!(["AQ==", "Ag=="]),
            &json!([1, 2.5, -3]),
            &Value::Null,
            &json!("x")
        )
    );
    assert!(
        String::from_utf8(out).unwrap().contains(r#""n38":12345678901234567890123456789012345678,"#),
        "all 38 digits, as a number"
    );

    let config = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let err = |r: Result<archive::Restored, archive::ArchiveError>| r.unwrap_err().to_string();
    let restore = |prefix: &'static str, table: &'static str| {
        let (s3, config, bucket) = (s3.clone(), config.clone(), bucket.clone());
        async move { archive::restore(&s3, &config, (&bucket, prefix, table), &keep(), &mut |_| {}).await }
    };
    let mixed = err(restore("archive/", "anything").await);
    assert!(mixed.contains("holds archives of 2 source tables (issues, sessions)"), "{mixed}");
    let empty = err(restore("nothing/", "anything").await);
    assert!(
        empty.contains(&format!("no archive objects (*.json.gz) under s3://{bucket}/nothing/")),
        "{empty}"
    );
    let missing = err(restore("archive/table=issues/", "no-such-table").await);
    assert!(
        missing.contains("DescribeTable on no-such-table (systemic): ResourceNotFoundException")
            && missing.contains("existing table"),
        "{missing}"
    );
}

/// 20 synthetic sessions archived (their TTL a day past at `NOW`), and a restore of them into a
/// table.
struct Archived {
    s3: aws_sdk_s3::Client,
    config: aws_sdk_dynamodb::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    bucket: String,
    items: Vec<serde_dynamo::Item>,
}

/// When the restores below run: a day after the sessions' deletions.
const NOW: i64 = 1_795_168_800 + 86_400;

impl Archived {
    async fn new() -> Archived {
        let sdk = sdk();
        let (s3, bucket, archiver) = archiving().await;
        let batch = synthetic::ttl_batch(20, 3, NOW - 86_400, 10.0);
        let response = archiver.handle(batch.clone(), deadline()).await.unwrap();
        assert_eq!(failures(&response), Vec::<String>::new());
        Archived {
            s3,
            config: aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk)),
            dynamodb: aws_sdk_dynamodb::Client::new(&sdk),
            bucket,
            items: batch.records.iter().map(|r| r.change.old_image.clone()).collect(),
        }
    }

    async fn restore(
        &self,
        table: &str,
        ttl: Option<archive::TtlChoice>,
        if_absent: bool,
    ) -> Result<archive::Restored, archive::ArchiveError> {
        let options =
            archive::RestoreOptions { ttl_attribute: "expires_at".into(), ttl, if_absent, now: NOW };
        let target = (self.bucket.as_str(), "archive/", table);
        archive::restore(&self.s3, &self.config, target, &options, &mut |_| {}).await
    }
}

/// Every archived item's TTL has passed, so a restore without a choice is refused before it
/// writes anything, with the count; so is one whose TTL attribute name matches no item. `clear`,
/// `extend=DAYS` and `keep` do what they say.
#[tokio::test]
async fn restore_refuses_expired_ttl_and_each_choice_does_what_it_says() {
    let archived = Archived::new().await;
    let dynamodb = &archived.dynamodb;
    let refused = sessions_table(dynamodb, "refused").await;
    let error = archived.restore(&refused, None, false).await.unwrap_err().to_string();
    assert!(
        error.starts_with("refused: 20 of the 20 items have expires_at in the past")
            && error.contains("--ttl clear"),
        "{error}"
    );
    let misnamed =
        archive::RestoreOptions { ttl_attribute: "ttl".into(), ttl: None, if_absent: false, now: NOW };
    let target = (archived.bucket.as_str(), "archive/", refused.as_str());
    let error = archive::restore(&archived.s3, &archived.config, target, &misnamed, &mut |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("none of the 20 items has the attribute ttl"), "{error}");
    assert_eq!(scan(dynamodb, &refused).await.len(), 0, "a refusal writes nothing");

    let ttl_of = |item: &serde_dynamo::Item| match item.get("expires_at") {
        Some(serde_dynamo::AttributeValue::N(n)) => Some(n.parse::<i64>().unwrap()),
        _ => None,
    };
    let cleared = sessions_table(dynamodb, "cleared").await;
    let done = archived.restore(&cleared, Some(archive::TtlChoice::Clear), false).await.unwrap();
    assert_eq!((done.items, done.expired, done.ttl_changed), (20, 20, 20));
    assert!(scan(dynamodb, &cleared).await.iter().all(|i| ttl_of(i).is_none()));

    let extended = sessions_table(dynamodb, "extended").await;
    let done =
        archived.restore(&extended, Some(archive::TtlChoice::Extend { days: 7 }), false).await.unwrap();
    assert_eq!((done.items, done.ttl_changed), (20, 20));
    let items = scan(dynamodb, &extended).await;
    assert!(items.iter().all(|i| ttl_of(i) == Some(NOW + 7 * 86_400)), "{items:?}");

    let kept = sessions_table(dynamodb, "kept").await;
    let done = archived.restore(&kept, Some(archive::TtlChoice::Keep), false).await.unwrap();
    assert_eq!((done.items, done.expired, done.ttl_changed), (20, 20, 0));
    assert_eq!(scan(dynamodb, &kept).await, sorted(archived.items.clone()));
}

/// One item was recreated under the same key since its deletion: `if_absent` leaves it as it
/// is and counts it, and a second restore overwrites nothing.
#[tokio::test]
async fn restore_if_absent_never_overwrites_a_recreated_item() {
    let archived = Archived::new().await;
    let dynamodb = &archived.dynamodb;
    let want = archived.items.clone();
    let recreated = sessions_table(dynamodb, "recreated").await;
    let mut newer = want[4].clone();
    newer.insert("page".to_owned(), serde_dynamo::AttributeValue::S("recreated".into()));
    dynamodb.put_item().table_name(&recreated).set_item(Some(newer.clone().into())).send().await.unwrap();
    let keep = Some(archive::TtlChoice::Keep);
    let done = archived.restore(&recreated, keep, true).await.unwrap();
    assert_eq!((done.items, done.existing), (19, 1));
    let mut expected = want;
    expected[4] = newer;
    assert_eq!(scan(dynamodb, &recreated).await, sorted(expected));
    // Again: everything is there now, and nothing is overwritten.
    let again = archived.restore(&recreated, keep, true).await.unwrap();
    assert_eq!((again.items, again.existing), (0, 20));
}
