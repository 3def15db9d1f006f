//! Golden vectors: the frozen K1 and B1 formats, each vector checked in both directions.

use super::{check, date, datetime, n, s};
use crate::Dir::{Asc, Desc};
use crate::Value;

fn one(v: Value) -> [(Value, crate::Dir); 1] {
    [(v, Asc)]
}

fn one_desc(v: Value) -> [(Value, crate::Dir); 1] {
    [(v, Desc)]
}

#[test]
fn numbers() {
    check(&one(n("0")), "n0#", "41");
    check(&one(n("7")), "nA7#", "42 82 8c");
    check(&one(n("42")), "nB42#", "42 83 54");
    check(&one(n("42.5")), "nB42.5#", "42 83 55 64");
    check(&one(n("420")), "nC420#", "42 84 54");
    check(&one(n("2024")), "nD2024#", "42 85 29 30");
    check(&one(n("0.5")), "n@.5#", "42 81 64");
    check(&one(n("0.05")), "n@.05#", "42 80 64");
    check(&one(n("-1")), "n-Z8~#", "40 7d eb");
    check(&one(n("-42")), "n-Y57~#", "40 7c ab");
    check(&one(n("-42.5")), "n-Y57.4~#", "40 7c aa 9b");
    check(&one(n("-0.5")), "n-[.4~#", "40 7e 9b");
    check(&one(n("9.99E24")), "nY9990000000000000000000000#", "42 9a c7 b4");
    check(&one(n("1E25")), "nZ02610000000000000000000000000#", "42 9b 14");
    check(
        &one(n("12345678901234567890123456789012345678")),
        "nZ03812345678901234567890123456789012345678#",
        "42 a7 19 45 71 9d b5 19 45 71 9d b5 19 45 71 9d b5 19 45 71 9c",
    );
}

#[test]
fn numbers_at_the_ends_of_dynamodbs_range() {
    let tiny = format!("n@.{}1#", "0".repeat(129));
    check(&one(n("1E-130")), &tiny, "42 00 14");
    let neg_tiny = format!("n-[.{}8~#", "9".repeat(129));
    check(&one(n("-1E-130")), &neg_tiny, "40 ff eb");
    let max = "9.9999999999999999999999999999999999999E+125";
    check(&one(n(max)), &format!("nZ126{}{}#", "9".repeat(38), "0".repeat(88)), "42 ff c7 x18 c6");
    check(
        &one(n(&format!("-{max}"))),
        &format!("n-A873{}{}~#", "0".repeat(38), "9".repeat(88)),
        "40 00 38 x18 39",
    );
}

#[test]
fn descending_numbers() {
    check(&one_desc(n("42")), "M-Y57~#", "bd 7c ab");
    check(&one_desc(n("-42")), "MB42#", "bf 83 54");
    check(&one_desc(n("0")), "M0#", "be");
}

#[test]
fn strings() {
    check(&one(s("")), "s#", "50 00 01");
    check(&one(s("a b")), "sa$_b#", "50 61 20 62 00 01");
    check(&one(s("a#b")), "sa$bb#", "50 61 23 62 00 01");
    check(&one(s("a$")), "sa$c#", "50 61 24 00 01");
    check(&one(s("a%")), "sa%#", "50 61 25 00 01");
    check(&one(s("\0")), "s$?#", "50 00 ff 00 01");
    check(&one(s("\u{FFFF}")), "s\u{FFFF}#", "50 ef bf bf 00 01");
    check(&one(s("😀")), "s😀#", "50 f0 9f 98 80 00 01");
    check(&one(s("Über")), "sÜber#", "50 c3 9c 62 65 72 00 01");
}

#[test]
fn descending_strings() {
    check(&one_desc(s("a")), "H9e~#", "af 9e ff fe");
    check(&one_desc(s("ab")), "H9e9d~#", "af 9e 9d ff fe");
    check(&one_desc(s("")), "H~#", "af ff fe");
}

#[test]
fn dates_and_datetimes() {
    check(&one(date("2024-05-01")), "d2024-05-01#", "20 80 00 4d 84 00");
    check(&one(date("0999-01-02")), "d0999-01-02#", "20 7f fa 96 a7 00");
    check(&one(date("0000-01-01")), "d0000-01-01#", "20 7f f5 05 58 00");
    check(
        &one(datetime("2024-05-01T12:34:56Z")),
        "d2024-05-01T12:34:56#",
        "20 80 00 4d 84 01 29 32 4b fd 60 00",
    );
    check(
        &one(datetime("2024-05-01T12:34:56.500Z")),
        "d2024-05-01T12:34:56.5#",
        "20 80 00 4d 84 01 29 32 69 ca c5 00",
    );
    check(
        &one_desc(datetime("2024-05-01T12:34:56Z")),
        "W7975-94-98T87:65:43~#",
        "df 7f ff b2 7b fe d6 cd b4 02 9f ff",
    );
}

#[test]
fn booleans_null_and_bytes() {
    let ascending = [(Value::Bool(true), Asc), (Value::Bool(false), Asc), (Value::Null, Asc)];
    check(&ascending, "t#f#%#", "60 30 01");
    let descending = [(Value::Bool(true), Desc), (Value::Bool(false), Desc), (Value::Null, Desc)];
    check(&descending, "G#U#~#", "9f cf fe");
    check(&one(Value::Binary(vec![0x00, 0xff])), "b00ff#", "10 00 ff ff 00 01");
    check(&one_desc(Value::Binary(vec![0x00, 0xff])), "Yff00~#", "ef ff 00 00 ff fe");
}

#[test]
fn tuples() {
    check(
        &[(s("Open"), Asc), (n("42"), Asc), (s("SRC-1"), Asc)],
        "sOpen#nB42#sSRC-1#",
        "50 4f 70 65 6e 00 01 42 83 54 50 53 52 43 2d 31 00 01",
    );
    check(
        &[(s("Open"), Asc), (Value::Null, Asc), (s("x"), Asc)],
        "sOpen#%#sx#",
        "50 4f 70 65 6e 00 01 01 50 78 00 01",
    );
    check(&[(s("Open#1"), Asc), (n("7"), Desc)], "sOpen$b1#M-Z2~#", "50 4f 70 65 6e 23 31 00 01 bd 7d 73");
}
