//! Every error a person reads, from the CLI and from a function's cold start, is one line that
//! names each cause once and shows no Rust `Debug` form: each error type says its cause either in
//! its message or as its `source()`, never both, and the binaries print the chain.

use std::process::{Command, Stdio};

use anyhow::{Result, ensure};

use crate::support::process::sidestream;

/// An environment variable: its name and value.
type Var<'a> = (&'a str, &'a str);
/// Variables added to a command's environment.
type Env<'a> = Vec<Var<'a>>;

/// What makes a line unreadable: a cause said twice (one colon-separated part holding another,
/// as "not an event: the event is not an event: …" did), or a value in Rust's `Debug` form
/// (`Missing { var: "X", … }`, `Some(…)`).
fn unreadable(line: &str) -> Option<String> {
    let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
    for (i, part) in parts.iter().enumerate() {
        for (j, other) in parts.iter().enumerate() {
            if i != j && part.len() >= 12 && other.contains(part) {
                return Some(format!("{part:?} is said twice"));
            }
        }
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    for pair in words.windows(3) {
        let type_name = pair[0].chars().next().is_some_and(char::is_uppercase)
            && pair[0].chars().all(char::is_alphanumeric);
        if type_name && pair[1] == "{" && pair[2].ends_with(':') {
            return Some(format!("a Debug form: {} {{ {}", pair[0], pair[2]));
        }
    }
    ["Some(", "None,", "Ok(", "Err(", "\\\""]
        .iter()
        .find(|marker| line.contains(*marker))
        .map(|marker| format!("a Debug form: {marker}"))
}

/// Each way the CLI refuses what it was given, without AWS: the one line it prints.
#[test]
fn every_cli_error_is_one_readable_line() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("sidestream-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let not_an_event = file("not-an-event.json", br#"{"Records":1}"#);
    let not_utf8 = file("not-utf8.json", b"\xff\xfe");
    let not_gzip = file("not-gzip.json.gz", b"not gzip");
    let event = format!("{}/../events/ttl-archiver/mixed.json", env!("CARGO_MANIFEST_DIR"));
    let missing = dir.join("missing.json").display().to_string();
    let folder = dir.display().to_string();
    let indexes = std::fs::read_to_string(format!(
        "{}/../functions/multikey-indexer/indexes.example.json",
        env!("CARGO_MANIFEST_DIR")
    ))?;
    let cases: Vec<(Vec<&str>, Env<'_>)> = vec![
        (vec!["plan", "multikey-indexer", "--event", &not_an_event], vec![("MULTIKEY_INDEXES", &indexes)]),
        (vec!["plan", "multikey-indexer", "--event", &event], vec![("MULTIKEY_INDEXES", "{")]),
        (vec!["plan", "multikey-indexer", "--event", &event], vec![]),
        (vec!["plan", "ttl-archiver", "--event", &missing], vec![]),
        (vec!["plan", "ttl-archiver", "--event", &event], vec![("ARCHIVE_GZIP_LEVEL", "12")]),
        (vec!["plan", "counter-aggregator", "--event", &not_utf8], vec![]),
        (vec!["archive", "cat", &not_gzip], vec![]),
        (vec!["archive", "cat", "s3://"], vec![]),
        (vec!["archive", "cat", &missing], vec![]),
        (vec!["key", "encode"], vec![]),
        // A failure log not written yet holds nothing; one that cannot be read is an error.
        (vec!["failures", "list", "--log", &folder], vec![]),
        (vec!["index", "verify", "--table", "issues"], vec![]),
        (vec!["index", "verify", "--table", "issues"], vec![("MULTIKEY_INDEXES", "[]")]),
        (vec!["grid", "--table", "issues", "--scope", "35e9", "--field", "Cost"], vec![]),
    ];
    let mut problems = Vec::new();
    for (args, env) in &cases {
        let mut env = env.clone();
        if !env.iter().any(|(k, _)| *k == "MULTIKEY_INDEXES") {
            env.push(("MULTIKEY_INDEXES", ""));
        }
        let stdin = if args[0] == "key" { "[{\"X\":1}]\n" } else { "" };
        let ran = sidestream(args, stdin, &env);
        let lines: Vec<&str> = ran.err.lines().filter(|l| !l.trim().is_empty()).collect();
        let said = format!("sidestream {}: {:?}", args.join(" "), ran.err);
        if ran.ok {
            problems.push(format!("{said}: succeeded"));
            continue;
        }
        if args[0] == "key" {
            // Encoding answers each input line on stdout: {"error":"…"}.
            let line: serde_json::Value = serde_json::from_str(ran.out.lines().next().unwrap_or("{}"))?;
            let error = line["error"].as_str().unwrap_or_default();
            if error.is_empty() {
                problems.push(format!("{said}: no error line on stdout"));
            }
            if let Some(why) = unreadable(error) {
                problems.push(format!("{said}: {why}"));
            }
            continue;
        }
        let Some(last) = lines.last() else {
            problems.push(format!("{said}: nothing on stderr"));
            continue;
        };
        if !last.starts_with("sidestream: ") {
            problems.push(format!("{said}: the error is not one line of its own"));
        }
        if let Some(why) = unreadable(last) {
            problems.push(format!("{said}: {why}"));
        }
    }
    std::fs::remove_dir_all(&dir)?;
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    ensure!(cases.len() == 14);
    Ok(())
}

/// Each Lambda binary, started with an environment that cannot work, ends its cold start with
/// status 1 and one line naming the variable: what a user reads in CloudWatch.
#[test]
fn every_init_failure_is_one_readable_line_naming_the_variable() -> Result<()> {
    // Each function's own variable; PARKING_BUCKET, which every stream function reads first, set.
    const PARKED: Var<'static> = ("PARKING_BUCKET", "parked");
    let cases: [(&str, &[Var<'_>], &str); 12] = [
        ("multikey-indexer", &[], "PARKING_BUCKET"),
        ("multikey-indexer", &[PARKED, ("MULTIKEY_INDEXES", "{")], "MULTIKEY_INDEXES"),
        ("ttl-archiver", &[PARKED], "ARCHIVE_BUCKET"),
        (
            "ttl-archiver",
            &[PARKED, ("ARCHIVE_BUCKET", "archive"), ("ARCHIVE_GZIP_LEVEL", "x")],
            "ARCHIVE_GZIP_LEVEL",
        ),
        ("counter-aggregator", &[("PARKING_BUCKET", "p")], "PARKING_BUCKET"),
        ("counter-aggregator", &[PARKED], "COUNTER_TABLE"),
        ("sidestream-combined", &[], "COMBINED_FUNCTIONS"),
        ("sidestream-combined", &[PARKED, ("COMBINED_FUNCTIONS", "ttl-archiver,nope")], "COMBINED_FUNCTIONS"),
        ("index-verifier", &[], "MULTIKEY_INDEXES"),
        ("index-backfiller", &[], "MULTIKEY_INDEXES"),
        ("archive-restorer", &[], "RESTORE_TABLE"),
        ("grid-api", &[("MULTIKEY_INDEXES", "{}")], "MULTIKEY_INDEXES"),
    ];
    let mut problems = Vec::new();
    for (binary, env, var) in cases {
        let output = Command::new(crate::support::process::binary(binary)?)
            .env_clear()
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()?;
        let err = String::from_utf8_lossy(&output.stderr);
        let said = format!("{binary} {env:?}: {err:?}");
        let Some(last) = err.lines().rev().find(|l| !l.trim().is_empty()) else {
            problems.push(format!("{said}: nothing on stderr"));
            continue;
        };
        if output.status.code() != Some(1) {
            problems.push(format!("{said}: exit status {:?}", output.status.code()));
        }
        if !last.starts_with(&format!("{binary}: ")) || !last.contains(var) {
            problems.push(format!("{said}: not one line naming {var}"));
        }
        if let Some(why) = unreadable(last) {
            problems.push(format!("{said}: {why}"));
        }
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// The check itself catches what it is for.
#[test]
fn the_check_catches_a_repeated_cause_and_a_debug_form() {
    let repeated = "sidestream: cannot plan x.json: not a DynamoDB stream event: the event is not a DynamoDB stream event: invalid type";
    assert!(unreadable(repeated).is_some());
    assert!(unreadable(r#"Error: Missing { var: "PARKING_BUCKET", hint: "…" }"#).is_some());
    assert!(unreadable("sidestream: cannot read x.json: No such file or directory (os error 2)").is_none());
}
