//! The `sidestream` binary as a process: what a user types, what they get back.

use crate::support::process::sidestream;

/// `failures replay` that finds none of the function's failures fails, and says what it searched
/// for and which functions the failures name: a replay that matched nothing never passes for
/// one that worked. A range of the CloudFormation-named indexer is the indexer's.
#[test]
fn a_replay_that_matches_no_failure_fails_and_says_what_it_searched() {
    let line = |name: &str| {
        serde_json::json!({
            "version": "1.0", "timestamp": "2026-11-24T12:00:00.000Z",
            "requestContext": {"functionArn": format!("arn:aws:lambda:us-east-1:123456789012:function:{name}"),
                               "condition": "RetryAttemptsExhausted"},
            "DDBStreamBatchInfo": {"shardId": "shardId-1", "startSequenceNumber": "11", "endSequenceNumber": "12",
                                   "batchSize": 2, "streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/s"}
        })
        .to_string()
    };
    let log = std::env::temp_dir().join(format!("{}.jsonl", crate::support::moto::unique("cli-failures")));
    std::fs::write(&log, line("prod-ArchiverFunction-1A2B3C4D5E6F7")).unwrap();
    let log = log.display().to_string();
    let args = ["failures", "replay", "--log", &log, "--function", "multikey-indexer"];
    let ran = sidestream(&args, "", &[("MULTIKEY_INDEXES", "{}")]);
    assert!(!ran.ok, "{ran:?}");
    assert!(
        ran.err.contains("no failure of multikey-indexer among the 1 read from")
            && ran.err.contains("<stack>-IndexerFunction-<suffix>")
            && ran.err.contains("the failures read name prod-ArchiverFunction-1A2B3C4D5E6F7"),
        "{}",
        ran.err
    );
    let listed = sidestream(&["failures", "list", "--log", &log, "--output", "json"], "", &[]);
    assert!(
        listed.ok && listed.out.contains(r#""function":"prod-ArchiverFunction-1A2B3C4D5E6F7""#),
        "{listed:?}"
    );
}

/// `status` of a stack none of whose functions has reported cannot say it is healthy: it exits 2
/// and asks whether the name is right. A missing Region is named, as the systemic failure it is,
/// before any request.
#[test]
fn status_of_an_unknown_stack_exits_2_and_a_missing_region_is_named() {
    let stack = crate::support::moto::unique("no-such-stack");
    let ran = sidestream(&["status", "--stack", &stack, "--output", "json"], "", &[]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.err.contains(&format!("no function of stack {stack} has reported; is the name right?")),
        "{}",
        ran.err
    );
    let json: serde_json::Value = serde_json::from_str(&ran.out).unwrap();
    assert!(json["unseen"].is_string() && json["functions"] == serde_json::json!([]), "{json}");

    let (ok, err) = without_region(&["status", "--stack", &stack]);
    assert!(!ok && err.contains("systemic") && err.contains("AWS_REGION"), "{err}");
    // A command that reads a local file calls no AWS, and needs no Region.
    let (_, err) = without_region(&["archive", "cat", "/nonexistent/archive.json.gz"]);
    assert!(err.contains("/nonexistent/archive.json.gz") && !err.contains("AWS_REGION"), "{err}");
}

/// `sidestream` run with `args` where no Region is configured: whether it succeeded, and its
/// stderr.
fn without_region(args: &[&str]) -> (bool, String) {
    let binary = crate::support::process::binary("sidestream").unwrap();
    let out = std::process::Command::new(binary)
        .args(args)
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Every flag that names a bucket takes `BUCKET` and `s3://BUCKET` alike; a name S3 cannot have
/// is refused before any request, with the rule. At least one failure source is required.
#[test]
fn buckets_are_taken_in_either_form_and_a_source_is_required() {
    let bad = sidestream(&["failures", "list", "--parked", "s3://Bad_Bucket/x"], "", &[]);
    assert!(!bad.ok && bad.err.contains("\"Bad_Bucket\" is not a bucket name"), "{bad:?}");
    let prefixed = sidestream(&["status", "--stack", "s", "--parking", "s3://parking/x/"], "", &[]);
    assert!(!prefixed.ok && prefixed.err.contains("this flag takes a bucket alone"), "{prefixed:?}");
    let none = sidestream(&["failures", "list"], "", &[]);
    assert_eq!(none.code, Some(2), "{none:?}");
    assert!(
        none.err.contains("--log <FILE>|--queue <URL>|--parked <S3URL>|--destination <S3URL>"),
        "{}",
        none.err
    );
    // A failure log that does not exist yet holds nothing; so does an empty bucket, in either form.
    let log = std::env::temp_dir().join(crate::support::moto::unique("no-failures-yet"));
    let empty = sidestream(&["failures", "list", "--log", log.to_str().unwrap()], "", &[]);
    assert!(empty.ok && empty.out.contains("nothing given up, nothing parked"), "{empty:?}");
}
