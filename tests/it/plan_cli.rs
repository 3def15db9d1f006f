//! `sidestream plan ttl-archiver` and `plan counter-aggregator` end to end, as a process.

use serde_json::Value;

use crate::support::process::sidestream;

/// The summary lines, stderr, and whether some record was rejected or stopped planning (the
/// exit status says so).
fn plan(fixture: &str, out_dir: Option<&std::path::Path>) -> (Vec<Value>, String, bool) {
    let path = format!("{}/../events/ttl-archiver/{fixture}.json", env!("CARGO_MANIFEST_DIR"));
    let mut args = vec!["plan", "ttl-archiver", "--event", &path];
    let out = out_dir.map(|d| d.display().to_string());
    if let Some(out) = &out {
        args.extend(["--out", out]);
    }
    let ran = sidestream(&args, "", &[("ARCHIVE_PREFIX", "archive/"), ("ARCHIVE_GZIP_LEVEL", "6")]);
    let lines = ran.out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (lines, ran.err, !ran.ok)
}

#[test]
fn prints_one_summary_per_object_and_explains_the_rest() {
    let (lines, err, stopped) = plan("mixed", None);
    let summary: Vec<(String, u64, u64, u64, u64)> = lines
        .iter()
        .map(|l| {
            let n = |k: &str| l[k].as_u64().unwrap();
            (
                l["key"].as_str().unwrap().to_owned(),
                n("records"),
                n("items"),
                n("firstRecord"),
                n("lastRecord"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("archive/table=issues/year=2026/month=11/day=20/0000000000000000000400000000000000000011-0000000000000000000400000000000000000016-e0011.json.gz".to_owned(), 2, 2, 1, 6),
            ("archive/table=issues/year=2026/month=11/day=21/0000000000000000000400000000000000000017-0000000000000000000400000000000000000017-e0017.json.gz".to_owned(), 1, 1, 7, 7),
        ]
    );
    assert!(
        lines.iter().all(|l| l["bytes"].as_u64().unwrap() > 20
            && l["metaKey"].as_str().unwrap().starts_with("archive/_meta/"))
    );
    assert_eq!(err.lines().count(), 5, "{err}");
    assert!(err.contains("sidestream: record 3 not archived: REMOVE made by a user or application (no userIdentity), not by TTL"));
    assert!(!stopped);

    // The malformed record is rejected (the Lambda parks it); planning goes on past it.
    let (lines, err, rejected) = plan("poison", None);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["records"], 2);
    assert!(rejected);
    assert!(err.contains("record 1 (SequenceNumber \"400000000000000000041\") can never succeed"), "{err}");
}

#[test]
fn out_writes_the_objects_that_would_be_uploaded() {
    let dir = std::env::temp_dir().join(format!("sidestream-plan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (lines, err, _) = plan("keys-only", Some(&dir));
    assert_eq!(lines[0]["key"], Value::Null, "a keys-only run has no item object");
    assert!(err.contains("record 1 has no OldImage: only its keys are archived (keysOnly)"), "{err}");
    let meta = dir.join(lines[0]["metaKey"].as_str().unwrap());
    let mut cat = Vec::new();
    assert_eq!(operations::archive::cat(&std::fs::read(&meta).unwrap(), &mut cat, false).unwrap(), 2);
    assert!(String::from_utf8(cat).unwrap().contains(r#""keys":{"id":"b002"},"keysOnly":true"#));
    let files = walk(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn counter_aggregator_prints_one_update_per_counter() {
    let path = format!("{}/../events/counter-aggregator/foreign.json", env!("CARGO_MANIFEST_DIR"));
    let ran = sidestream(&["plan", "counter-aggregator", "--event", &path], "", &[]);
    assert!(ran.ok, "{}", ran.err);
    let line: Value = serde_json::from_str(&ran.out).unwrap();
    assert_eq!(
        line,
        serde_json::json!({"counter": "votes/carol", "totalKey": "COUNTER#votes/carol#TOTAL", "firstRecord": 2,
                           "shards": {"0": {"value": "2", "sequenceNumber": "500000000000000000018"}}})
    );
    assert_eq!(
        ran.err,
        "sidestream: record 0 skipped: key ISSUE#af34 is not a counter shard (COUNTER#<name>#SHARD#<k>)\n\
         sidestream: record 1 skipped: the total item of counter \"votes/alice\"\n"
    );
}
