//! `sidestream key encode`/`decode` end to end, as a process.

use crate::support::process::sidestream;

/// The flags of one run.
#[derive(Debug, Clone, Default)]
struct KeyOptions {
    binary: bool,
    desc: Option<Vec<usize>>,
}

/// Lines read and lines that could not be converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Summary {
    lines: usize,
    errors: usize,
}

fn run(encode: bool, input: &str, options: &KeyOptions) -> (String, Summary) {
    let desc = options.desc.as_ref().map(|d| d.iter().map(ToString::to_string).collect::<Vec<_>>().join(","));
    let mut args = vec!["key", if encode { "encode" } else { "decode" }];
    if options.binary {
        args.push("--binary");
    }
    if let Some(desc) = &desc {
        args.extend(["--desc", desc]);
    }
    let ran = sidestream(&args, input, &[]);
    let summary = if ran.ok {
        assert_eq!(ran.err, "");
        Summary { lines: ran.out.lines().count(), errors: 0 }
    } else {
        // "sidestream: E of L lines could not be converted"
        let words: Vec<&str> = ran.err.split_whitespace().collect();
        assert_eq!(words[4..], ["lines", "could", "not", "be", "converted"], "{}", ran.err);
        Summary { lines: words[3].parse().unwrap(), errors: words[1].parse().unwrap() }
    };
    (ran.out, summary)
}

fn desc(positions: &[usize]) -> KeyOptions {
    KeyOptions { desc: Some(positions.to_vec()), ..KeyOptions::default() }
}

/// The worked example of docs/keys.md, verbatim.
#[test]
fn readme_example() {
    // (tuple, key, the tuple decoded back), one line each.
    let rows = [
        (
            r#"[{"S":"Open"},{"N":"42"},{"S":"SRC-1"}]"#,
            r#"{"S":"sOpen#M-Y57~#sSRC-1#"}"#,
            r#"[{"S":"Open"},{"N":"42"},{"S":"SRC-1"}]"#,
        ),
        (
            r#"[{"S":"Open b"},{"N":"-1.50"},{"DATE":"2024-05-01"}]"#,
            r#"{"S":"sOpen$_b#MA1.5#d2024-05-01#"}"#,
            r#"[{"S":"Open b"},{"N":"-1.5"},{"DATE":"2024-05-01"}]"#,
        ),
        (
            r#"[{"S":"Open#1"},{"N":"7"},{"NULL":true}]"#,
            r#"{"S":"sOpen$b1#M-Z2~#%#"}"#,
            r#"[{"S":"Open#1"},{"N":"7"},{"NULL":true}]"#,
        ),
    ];
    let too_large = r#"[{"N":"1E126"}]"#;
    let refused = r#"{"error":"component 0: invalid number \"1E126\": magnitude above 9.9999999999999999999999999999999999999E+125, the largest DynamoDB number"}"#;
    let lines = |column: &dyn Fn(&(&str, &str, &str)) -> String| rows.iter().map(column).collect::<String>();

    let input = lines(&|r| format!("{}\n", r.0)) + too_large + "\n";
    let (out, summary) = run(true, &input, &desc(&[1]));
    assert_eq!(out, lines(&|r| format!("{}\n", r.1)) + refused + "\n");
    assert_eq!(summary, Summary { lines: 4, errors: 1 });

    let keys: String = out.lines().take(3).flat_map(|l| [l, "\n"]).collect();
    let (decoded, summary) = run(false, &keys, &desc(&[1]));
    assert_eq!(decoded, lines(&|r| format!("{}\n", r.2)));
    assert_eq!(summary.errors, 0);
}

#[test]
fn encoded_keys_sort_like_the_tuples() {
    // Sorted by tuple: the usual "#"-joined keys would put "Open b" and "Open#1" first.
    let tuples = [
        r#"[{"S":"Open"},{"N":"-2"}]"#,
        r#"[{"S":"Open"},{"N":"-1.5"}]"#,
        r#"[{"S":"Open"},{"N":"7"}]"#,
        r#"[{"S":"Open"},{"N":"42"}]"#,
        r#"[{"S":"Open b"},{"N":"1"}]"#,
        r#"[{"S":"Open#1"},{"N":"1"}]"#,
        r#"[{"S":"Opened"},{"N":"1"}]"#,
    ];
    for binary in [false, true] {
        let options = KeyOptions { binary, ..KeyOptions::default() };
        let (out, _) = run(true, &(tuples.join("\n") + "\n"), &options);
        let keys: Vec<String> = out
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object().unwrap().values().next().unwrap().as_str().unwrap().to_owned()
            })
            .collect();
        let as_bytes: Vec<Vec<u8>> = if binary {
            use base64::Engine as _;
            keys.iter().map(|k| base64::engine::general_purpose::STANDARD.decode(k).unwrap()).collect()
        } else {
            keys.iter().map(|k| k.as_bytes().to_vec()).collect()
        };
        assert!(as_bytes.windows(2).all(|w| w[0] < w[1]), "binary={binary}: {keys:?}");
    }
}

#[test]
fn every_line_gets_exactly_one_answer() {
    let input = "\n[]\nnot json\n{\"S\":1}\n[{\"X\":\"1\"}]\n[{\"S\":\"ok\"}]\n[{\"N\":\"NaN\"}]\n";
    let (out, summary) = run(true, input, &KeyOptions::default());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(summary, Summary { lines: 7, errors: 6 });
    assert!(lines[1].contains("sort key is empty"), "{}", lines[1]);
    assert!(lines[4].contains("unknown type \\\"X\\\""), "{}", lines[4]);
    assert_eq!(lines[5], r#"{"S":"sok#"}"#);
    assert!(lines[6].contains("NaN and Infinity"), "{}", lines[6]);

    let (out, summary) = run(false, "sOpen\nsOpen#\n\u{1}\n", &KeyOptions::default());
    assert_eq!(summary, Summary { lines: 3, errors: 2 });
    assert!(out.starts_with(r#"{"error":"malformed K1 text key at byte 5"#), "{out}");
}

#[test]
fn decode_checks_directions_only_when_asked() {
    let (out, _) = run(false, "sOpen#MB42#\n", &KeyOptions::default());
    assert_eq!(out, "[{\"S\":\"Open\"},{\"N\":\"-42\"}]\n");
    let (out, summary) = run(false, "sOpen#MB42#\n", &desc(&[0]));
    assert_eq!(summary.errors, 1);
    assert!(out.contains("component 0 is ascending but --desc lists it"), "{out}");
}

#[test]
fn binary_keys_round_trip_through_base64() {
    let options = KeyOptions { binary: true, ..desc(&[0]) };
    let input = "[{\"S\":\"a\\u0000b\"},{\"B\":\"AP8=\"},{\"DATETIME\":\"2024-05-01T14:34:56.5+02:00\"}]\n";
    let (keys, _) = run(true, input, &options);
    let (decoded, summary) = run(false, &keys, &options);
    assert_eq!(summary.errors, 0, "{decoded}");
    assert_eq!(
        decoded,
        "[{\"S\":\"a\\u0000b\"},{\"B\":\"AP8=\"},{\"DATETIME\":\"2024-05-01T12:34:56.5Z\"}]\n"
    );
}
