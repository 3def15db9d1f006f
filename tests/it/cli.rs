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
