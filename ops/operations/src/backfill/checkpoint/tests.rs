//! The checkpoint format, pinned.

use serde_json::json;

use super::{Checkpoint, Counts, Cursor};

/// The persisted format, byte for byte: a change here is a new format version.
#[test]
fn the_format_is_pinned() {
    let mut checkpoint = Checkpoint::new("issues", "bf-1800000000", &["custom_fields".to_owned()], 2);
    checkpoint.segments[0] = Cursor {
        segment: 0,
        next: Some(json!({"id": {"S": "af34"}})),
        done: false,
        counts: Counts {
            scanned: 500,
            touched: 480,
            already: 5,
            unindexed: 15,
            read_units: 62.5,
            write_units: 480.0,
            untouchable: 1,
        },
        untouchable: vec![json!({"id": {"S": "b1g"}})],
    };
    let text = serde_json::to_string(&checkpoint).unwrap();
    assert_eq!(
        text,
        r#"{"format":"sidestream-backfill/2","table":"issues","run_id":"bf-1800000000","sources":["custom_fields"],"total_segments":2,"segments":[{"segment":0,"next":{"id":{"S":"af34"}},"done":false,"counts":{"scanned":500,"touched":480,"already":5,"unindexed":15,"untouchable":1,"read_units":62.5,"write_units":480.0},"untouchable":[{"id":{"S":"b1g"}}]},{"segment":1,"next":null,"done":false,"counts":{"scanned":0,"touched":0,"already":0,"unindexed":0,"untouchable":0,"read_units":0.0,"write_units":0.0},"untouchable":[]}]}"#
    );
    assert_eq!(serde_json::from_str::<Checkpoint>(&text).unwrap(), checkpoint);
}

/// A version 1 file (before untouchable items were listed) still resumes: none are listed.
#[test]
fn a_version_1_checkpoint_is_read() {
    let dir = std::env::temp_dir().join(format!("backfill-checkpoint-v1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("v1.json");
    std::fs::write(
        &path,
        r#"{"format":"sidestream-backfill/1","table":"issues","run_id":"bf-1800000000","sources":["custom_fields"],"total_segments":1,"segments":[{"segment":0,"next":{"id":{"S":"af34"}},"done":false,"counts":{"scanned":500,"touched":480,"already":5,"unindexed":15,"read_units":62.5,"write_units":480.0}}]}"#,
    )
    .unwrap();
    let loaded = Checkpoint::load(&path).unwrap().unwrap();
    assert_eq!(
        (loaded.counts().touched, loaded.counts().untouchable, loaded.untouchable().len()),
        (480, 0, 0)
    );
    loaded.save(&path).unwrap();
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.starts_with(r#"{"format":"sidestream-backfill/2""#), "{saved}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn saved_and_loaded_whole_and_checked_against_the_run() {
    let dir = std::env::temp_dir().join(format!("backfill-checkpoint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.json");
    assert_eq!(Checkpoint::load(&path).unwrap(), None);
    let checkpoint = Checkpoint::new("issues", "bf-1", &["tags".to_owned()], 3);
    checkpoint.save(&path).unwrap();
    let loaded = Checkpoint::load(&path).unwrap().unwrap();
    assert_eq!(loaded, checkpoint);
    assert!(loaded.matches("issues", &["tags".to_owned()], 3).is_ok());
    let cases = [
        ("other", 3, "it is for table \"issues\", not \"other\""),
        ("issues", 4, "it splits the table into 3 segments, not 4 (pass --segments 3)"),
    ];
    for (table, segments, message) in cases {
        assert_eq!(loaded.matches(table, &["tags".to_owned()], segments), Err(message.to_owned()));
    }
    std::fs::write(&path, r#"{"format":"sidestream-backfill/9"}"#).unwrap();
    let error = Checkpoint::load(&path).unwrap_err().to_string();
    assert!(error.contains("missing field") || error.contains("format"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}
