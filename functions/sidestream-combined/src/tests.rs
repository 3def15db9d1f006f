//! `COMBINED_FUNCTIONS`: what it accepts, and errors that name the variable and the function.

use super::*;

/// An SDK configuration that is never called: building the functions makes no request.
fn sdk() -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .build()
}

fn build(combined_functions: Option<&str>) -> Result<Combined, ConfigError> {
    let lookup = |name: &str| match name {
        COMBINED_FUNCTIONS => combined_functions.map(str::to_owned),
        "PARKING_BUCKET" => Some("parked".to_owned()),
        "ARCHIVE_BUCKET" => Some("archive".to_owned()),
        "COUNTER_TABLE" => Some("counters".to_owned()),
        _ => None,
    };
    combined(&Vars::new(&lookup), &sdk())
}

#[test]
fn combined_functions_names_each_function_once() {
    let combined = build(Some("ttl-archiver, counter-aggregator")).unwrap();
    assert!(format!("{combined:?}").contains("ttl-archiver"), "{combined:?}");
    let bad: [(Option<&str>, &str); 4] = [
        (None, "is not set"),
        (Some("ttl-archiver,ttl-archiver"), "ttl-archiver is named twice"),
        (Some("ttl-archiver,index-verifier"), "\"index-verifier\" is not a stream function"),
        // A function's own variables are read as its binary reads them: the error names them.
        (Some("multikey-indexer"), "MULTIKEY_INDEXES"),
    ];
    for (value, expected) in bad {
        let error = build(value).unwrap_err().to_string();
        assert!(error.contains(expected), "{value:?}: {error}");
        if !expected.contains("MULTIKEY") {
            assert!(error.contains(COMBINED_FUNCTIONS), "{value:?}: {error}");
        }
    }
}
