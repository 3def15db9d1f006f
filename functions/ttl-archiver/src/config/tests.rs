//! Tests for reading the archiver's environment.

use std::collections::HashMap;

use stream_runtime::Vars;

use super::*;

fn config(pairs: &[(&str, &str)]) -> Result<Config, String> {
    let env: HashMap<String, String> =
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let lookup = move |name: &str| env.get(name).cloned();
    Config::from_vars(&Vars::new(&lookup)).map_err(|e| e.to_string())
}

#[test]
fn defaults_need_only_the_bucket() {
    let c = config(&[("ARCHIVE_BUCKET", "my-archive")]).unwrap();
    assert_eq!(c.layout, ObjectSettings::default());
    assert_eq!(c.archive.bucket, "my-archive");
    assert_eq!(c.archive.storage_class, "STANDARD");
}

#[test]
fn values_are_read_and_the_prefix_gets_its_slash() {
    let c = config(&[
        ("ARCHIVE_BUCKET", "a.b-c"),
        ("ARCHIVE_PREFIX", "ttl/archive"),
        ("ARCHIVE_GZIP_LEVEL", "9"),
        ("ARCHIVE_STORAGE_CLASS", "GLACIER_IR"),
    ])
    .unwrap();
    assert_eq!(c.layout.prefix, "ttl/archive/");
    assert_eq!(c.layout.gzip_level, 9);
    assert_eq!(c.archive.storage_class, "GLACIER_IR");
    let c = config(&[("ARCHIVE_BUCKET", "abc"), ("ARCHIVE_PREFIX", "x/")]).unwrap();
    assert_eq!(c.layout.prefix, "x/");
}

#[test]
fn errors_name_the_variable_and_the_rule() {
    let long = "p".repeat(513);
    #[rustfmt::skip]
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "environment variable ARCHIVE_BUCKET is not set"),
        (&[("ARCHIVE_BUCKET", "My_Bucket")], "ARCHIVE_BUCKET is invalid: \"My_Bucket\" is not an S3 bucket name"),
        (&[("ARCHIVE_BUCKET", "ab")], "ARCHIVE_BUCKET is invalid"),
        (&[("ARCHIVE_BUCKET", "-abc")], "ARCHIVE_BUCKET is invalid"),
        (&[("ARCHIVE_BUCKET", "abc"), ("ARCHIVE_PREFIX", "/archive")], "ARCHIVE_PREFIX is invalid: \"/archive\" starts with '/'"),
        (&[("ARCHIVE_BUCKET", "abc"), ("ARCHIVE_PREFIX", &long)], "ARCHIVE_PREFIX is invalid: 513 bytes is too long: at most 512"),
        (&[("ARCHIVE_BUCKET", "abc"), ("ARCHIVE_PREFIX", "a\tb")], "contains the control character '\\t'"),
        (&[("ARCHIVE_BUCKET", "abc"), ("ARCHIVE_GZIP_LEVEL", "0")], "ARCHIVE_GZIP_LEVEL is invalid: \"0\" is not an integer from 1 to 9"),
        (&[("ARCHIVE_BUCKET", "abc"), ("ARCHIVE_STORAGE_CLASS", "glacier")], "ARCHIVE_STORAGE_CLASS is invalid: \"glacier\" is not one of STANDARD, STANDARD_IA"),
    ];
    for (env, expected) in cases {
        let err = config(env).unwrap_err();
        assert!(err.contains(expected), "{env:?}\n  got: {err}\n  expected: {expected}");
    }
}

#[test]
fn the_replicated_ttl_attribute_is_read_and_named_when_too_long() {
    let read = |value: &str| {
        config(&[("ARCHIVE_BUCKET", "abc"), ("ARCHIVE_REPLICATED_TTL_ATTRIBUTE", value)])
            .map(|c| c.layout.replicated_ttl_attribute)
    };
    assert_eq!(read("expires_at").unwrap().as_deref(), Some("expires_at"));
    // Empty is unset, as for every variable: the template writes "" for off.
    assert_eq!(read("").unwrap(), None);
    let error = read(&"a".repeat(256)).unwrap_err();
    assert!(error.contains("ARCHIVE_REPLICATED_TTL_ATTRIBUTE") && error.contains("256 bytes"), "{error}");
}
