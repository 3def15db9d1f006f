//! Properties over generated values: order, round trip, prefix, ranges, and decoding of
//! arbitrary input.

use std::cmp::Ordering;
use std::ops::Bound;

use proptest::prelude::*;

use super::{binary_of, text_of};
use crate::{
    BinaryKey, Date, DateTime, Dir, Number, TextKey, Value, binary, text, truncate_for_text, tuple_cmp,
};

/// Numbers spread over DynamoDB's whole range, with small integers and short decimals favoured.
fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i64>().prop_map(Number::from),
        (-1000i64..1000).prop_map(Number::from),
        (any::<bool>(), proptest::collection::vec(0u8..10, 1..=38), -130i64..=125).prop_map(
            |(negative, digits, exponent)| {
                // d.ddd…E±x with a non-zero first digit: exactly the scientific exponent drawn.
                let first = char::from(b'0' + digits[0].max(1));
                let rest: String = digits[1..].iter().map(|d| char::from(b'0' + d)).collect();
                let sign = if negative { "-" } else { "" };
                Number::parse(&format!("{sign}{first}.{rest}E{exponent}")).unwrap()
            }
        ),
    ]
}

/// Strings rich in the characters that need escaping, plus arbitrary Unicode.
fn string() -> impl Strategy<Value = String> {
    prop_oneof!["[\\x00-\\x26a-b\u{FFFF}\u{1F600}]{0,6}", any::<String>(), "[a-z ]{0,12}",]
}

fn date() -> impl Strategy<Value = Date> {
    (0i32..3_652_059).prop_map(|d| Date::from_days_since_epoch(d - 719_528).unwrap())
}

fn datetime() -> impl Strategy<Value = DateTime> {
    (date(), 0u64..86_400_000_000_000, prop_oneof![Just(0u64), Just(1_000_000_000), Just(1)]).prop_map(
        |(d, nanos, round)| {
            let nanos = if round > 1 { nanos / round * round } else { nanos };
            DateTime::from_parts(d, nanos).unwrap()
        },
    )
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        string().prop_map(Value::String),
        proptest::collection::vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], 0..6)
            .prop_map(Value::Binary),
        date().prop_map(Value::Date),
        datetime().prop_map(Value::DateTime),
    ]
}

/// Finite floats within DynamoDB's range, both zeros included.
fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        -1000.0..1000.0f64,
        (any::<bool>(), 1.0..10.0f64, -129i32..125).prop_map(|(negative, m, e)| {
            let x = m * 10f64.powi(e);
            if negative { -x } else { x }
        }),
    ]
}

fn dir() -> impl Strategy<Value = Dir> {
    prop_oneof![Just(Dir::Asc), Just(Dir::Desc)]
}

/// Two tuples sharing one schema of directions; the second often shares a prefix with the first,
/// so ties on leading components are exercised.
type Tuple = Vec<(Value, Dir)>;

fn tuple_pair() -> impl Strategy<Value = (Tuple, Tuple)> {
    proptest::collection::vec(dir(), 1..4).prop_flat_map(|dirs| {
        let n = dirs.len();
        (
            proptest::collection::vec(value(), n),
            proptest::collection::vec(value(), n),
            0..=n,
            0..=n,
            Just(dirs),
        )
            .prop_map(|(a, b, shared, b_len, dirs)| {
                let a: Tuple = a.into_iter().zip(dirs.iter().copied()).collect();
                let mut b: Tuple = b.into_iter().zip(dirs.iter().copied()).collect();
                b[..shared].clone_from_slice(&a[..shared]);
                b.truncate(b_len.max(1));
                (a, b)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn encodings_sort_like_tuples((a, b) in tuple_pair()) {
        let expected = tuple_cmp(&a, &b);
        prop_assert_eq!(text_of(&a).cmp(&text_of(&b)), expected, "text: {:?} vs {:?}", a, b);
        prop_assert_eq!(binary_of(&a).cmp(&binary_of(&b)), expected, "binary: {:?} vs {:?}", a, b);
    }

    #[test]
    fn encodings_round_trip((a, _) in tuple_pair()) {
        prop_assert_eq!(text::decode(&text_of(&a)).unwrap(), a.clone());
        prop_assert_eq!(binary::decode(&binary_of(&a)).unwrap(), a);
    }

    #[test]
    fn a_tuple_prefix_is_a_key_prefix((a, _) in tuple_pair(), k in 0usize..4) {
        let k = k.min(a.len());
        prop_assert!(text_of(&a).starts_with(&text_of(&a[..k])));
        prop_assert!(binary_of(&a).starts_with(&binary_of(&a[..k])));
    }

    #[test]
    fn ranges_select_exactly_the_values_between_their_bounds(
        prefix in value(), v in value(), lo in value(), hi in value(), tail in value(),
        dir in dir(), lo_kind in 0u8..3, hi_kind in 0u8..3,
    ) {
        let bound = |kind: u8, x: &Value| match kind {
            0 => Bound::Included(x.clone()),
            1 => Bound::Excluded(x.clone()),
            _ => Bound::Unbounded,
        };
        let (lower, upper) = (bound(lo_kind, &lo), bound(hi_kind, &hi));
        let inside = (lower.as_ref(), upper.as_ref());
        let expected = std::ops::RangeBounds::contains(&inside, &v);
        for with_tail in [false, true] {
            let mut tuple = vec![(prefix.clone(), Dir::Asc), (v.clone(), dir)];
            if with_tail {
                tuple.push((tail.clone(), Dir::Asc));
            }
            let mut text_prefix = TextKey::new();
            text_prefix.push(&prefix, Dir::Asc);
            let r = text_prefix.range(lower.as_ref(), upper.as_ref(), dir);
            let key = text_of(&tuple);
            prop_assert_eq!(r.start <= key && key <= r.end, expected, "text {:?} in {:?}", key, r);
            let mut binary_prefix = BinaryKey::new();
            binary_prefix.push(&prefix, Dir::Asc);
            let r = binary_prefix.range(lower.as_ref(), upper.as_ref(), dir);
            let key = binary_of(&tuple);
            prop_assert_eq!(r.start <= key && key <= r.end, expected, "binary {:?} in {:?}", key, r);
        }
    }

    #[test]
    fn number_order_is_exact_decimal_order(a in float(), b in float()) {
        // The shortest round-trip decimal of each f64 keeps the f64s' order, an oracle that does
        // not share code with Number's comparison.
        let (na, nb) = (Number::try_from(a).unwrap(), Number::try_from(b).unwrap());
        prop_assert_eq!(Some(na.cmp(&nb)), a.partial_cmp(&b));
        let (ka, kb) = (text_of(&[(Value::Number(na), Dir::Asc)]), text_of(&[(Value::Number(nb), Dir::Asc)]));
        prop_assert_eq!(Some(ka.cmp(&kb)), a.partial_cmp(&b));
    }

    #[test]
    fn integer_order(a in any::<i64>(), b in any::<i64>(), scale in -20i32..20) {
        let scaled = |x: i64| Number::parse(&format!("{x}E{scale}")).unwrap();
        prop_assert_eq!(scaled(a).cmp(&scaled(b)), a.cmp(&b));
        prop_assert_eq!(Number::parse(&scaled(a).to_string()).unwrap(), scaled(a));
    }

    #[test]
    fn datetime_order_matches_unix_time(a in datetime(), b in datetime()) {
        let unix = |t: DateTime| (t.unix_seconds(), t.subsec_nanos());
        prop_assert_eq!(a.cmp(&b), unix(a).cmp(&unix(b)));
        prop_assert_eq!(DateTime::from_unix(a.unix_seconds(), a.subsec_nanos()), Some(a));
        prop_assert_eq!(DateTime::parse(&a.to_string()).unwrap(), a);
    }

    #[test]
    fn decoding_arbitrary_text_never_panics_and_accepts_only_canonical_keys(
        key in prop_oneof!["[%bdfnstMHWYUG~#$0-9A-Z@\\[.:T\\- a-f?_]{0,24}", any::<String>()]
    ) {
        if let Ok(tuple) = text::decode(&key) {
            prop_assert_eq!(text_of(&tuple), key);
        }
    }

    #[test]
    fn typed_reads_agree_with_the_generic_decoder(
        a in string(), n in prop_oneof![any::<i64>(), -1000i64..1000], b in string(),
        dirs in (dir(), dir(), dir()),
    ) {
        let tuple = [
            (Value::String(a.clone()), dirs.0),
            (Value::from(n), dirs.1),
            (Value::String(b.clone()), dirs.2),
        ];
        let key = text_of(&tuple);
        let mut typed = text::Decoder::new(&key);
        prop_assert_eq!(typed.string(), Ok((a, dirs.0)));
        prop_assert_eq!(typed.integer(), Ok((n, dirs.1)));
        prop_assert_eq!(typed.string(), Ok((b, dirs.2)));
        prop_assert!(typed.next().is_none());
    }

    #[test]
    fn typed_reads_of_arbitrary_text_accept_what_the_generic_decoder_reads_as_their_type(
        key in prop_oneof!["[sSnNmM0-9A-Z@\\[.~#$a-f?_-]{0,24}", any::<String>()]
    ) {
        let generic: Vec<_> = text::Decoder::new(&key).take(3).collect();
        let mut typed = text::Decoder::new(&key);
        // A typed read that fails (another type, or no key) fuses the decoder: every read after
        // it fails too, whatever the generic decoder reads there.
        let mut fused = false;
        for (i, expected) in generic.into_iter().enumerate() {
            let (read_ok, agrees) = if i == 1 {
                let read = typed.integer();
                let want = expected.ok().and_then(|(v, dir)| match v {
                    Value::Number(n) => n.to_i64().map(|n| (n, dir)),
                    _ => None,
                });
                (read.is_ok(), read.as_ref().ok().copied() == want)
            } else {
                let read = typed.string();
                let want = expected.ok().and_then(|(v, dir)| match v {
                    Value::String(s) => Some((s, dir)),
                    _ => None,
                });
                (read.is_ok(), read.as_ref().ok().cloned() == want)
            };
            if fused {
                prop_assert!(!read_ok, "component {} of {:?} read after a failed one", i, key);
            } else {
                prop_assert!(agrees, "component {} of {:?}", i, key);
            }
            fused |= !read_ok;
        }
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics_and_accepts_only_canonical_keys(
        key in proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1), Just(0xff), Just(0x42), Just(0x50), Just(0x20), any::<u8>()],
            0..24,
        )
    ) {
        if let Ok(tuple) = binary::decode(&key) {
            prop_assert_eq!(binary_of(&tuple), key);
        }
    }

    #[test]
    fn truncation_fits_the_budget_and_keeps_a_prefix(value in string(), dir in dir(), budget in 0usize..40) {
        let kept = truncate_for_text(&value, dir, budget);
        prop_assert!(value.starts_with(kept));
        let mut key = TextKey::new();
        key.push_str(kept, dir);
        let overhead = if dir == Dir::Asc { 2 } else { 3 };
        prop_assert!(key.len() <= budget.max(overhead));
        if kept.len() < value.len() {
            let next = value[kept.len()..].chars().next().unwrap();
            let mut longer = TextKey::new();
            longer.push_str(&value[..kept.len() + next.len_utf8()], dir);
            prop_assert!(longer.len() > budget, "one more character would still have fit");
        }
    }
}

#[test]
fn tuple_cmp_is_lexicographic_with_directions() {
    let a = [(Value::from(1), Dir::Asc), (Value::from(2), Dir::Desc)];
    let b = [(Value::from(1), Dir::Asc), (Value::from(3), Dir::Desc)];
    assert_eq!(tuple_cmp(&a, &b), Ordering::Greater);
    assert_eq!(tuple_cmp(&a[..1], &a), Ordering::Less);
}
