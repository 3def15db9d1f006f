//! How a Lambda binary ends: an error (a cold start's, say: a variable unset, a table missing)
//! printed as one line that names each cause once, never Rust's `Debug` form, and exit status 1.

use std::error::Error;
use std::process::ExitCode;

/// `result` as a binary's exit: on an error, `name: ` and [`chain`] on stderr, and status 1.
pub fn report(name: &str, result: Result<(), lambda_runtime::Error>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {}", chain(&*error));
            ExitCode::FAILURE
        }
    }
}

/// An error and each of its sources, joined by colons: the sentence a person reads. Each error
/// type says its cause either in its message or as its source, never both, so nothing repeats.
pub fn chain(error: &dyn Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading the table")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn each_cause_is_said_once() {
        let error = Outer(std::io::Error::other("access denied"));
        assert_eq!(chain(&error), "reading the table: access denied");
        let said =
            crate::ConfigError::Missing { var: "PARKING_BUCKET", hint: "the bucket records are parked in" };
        assert!(!chain(&said).contains("Missing {"), "{}", chain(&said));
    }
}
