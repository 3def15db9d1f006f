//! The restore job's steps as the state machine sends them, its input checks, its shuffle
//! (partition of a key, batch names, the reduce), and its objects pinned as docs/formats.md
//! specifies them.

use serde_dynamo::AttributeValue;
use serde_json::json;

use super::*;

fn item(pk: &str, page: &str) -> Item {
    let mut item = Item::from(HashMap::<String, AttributeValue>::new());
    item.insert("pk".to_owned(), AttributeValue::S(pk.to_owned()));
    item.insert("page".to_owned(), AttributeValue::S(page.to_owned()));
    item
}

fn line(object: &str, line: u32, event: Option<&str>, pk: &str, page: &str) -> PartLine {
    PartLine { object: object.into(), line, event_id: event.map(str::to_owned), item: item(pk, page) }
}

fn plan_of(partitions: u32) -> Plan {
    Plan {
        run_id: "r".into(),
        prefix: "archive/table=issues/".into(),
        ttl: "clear".into(),
        if_absent: true,
        partitions,
        max_concurrency: 2,
        now: 1_800_000_000,
    }
}

#[test]
fn each_step_reads_as_the_state_machine_sends_it() {
    let plan = plan_of(4);
    let plan_json = serde_json::to_value(&plan).unwrap();
    let cases = [
        (
            json!({"step": "plan", "run_id": "r", "request": {"prefix": "archive/table=issues/", "ttl": "clear"}}),
            Step::Plan {
                run_id: "r".into(),
                request: Request {
                    prefix: "archive/table=issues/".into(),
                    ttl: Some("clear".into()),
                    if_absent: false,
                    partitions: None,
                    max_concurrency: None,
                },
            },
        ),
        (
            // As the ItemReader lists an object: only its Key and StorageClass are read.
            json!({"step": "split", "plan": plan_json, "objects": [
                {"Key": "archive/table=issues/year=2026/month=11/day=27/a.json.gz", "Size": 120,
                 "Etag": "\"e\"", "LastModified": 1_795_168_800, "StorageClass": "GLACIER"},
                {"Key": "archive/table=issues/year=2026/month=11/day=28/b.json.gz"}]}),
            Step::Split {
                plan: plan.clone(),
                objects: vec![
                    Listed {
                        key: "archive/table=issues/year=2026/month=11/day=27/a.json.gz".into(),
                        storage_class: Some("GLACIER".into()),
                    },
                    Listed {
                        key: "archive/table=issues/year=2026/month=11/day=28/b.json.gz".into(),
                        storage_class: None,
                    },
                ],
            },
        ),
        (
            json!({"step": "restore", "plan": plan_json, "partition": 3}),
            Step::Restore(PartitionTask { plan: plan.clone(), partition: 3, done: false }),
        ),
        (json!({"step": "report", "plan": plan_json}), Step::Report { plan: plan.clone() }),
    ];
    for (input, step) in cases {
        assert_eq!(serde_json::from_value::<Step>(input.clone()).unwrap(), step, "{input}");
    }
    // A partition's answer is its next step.
    let task = PartitionTask { plan: plan.clone(), partition: 3, done: true };
    let answer = serde_json::to_value(Answer::Restore(task.clone())).unwrap();
    assert_eq!(serde_json::from_value::<Step>(answer).unwrap(), Step::Restore(task));
    let unknown = json!({"step": "plan", "run_id": "r", "request": {"prefix": "p/table=t/", "ttl": "clear", "table": "x"}});
    assert!(serde_json::from_value::<Step>(unknown).is_err(), "an unknown input field is refused");
}

#[test]
fn a_plan_needs_a_ttl_choice_one_table_and_bounded_partitions_and_concurrency() {
    let request =
        |prefix: &str, ttl: Option<&str>, partitions: Option<u32>, max_concurrency: Option<u32>| Request {
            prefix: prefix.into(),
            ttl: ttl.map(str::to_owned),
            if_absent: false,
            partitions,
            max_concurrency,
        };
    let ok = plan("r".into(), request("archive/table=issues/", Some("extend=7"), None, None), 4, 99).unwrap();
    assert_eq!((ok.partitions, ok.max_concurrency, ok.now, ok.ttl.as_str()), (16, 4, 99, "extend=7"));
    let refused = [
        (request("archive/table=issues/", None, None, None), "ttl is required (keep, clear or extend=DAYS)"),
        (
            request("archive/table=issues/", Some("forever"), None, None),
            "ttl: \"forever\" is not keep, clear or extend=DAYS",
        ),
        (request("archive/", Some("keep"), None, None), "must end in / and name one table=… folder"),
        (
            request("archive/table=issues", Some("keep"), None, None),
            "must end in / and name one table=… folder",
        ),
        (
            request("archive/table=issues/", Some("keep"), Some(0), None),
            "partitions is 0: it must be 1 to 1000",
        ),
        (
            request("archive/table=issues/", Some("keep"), Some(1001), None),
            "partitions is 1001: it must be 1 to 1000",
        ),
        (
            request("archive/table=issues/", Some("keep"), None, Some(0)),
            "max_concurrency is 0: it must be 1 to the function's reserved concurrency, 4",
        ),
        (
            request("archive/table=issues/", Some("keep"), None, Some(5)),
            "max_concurrency is 5: it must be 1 to the function's reserved concurrency, 4",
        ),
    ];
    for (input, expected) in refused {
        let error = plan("r".into(), input.clone(), 4, 99).unwrap_err().to_string();
        assert!(
            error.starts_with("refused: the restore job's input: ") && error.contains(expected),
            "{input:?}: {error}"
        );
    }
}

/// The partition of a key and the name of a batch are persisted (part objects are named by
/// them): a change here is a new format version.
#[test]
fn partitions_and_batch_names_are_stable() {
    let key = r#"{"pk":{"S":"session#1"},"sk":{"S":"a"}}"#;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let head = u64::from_be_bytes(digest[..8].try_into().unwrap());
    assert_eq!(partition_of(key, 16), u32::try_from(head % 16).unwrap());
    assert_eq!(partition_of(key, 1), 0);
    let counts = (0..1_000).fold([0_u32; 8], |mut counts, n| {
        counts[partition_of(&format!(r#"{{"pk":{{"S":"k{n}"}}}}"#), 8) as usize] += 1;
        counts
    });
    assert!(counts.iter().all(|c| (90..=160).contains(c)), "keys spread over partitions: {counts:?}");
    // By the keys alone: the storage class a listing gives does not name the batch.
    let batch = [
        Listed { key: "a".into(), storage_class: Some("GLACIER".into()) },
        Listed { key: "b".into(), storage_class: None },
    ];
    let name = batch_name(&batch);
    assert_eq!(name.len(), 16);
    let digest = sha2::Sha256::digest(b"a\nb\n");
    let expected = format!("{:016x}", u64::from_be_bytes(digest[..8].try_into().unwrap()));
    assert_eq!(name, expected);
    assert_eq!(part_name(7, &name), format!("parts/0007/{name}.json"));
    assert_eq!(partition_name(12), "partition-0012.json");
}

/// A reduce's case: what, the lines, the items kept as (pk, page), (superseded, duplicates).
type Case = (&'static str, Vec<PartLine>, Vec<(&'static str, &'static str)>, (usize, usize));

/// The reduce keeps what `archive restore` keeps: in stream order, a repeated `eventID` left
/// out (the first kept), then the last copy of each key.
#[test]
fn the_reduce_keeps_each_deletion_once_and_each_keys_last() {
    let keys = ["pk".to_owned()];
    let day1 = "archive/table=t/year=2026/month=11/day=01/x.json.gz";
    let day2 = "archive/table=t/year=2026/month=11/day=02/y.json.gz";
    let day2_overlap = "archive/table=t/year=2026/month=11/day=02/z.json.gz";
    let cases: Vec<Case> = vec![
        ("nothing", vec![], vec![], (0, 0)),
        (
            "a key deleted on two days: the later wins, whatever order the parts came in",
            vec![line(day2, 1, Some("e2"), "a", "second"), line(day1, 1, Some("e1"), "a", "first")],
            vec![("a", "second")],
            (1, 0),
        ),
        (
            "an overlapping object repeats a deletion: read once",
            vec![
                line(day2, 1, Some("e1"), "a", "1"),
                line(day2, 2, Some("e2"), "b", "2"),
                line(day2_overlap, 1, Some("e2"), "b", "2"),
                line(day2_overlap, 2, Some("e3"), "c", "3"),
            ],
            vec![("a", "1"), ("b", "2"), ("c", "3")],
            (0, 1),
        ),
        (
            "a repeated deletion does not supersede a later one of the same key",
            vec![
                line(day1, 1, Some("e1"), "a", "old"),
                line(day1, 2, Some("e2"), "a", "new"),
                line(day2_overlap, 1, Some("e1"), "a", "old"),
            ],
            vec![("a", "new")],
            (1, 1),
        ),
        (
            "without metadata every line counts",
            vec![line(day1, 1, None, "a", "1"), line(day1, 2, None, "b", "2")],
            vec![("a", "1"), ("b", "2")],
            (0, 0),
        ),
    ];
    for (case, lines, expected, (superseded, duplicates)) in cases {
        let (items, counts) = reduce(lines, &keys).unwrap();
        let got: Vec<(String, String)> = items
            .iter()
            .map(|i| match (i.get("pk"), i.get("page")) {
                (Some(AttributeValue::S(k)), Some(AttributeValue::S(p))) => (k.clone(), p.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        let expected: Vec<(String, String)> =
            expected.into_iter().map(|(k, p)| (k.into(), p.into())).collect();
        assert_eq!(got, expected, "{case}");
        assert_eq!(
            (counts.planned, counts.superseded, counts.duplicates),
            (expected.len(), superseded, duplicates),
            "{case}"
        );
    }
    let error = reduce(vec![line(day1, 3, None, "a", "1")], &["id".to_owned()]).unwrap_err().to_string();
    assert_eq!(error, format!("{day1}: line 3: the item has no \"id\", a key attribute of the table"));
}

/// A part, a partition's state, a batch and the report, version 2, as docs/formats.md shows
/// them: a change here is a new version.
#[test]
fn the_objects_are_written_as_the_format_says() {
    let mut binary = item("a", "p");
    binary.insert("blob".to_owned(), AttributeValue::B(vec![0, 255]));
    let part = Part {
        version: FORMAT_VERSION,
        run_id: "r".into(),
        partition: 3,
        lines: vec![PartLine {
            object: "archive/table=t/x.json.gz".into(),
            line: 1,
            event_id: Some("e1".into()),
            item: binary,
        }],
    };
    let text = serde_json::to_value(&part).unwrap();
    assert_eq!(
        text,
        json!({"version": 2, "run_id": "r", "partition": 3, "lines": [{
            "object": "archive/table=t/x.json.gz", "line": 1, "event_id": "e1",
            "item": {"blob": {"B": "AP8="}, "page": {"S": "p"}, "pk": {"S": "a"}}}]})
    );
    assert_eq!(serde_json::from_value::<Part>(text).unwrap(), part, "a part reads back as written");
    let state = PartitionState {
        version: FORMAT_VERSION,
        run_id: "r".into(),
        partition: 3,
        next: 25,
        done: false,
        counts: Counts {
            planned: 40,
            items: 24,
            existing: 1,
            superseded: 2,
            duplicates: 3,
            expired: 40,
            ttl_changed: 25,
        },
    };
    assert_eq!(
        serde_json::to_value(&state).unwrap(),
        json!({"version": 2, "run_id": "r", "partition": 3, "next": 25, "done": false, "counts": {
            "planned": 40, "items": 24, "existing": 1, "superseded": 2, "duplicates": 3, "expired": 40, "ttl_changed": 25}})
    );
    let glacier = Archived {
        key: "archive/table=t/year=2026/month=02/day=01/x.json.gz".into(),
        storage_class: "GLACIER".into(),
    };
    let split = Split {
        version: FORMAT_VERSION,
        run_id: "r".into(),
        objects: 2,
        skipped: 1,
        lines: 9,
        archived: 1,
        archived_objects: vec![glacier.clone()],
    };
    let text = serde_json::to_value(&split).unwrap();
    assert_eq!(
        text,
        json!({"version": 2, "run_id": "r", "objects": 2, "skipped": 1, "lines": 9, "archived": 1,
            "archived_objects": [{"key": "archive/table=t/year=2026/month=02/day=01/x.json.gz", "storage_class": "GLACIER"}]})
    );
    assert_eq!(serde_json::from_value::<Split>(text).unwrap(), split, "a batch reads back as written");
    let report = Report {
        version: FORMAT_VERSION,
        run_id: "r".into(),
        table: "issues".into(),
        archive: "s3://archive/archive/table=t/".into(),
        objects: 2,
        lines: 9,
        archived: 2,
        archived_objects: vec![
            Archived {
                key: "archive/_meta/table=t/year=2026/month=02/day=02/y.json.gz".into(),
                storage_class: "DEEP_ARCHIVE".into(),
            },
            glacier,
        ],
        counts: Counts { planned: 9, items: 9, ..Counts::default() },
    };
    assert_eq!(
        serde_json::to_string(&report).unwrap(),
        r#"{"version":2,"run_id":"r","table":"issues","archive":"s3://archive/archive/table=t/","objects":2,"lines":9,"archived":2,"archived_objects":[{"key":"archive/_meta/table=t/year=2026/month=02/day=02/y.json.gz","storage_class":"DEEP_ARCHIVE"},{"key":"archive/table=t/year=2026/month=02/day=01/x.json.gz","storage_class":"GLACIER"}],"counts":{"planned":9,"items":9,"existing":0,"superseded":0,"duplicates":0,"expired":0,"ttl_changed":0}}"#,
        "the report as docs/formats.md shows it"
    );
    // Version 1's batches had no archived objects: they read as none.
    let v1 = json!({"version": 1, "run_id": "r", "objects": 2, "skipped": 1, "lines": 9});
    let read = serde_json::from_value::<Split>(v1).unwrap();
    assert_eq!((read.archived, read.archived_objects.len()), (0, 0));
    assert_eq!(READS, [1, 2]);
}

/// A read S3 refuses as archived (`InvalidObjectState`, as `io_policy` words it) is told from
/// every other failed request, whatever its kind.
#[test]
fn an_archived_object_is_told_by_s3s_invalid_object_state() {
    let failed = |operation: &'static str, message: &str| RequestFailed {
        operation,
        target: "s3://archive/archive/table=t/x.json.gz".into(),
        kind: FailureKind::Systemic,
        message: message.into(),
    };
    let archived = [
        failed("GetObject", "InvalidObjectState: The operation is not valid for the object's storage class"),
        failed("GetObject", "InvalidObjectState (HTTP 403)"),
        failed("GetObject", "InvalidObjectState"),
    ];
    for failure in &archived {
        assert!(refused_as_archived(failure), "{failure}");
    }
    let others = [
        failed("GetObject", "AccessDenied: Access Denied"),
        failed("GetObject", "no such key"),
        failed("GetObject", "InvalidObjectStateX: another code"),
        failed("PutObject", "InvalidObjectState: The operation is not valid for the object's storage class"),
    ];
    for failure in &others {
        assert!(!refused_as_archived(failure), "{failure}");
    }
}

#[test]
fn the_configuration_names_each_variable() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    };
    let full: &[(&str, &str)] = &[
        ("RESTORE_TABLE", "issues"),
        ("ARCHIVE_BUCKET", "archive"),
        ("TTL_ATTRIBUTE", "expires_at"),
        ("RESTORE_BUCKET", "work"),
        ("RESTORE_WRITE_UNITS", "200"),
        ("RESTORE_CONCURRENCY", "8"),
    ];
    let lookup = env(full);
    let config = Config::from_vars(&Vars::new(&lookup)).unwrap();
    assert_eq!((config.write_units, config.reserved, config.prefix.as_str()), (Some(200.0), 8, "restore/"));
    let lookup = env(&[("RESTORE_TABLE", "issues"), ("ARCHIVE_BUCKET", "archive"), ("TTL_ATTRIBUTE", "t")]);
    let error = Config::from_vars(&Vars::new(&lookup)).unwrap_err().to_string();
    assert!(error.contains("RESTORE_BUCKET"), "{error}");
    let lookup = env(&[
        ("RESTORE_TABLE", "issues"),
        ("ARCHIVE_BUCKET", "archive"),
        ("TTL_ATTRIBUTE", "t"),
        ("RESTORE_BUCKET", "w"),
        ("RESTORE_WRITE_UNITS", "-1"),
    ]);
    let error = Config::from_vars(&Vars::new(&lookup)).unwrap_err().to_string();
    assert!(error.contains("RESTORE_WRITE_UNITS") && error.contains("positive"), "{error}");
}
