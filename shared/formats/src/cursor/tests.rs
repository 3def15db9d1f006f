//! Tests of the page cursor: its pinned format, round trips in both phases, and refusals.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::json;

use super::*;

const NOW: u64 = 1_800_000_000;

fn signer() -> Signer {
    Signer::new(b"test key", 3_600)
}

fn cursor() -> Cursor {
    Cursor {
        phase: Phase::Index,
        key: Some(json!({"pk": {"S": "35e9#3fe6"}, "sk": {"S": "nA42#nA3#saf34#"}})),
    }
}

#[test]
fn the_format_is_pinned() {
    // Golden: a change to the encoding must come with a new version tag.
    let fingerprint = fingerprint(&["35e9", "3fe6", "asc", ""]);
    assert_eq!(fingerprint.len(), 16);
    let text = signer().encode(&cursor(), &fingerprint, NOW);
    let (signed, tag) = text.rsplit_once('.').unwrap();
    let (version, payload) = signed.split_once('.').unwrap();
    assert_eq!(version, "g1");
    assert_eq!(B64.decode(tag).unwrap().len(), 16);
    let payload: serde_json::Value = serde_json::from_slice(&B64.decode(payload).unwrap()).unwrap();
    assert_eq!(payload, json!({"q": fingerprint, "p": "index", "k": cursor().key, "t": NOW}));
    assert_eq!(text, signer().encode(&cursor(), &fingerprint, NOW), "encoding is deterministic");
    // The vector in docs/formats.md.
    assert_eq!(fingerprint, "2ca137ecc6129738");
    assert_eq!(
        text,
        concat!(
            "g1.eyJrIjp7InBrIjp7IlMiOiIzNWU5IzNmZTYifSwic2siOnsiUyI6Im5BNDIjbkEzI3NhZjM0IyJ9fSwicCI6ImluZGV4",
            "IiwicSI6IjJjYTEzN2VjYzYxMjk3MzgiLCJ0IjoxODAwMDAwMDAwfQ.Li9g_3oSQ3lo3Y6hUzIu4w"
        )
    );
}

#[test]
fn cursors_round_trip_in_both_phases() {
    let nulls = Cursor { phase: Phase::Nulls, key: None };
    for cursor in [cursor(), nulls] {
        let text = signer().encode(&cursor, "f", NOW);
        assert_eq!(signer().decode(&text, "f", NOW + 10), Ok(cursor));
    }
}

#[test]
fn bad_cursors_are_refused_with_the_reason() {
    let good = signer().encode(&cursor(), "f", NOW);
    let (signed, tag) = good.rsplit_once('.').unwrap();
    let (_, payload) = signed.split_once('.').unwrap();
    // Another payload, signature kept: a forged position.
    let forged_payload = B64.encode(json!({"q": "f", "p": "nulls", "k": null, "t": NOW}).to_string());
    let mut flipped = B64.decode(tag).unwrap();
    flipped[0] ^= 1;
    let cases: Vec<(String, &str, u64, CursorError)> = vec![
        (format!("g1.{forged_payload}.{tag}"), "f", NOW, CursorError::Tampered),
        (format!("{signed}.{}", B64.encode(&flipped)), "f", NOW, CursorError::Tampered),
        (format!("{signed}.{}", B64.encode(&flipped[..4])), "f", NOW, CursorError::Tampered),
        (Signer::new(b"other key", 3_600).encode(&cursor(), "f", NOW), "f", NOW, CursorError::Tampered),
        (good.clone(), "g", NOW, CursorError::OtherQuery),
        (good.clone(), "f", NOW + 3_601, CursorError::Stale { age: 3_601, max: 3_600 }),
        (
            format!("g2.{payload}.{tag}"),
            "f",
            NOW,
            CursorError::Malformed("version \"g2\", expected g1".into()),
        ),
        ("nonsense".into(), "f", NOW, CursorError::Malformed("no signature".into())),
        ("g1.x.!!".into(), "f", NOW, CursorError::Malformed("the signature is not base64url".into())),
    ];
    for (text, fingerprint, now, expected) in cases {
        assert_eq!(signer().decode(&text, fingerprint, now), Err(expected.clone()), "{text}");
        assert!(!expected.to_string().is_empty());
    }
}

#[test]
fn fingerprints_separate_their_parts() {
    assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
    assert_eq!(fingerprint(&["a", "b"]), fingerprint(&["a", "b"]));
}
