//! Checks that cfn-lint does not make, on the resolved functions: Lambda accepts these mistakes
//! at deploy time and then misbehaves quietly (a misspelt `FunctionResponseTypes` makes Lambda
//! ignore `batchItemFailures` and retry whole batches; a broken filter drops every record).

use std::fmt;

use crate::template::model::{Function, StreamSource};
use stream_runtime::filter::Pattern;

/// One problem, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The function and field, e.g. `IndexerFunction/Events/IssuesStream/StartingPosition`.
    pub at: String,
    /// What is wrong, and what is expected.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// Lambda's quota of filters per event source mapping.
pub(crate) const MAX_FILTERS: usize = 5;
/// Lambda's limit on one pattern's length, in characters.
pub(crate) const MAX_PATTERN_CHARS: usize = 4096;

/// Checks every function and its DynamoDB stream sources.
pub fn check(functions: &[Function]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for function in functions {
        let mut report = |field: &str, message: String| {
            problems.push(Problem { at: format!("{}/{field}", function.logical_id), message });
        };
        check_function(function, &mut report);
        for source in &function.streams {
            check_stream(source, &mut report);
        }
    }
    problems
}

fn check_function(function: &Function, report: &mut impl FnMut(&str, String)) {
    expect(report, "Runtime", function.runtime.as_deref(), &["provided.al2023", "provided.al2"]);
    expect(report, "Handler", function.handler.as_deref(), &["bootstrap"]);
    expect(report, "Metadata/BuildMethod", function.build_method.as_deref(), &["rust-cargolambda"]);
    if function.binary.as_deref().is_none_or(str::is_empty) {
        report(
            "Metadata/BuildProperties/Binary",
            "missing: name the cargo binary this function runs".to_owned(),
        );
    }
    for arch in &function.architectures {
        if arch != "arm64" && arch != "x86_64" {
            report("Architectures", format!("{arch:?} is not arm64 or x86_64"));
        }
    }
}

fn check_stream(source: &StreamSource, report: &mut impl FnMut(&str, String)) {
    let field = |name: &str| format!("Events/{}/{name}", source.name);
    if source.function_response_types != ["ReportBatchItemFailures"] {
        report(
            &field("FunctionResponseTypes"),
            format!(
                "{:?} must be [\"ReportBatchItemFailures\"]: without it Lambda ignores batchItemFailures and retries whole batches",
                source.function_response_types
            ),
        );
    }
    expect(
        report,
        &field("StartingPosition"),
        source.starting_position.as_deref(),
        &["TRIM_HORIZON", "LATEST"],
    );
    let dynamodb_stream = source.stream.contains(":table/") && source.stream.contains("/stream/");
    let kinesis_stream = source.stream.contains(":kinesis:") && source.stream.contains(":stream/");
    if !source.stream.starts_with("arn:") || !(dynamodb_stream || kinesis_stream) {
        report(
            &field("Stream"),
            format!("{:?} is neither a DynamoDB stream ARN nor a Kinesis data stream ARN", source.stream),
        );
    }
    range(report, &field("BatchSize"), source.batch_size, 1, 10_000);
    range(report, &field("MaximumBatchingWindowInSeconds"), source.batching_window, 0, 300);
    range(report, &field("MaximumRetryAttempts"), source.maximum_retry_attempts, -1, 10_000);
    range(report, &field("ParallelizationFactor"), source.parallelization_factor, 1, 10);
    if let Some(age) = source.maximum_record_age
        && age != -1
        && !(60..=604_800).contains(&age)
    {
        report(&field("MaximumRecordAgeInSeconds"), format!("{age} is not -1 or 60 to 604800"));
    }
    if source.filters.len() > MAX_FILTERS {
        report(
            &field("FilterCriteria"),
            format!("{} filters; Lambda allows {MAX_FILTERS}", source.filters.len()),
        );
    }
    for (i, pattern) in source.filters.iter().enumerate() {
        let at = field(&format!("FilterCriteria/Filters/{i}/Pattern"));
        let chars = pattern.chars().count();
        if chars > MAX_PATTERN_CHARS {
            report(&at, format!("{chars} characters; Lambda allows {MAX_PATTERN_CHARS}"));
        }
        if let Err(e) = Pattern::parse_dynamodb(pattern) {
            report(&at, e.to_string());
        }
    }
}

fn expect(report: &mut impl FnMut(&str, String), field: &str, value: Option<&str>, allowed: &[&str]) {
    match value {
        Some(v) if allowed.contains(&v) => {}
        Some(v) => report(field, format!("{v:?} is not one of {allowed:?}")),
        None => report(field, format!("missing; expected one of {allowed:?}")),
    }
}

fn range(report: &mut impl FnMut(&str, String), field: &str, value: Option<i64>, min: i64, max: i64) {
    if let Some(v) = value
        && !(min..=max).contains(&v)
    {
        report(field, format!("{v} is not from {min} to {max}"));
    }
}

#[cfg(test)]
mod tests;
