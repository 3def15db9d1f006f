//! Edge cases: limits, the escaped character range, number canonicalisation and rejection,
//! truncation, hierarchical keys, sequence numbers, and malformed input.

use super::{binary_of, n, s, text_of};
use crate::Dir::{Asc, Desc};
use crate::{
    BinaryKey, Error, HierKey, KeyKind, Number, NumberError, SequenceNumber, TextKey, Value, binary, hier,
    text, truncate_for_binary, truncate_for_text,
};

#[test]
fn equal_numbers_encode_identically() {
    for spelling in ["1.5", "1.50", "15E-1", "0.15e1", "+1.5", "001.500", "150e-2"] {
        assert_eq!(Number::parse(spelling).unwrap(), Number::parse("1.5").unwrap(), "{spelling}");
        assert_eq!(text_of(&[(n(spelling), Asc)]), "nA1.5#", "{spelling}");
    }
    for zero in ["0", "-0", "0.000", "-0E5", "+0e-999", ".0", "0."] {
        assert_eq!(text_of(&[(n(zero), Asc)]), "n0#", "{zero}");
        assert_eq!(binary_of(&[(n(zero), Desc)]), [0xbe], "{zero}");
    }
}

#[test]
fn numbers_outside_dynamodb_are_rejected_with_the_reason() {
    let cases: &[(&str, NumberError, &str)] = &[
        ("NaN", NumberError::NotFinite, "NaN and Infinity are not DynamoDB numbers"),
        ("-Infinity", NumberError::NotFinite, "NaN and Infinity"),
        ("inf", NumberError::NotFinite, "NaN and Infinity"),
        (
            "123456789012345678901234567890123456789",
            NumberError::TooManyDigits { digits: 39 },
            "39 significant digits; DynamoDB allows at most 38",
        ),
        ("1E-131", NumberError::TooSmall, "below 1E-130"),
        ("0.99E-130", NumberError::TooSmall, "below 1E-130"),
        ("1E126", NumberError::TooLarge, "above 9.9999999999999999999999999999999999999E+125"),
        ("-1E126", NumberError::TooLarge, "above"),
        ("1E99999999999999999999", NumberError::TooLarge, "above"),
        ("", NumberError::Syntax, "not a decimal number"),
        ("1.2.3", NumberError::Syntax, "not a decimal number"),
        ("1e", NumberError::Syntax, "not a decimal number"),
        (" 1", NumberError::Syntax, "not a decimal number"),
        ("0x10", NumberError::Syntax, "not a decimal number"),
    ];
    for (input, reason, message) in cases {
        let err = Number::parse(input).unwrap_err();
        assert_eq!(err, Error::Number { input: (*input).to_owned(), reason: *reason });
        let shown = err.to_string();
        assert!(shown.contains(message) && shown.contains(&format!("{input:?}")), "{shown}");
    }
    // The largest and smallest accepted values sit right at the limits.
    assert!(Number::parse("9.9999999999999999999999999999999999999E+125").is_ok());
    assert!(Number::parse("1E-130").is_ok());
    assert!(Number::parse("1.0000000000000000000000000000000000001E-130").is_ok());
    assert!(Number::parse("12345678901234567890123456789012345678000000").is_ok());
}

#[test]
fn display_parses_back() {
    for text in
        ["0", "7", "-42.5", "0.0000001", "1E-130", "1.5E+40", "123456789012345678901234567890123456.78"]
    {
        let number = Number::parse(text).unwrap();
        assert_eq!(Number::parse(&number.to_string()).unwrap(), number, "{text} shown as {number}");
    }
    assert_eq!(Number::parse("15E-1").unwrap().to_string(), "1.5");
    assert_eq!(Number::parse("1E+125").unwrap().to_string(), "1E+125");
    assert_eq!(Number::try_from(0.1).unwrap().to_string(), "0.1");
    assert_eq!(Number::try_from(-0.0).unwrap(), Number::ZERO);
    assert!(Number::try_from(f64::NAN).is_err());
}

#[test]
fn every_escaped_character_round_trips_and_sorts_by_code_point() {
    let strings: Vec<String> = (0u32..=0x25).map(|c| format!("a{}b", char::from_u32(c).unwrap())).collect();
    for dir in [Asc, Desc] {
        let mut previous: Option<(String, Vec<u8>)> = None;
        for string in &strings {
            let tuple = [(s(string), dir), (s("tail"), Asc)];
            let (t, b) = (text_of(&tuple), binary_of(&tuple));
            assert!(!t.contains('\0'), "the text form never contains U+0000: {t:?}");
            assert_eq!(text::decode(&t).unwrap(), tuple);
            assert_eq!(binary::decode(&b).unwrap(), tuple);
            // "a" is a prefix of every one of these: it sorts first ascending, last descending.
            let shorter = [(s("a"), dir), (s("tail"), Asc)];
            assert_eq!(text_of(&shorter) < t, dir == Asc, "{string:?} vs \"a\"");
            assert_eq!(binary_of(&shorter) < b, dir == Asc, "{string:?} vs \"a\"");
            if let Some((pt, pb)) = previous {
                assert_eq!(pt < t, dir == Asc, "{string:?}");
                assert_eq!(pb < b, dir == Asc, "{string:?}");
            }
            previous = Some((t, b));
        }
    }
}

#[test]
fn utf8_order_not_utf16_order() {
    // In UTF-16, U+1F600 (D83D DE00) sorts before U+FFFF; DynamoDB compares UTF-8 bytes.
    for dir in [Asc, Desc] {
        let high_bmp = [(s("\u{FFFF}"), dir)];
        let emoji = [(s("\u{1F600}"), dir)];
        assert_eq!(text_of(&high_bmp) < text_of(&emoji), dir == Asc);
        assert_eq!(binary_of(&high_bmp) < binary_of(&emoji), dir == Asc);
    }
}

#[test]
fn sort_key_limit_with_a_multibyte_character_at_the_edge() {
    // "s" + 1019 ASCII + "€" (3 bytes) + "#" = 1024 bytes; one more ASCII byte makes 1025.
    let fits = format!("{}€", "x".repeat(1019));
    let mut key = TextKey::new();
    key.push_str(&fits, Asc);
    assert_eq!(key.len(), 1024);
    assert!(key.finish(KeyKind::Sort).is_ok());

    let over = format!("{}€", "x".repeat(1020));
    let mut key = TextKey::new();
    key.push_str(&over, Asc);
    let err = key.clone().finish(KeyKind::Sort).unwrap_err();
    assert_eq!(err, Error::TooLong { kind: KeyKind::Sort, actual: 1025 });
    assert_eq!(err.to_string(), "sort key is 1025 bytes; DynamoDB allows at most 1024 bytes");
    assert!(key.finish(KeyKind::Partition).is_ok(), "a partition key may be 2048 bytes");

    // Truncating to the budget cuts before the euro sign, never inside it.
    let kept = truncate_for_text(&over, Asc, 1024);
    assert_eq!(kept, "x".repeat(1020));
    let kept = truncate_for_text(&fits, Asc, 1023);
    assert_eq!(kept, "x".repeat(1019), "the 3-byte character no longer fits whole");

    let mut binary = BinaryKey::new();
    binary.push_str(&"y".repeat(2046), Asc);
    assert_eq!(
        binary.finish(KeyKind::Partition).unwrap_err().to_string(),
        "partition key is 2049 bytes; DynamoDB allows at most 2048 bytes"
    );
    assert_eq!(TextKey::new().finish(KeyKind::Sort).unwrap_err(), Error::Empty { kind: KeyKind::Sort });
}

#[test]
fn truncation_never_splits_an_escape() {
    // Each space costs two bytes ("$_"); an odd budget cannot end half-way through one.
    let value = " ".repeat(100);
    for budget in 0..40 {
        let kept = truncate_for_text(&value, Asc, budget);
        let mut key = TextKey::new();
        key.push_str(kept, Asc);
        assert!(key.len() <= budget.max(2), "budget {budget}: {}", key.as_str());
        assert!(key.len() + 2 > budget || kept.len() == value.len(), "budget {budget} left room");
        assert_eq!(text::decode(key.as_str()).unwrap(), [(s(kept), Asc)]);
    }
    // Descending, each UTF-8 byte costs two hex digits: "ab€" is 5 bytes, so 3 + 10 in all.
    assert_eq!(truncate_for_text("ab€", Desc, 13), "ab€");
    assert_eq!(truncate_for_text("ab€", Desc, 12), "ab");
    assert_eq!(truncate_for_binary("a\0b", 3 + 3), "a\0");
    assert_eq!(truncate_for_binary("a\0b", 3 + 2), "a");
}

#[test]
fn hierarchical_keys() {
    let key = HierKey::new("PROJECT").push("35e9");
    assert_eq!(key.as_str(), "PROJECT#35e9");
    assert_eq!(key.children_prefix(), "PROJECT#35e9#");
    let tricky = HierKey::new("TAG").push("C#").push("100%").push("");
    assert_eq!(tricky.as_str(), "TAG#C%23#100%25#");
    assert_eq!(hier::split(tricky.as_str()).unwrap(), ["TAG", "C#", "100%", ""]);
    assert_eq!(hier::split("ACCOUNT#12345#ON").unwrap(), ["ACCOUNT", "12345", "ON"]);
    let err = hier::split("A#50%off").unwrap_err();
    assert!(err.to_string().contains("'%' must start %23"), "{err}");
    assert!(HierKey::new(&"k".repeat(2049)).finish(KeyKind::Partition).is_err());
}

#[test]
fn sequence_numbers() {
    let forty = "1".repeat(40);
    let cases = ["0", "9", "10", "1100000000017454423009", "49668787239117329658472548706838958090", &forty];
    let parsed: Vec<SequenceNumber> = cases.iter().map(|c| c.parse().unwrap()).collect();
    for pair in parsed.windows(2) {
        assert!(pair[0] < pair[1]);
        assert!(pair[0].to_fixed_width() < pair[1].to_fixed_width());
    }
    for p in &parsed {
        assert_eq!(p.to_fixed_width().len(), 40);
        assert_eq!(&SequenceNumber::from_fixed_width(&p.to_fixed_width()).unwrap(), p);
    }
    assert_eq!(SequenceNumber::parse("007").unwrap().as_str(), "7");
    for bad in ["", "12a", "-1", &"1".repeat(41)] {
        let err = SequenceNumber::parse(bad).unwrap_err();
        assert!(err.to_string().starts_with("invalid stream sequence number"), "{err}");
    }
    assert!(SequenceNumber::from_fixed_width("123").is_err());
}

/// Plain positive integers take a one-step path in the text decoder; it must agree with the
/// general one (trailing zeros into the exponent, 25 digits the widest narrow class).
#[test]
fn plain_integers_decode_to_the_parsed_number() {
    let cases = [
        ("nA7#", "7"),
        ("nB10#", "10"),
        ("nC100#", "100"),
        ("nC120#", "120"),
        ("nE10203#", "10203"),
        ("nY1000000000000000000000000#", "1E24"),
        ("nY1234567890123456789012345#", "1234567890123456789012345"),
        ("nB12.5#", "12.5"), // a fraction: the general path
    ];
    for (key, number) in cases {
        let want = Value::Number(Number::parse(number).unwrap());
        assert_eq!(text::decode(key).unwrap(), vec![(want, Asc)], "{key}");
    }
}

#[test]
fn malformed_text_keys_are_errors_naming_the_offset() {
    let cases: &[(&str, usize)] = &[
        ("sOpen", 5),        // no terminator
        ("x#", 0),           // unknown tag
        ("sa b#", 2),        // unescaped space
        ("s$z#", 2),         // escape out of range
        ("nB4#", 3),         // fewer digits than the class says
        ("nB042#", 2),       // integer part starts with zero
        ("nA1.50#", 5),      // fraction ends in zero
        ("nZ010#", 1),       // wide class below 26
        ("n-Z8#", 4),        // negative without '~'
        ("d2024-02-30#", 1), // no such day
        ("d2024-05-01T12:34:56.50#", 1),
        ("H9e#", 3),  // descending string without '~'
        ("H00~#", 1), // complemented bytes (FF) are not UTF-8
        ("b0#", 1),   // odd hex
    ];
    for (key, offset) in cases {
        match text::decode(key) {
            Err(Error::Malformed { format: "K1 text", offset: at, .. }) => assert_eq!(at, *offset, "{key}"),
            other => panic!("{key}: expected a malformed-key error, got {other:?}"),
        }
    }
}

#[test]
fn malformed_binary_keys_are_errors() {
    for key in [
        &[0x50, 0x61][..],         // unterminated string
        &[0x50, 0x00, 0x02],       // bad escape
        &[0x42, 0x83],             // number without digits
        &[0x42, 0x83, 0x55],       // number without a last pair
        &[0x42, 0x83, 0x00],       // last pair zero
        &[0x42, 0x83, 0xff],       // digit pair above 99
        &[0x20, 0x80, 0x00, 0x4d], // short date
        &[0x20, 0x80, 0x00, 0x4d, 0x84, 0x07],
        &[0x77], // unknown tag
        &[0x00],
    ] {
        assert!(matches!(binary::decode(key), Err(Error::Malformed { format: "B1 binary", .. })), "{key:x?}");
    }
}

#[test]
fn value_order_across_types_matches_the_tag_letters() {
    let ordered = [
        Value::Null,
        Value::Binary(vec![0xff]),
        super::date("2024-01-01"),
        super::datetime("2024-01-01T00:00:00Z"),
        Value::Bool(false),
        n("-5"),
        n("5"),
        s(""),
        Value::Bool(true),
    ];
    for pair in ordered.windows(2) {
        assert!(pair[0] < pair[1], "{:?} < {:?}", pair[0], pair[1]);
        assert!(text_of(&[(pair[0].clone(), Asc)]) < text_of(&[(pair[1].clone(), Asc)]));
        assert!(binary_of(&[(pair[0].clone(), Asc)]) < binary_of(&[(pair[1].clone(), Asc)]));
    }
}

#[test]
fn typed_reads_take_their_type_or_say_what_they_found() {
    let max = text_of(&[(Value::from(i64::MAX), Asc)]);
    let min = text_of(&[(Value::from(i64::MIN), Desc)]);
    let cases: &[(&str, &[&str], Result<(), &str>)] = &[
        ("sOpen#nB42#sSRC-1#", &["s", "i", "s"], Ok(())),
        ("n0#", &["i"], Ok(())),
        (&max, &["i"], Ok(())),
        (&min, &["i"], Ok(())),
        // One past i64::MAX: a number, not an i64.
        ("nS9223372036854775808#", &["i"], Err("not an integer within i64")),
        ("nA1.5#", &["i"], Err("not an integer within i64")),
        ("nB42#", &["s"], Err("expected a string component")),
        ("sOpen#", &["i"], Err("expected a number component")),
        ("sOpen#", &["s", "s"], Err("expected a string component")),
        // Non-canonical: a leading zero goes to the general path, which refuses it.
        ("nB04#", &["i"], Err("integer part starts with a zero")),
        ("sOp", &["s"], Err("expected '#' ending the component")),
    ];
    for (key, reads, expected) in cases {
        let mut typed = text::Decoder::new(key);
        let mut generic = text::Decoder::new(key);
        let mut outcome = Ok(());
        for read in *reads {
            let got = if *read == "s" {
                typed.string().map(|(s, d)| (Value::String(s), d))
            } else {
                typed.integer().map(|(n, d)| (Value::from(n), d))
            };
            match got {
                Ok(component) => assert_eq!(Some(Ok(component)), generic.next(), "{key}"),
                Err(e) => {
                    outcome = Err(e.to_string());
                    break;
                }
            }
        }
        match (expected, outcome) {
            (Ok(()), Ok(())) => {}
            (Err(says), Err(error)) => assert!(error.contains(says), "{key}: {error}"),
            (expected, outcome) => panic!("{key}: expected {expected:?}, got {outcome:?}"),
        }
    }
    // After an error the decoder reads nothing more.
    let mut typed = text::Decoder::new("nB42#sOpen#");
    assert!(typed.string().is_err());
    assert!(typed.integer().is_err() && typed.next().is_none());
}
