//! The crate's error type: every failure names the offending input and the rule it broke.

use crate::limit::KeyKind;

/// Why a number was rejected. DynamoDB numbers are finite decimals with at most 38 significant
/// digits and a magnitude between 1E-130 and 9.9999999999999999999999999999999999999E+125.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumberError {
    /// `NaN`, `Infinity` and the like.
    #[error("NaN and Infinity are not DynamoDB numbers (they must be finite decimals)")]
    NotFinite,
    /// Not a decimal literal at all.
    #[error("not a decimal number (expected digits, an optional '.', and an optional exponent like E-5)")]
    Syntax,
    /// More significant digits than DynamoDB stores.
    #[error("{digits} significant digits; DynamoDB allows at most 38")]
    TooManyDigits {
        /// How many significant digits the input had (counted up to the first one over the limit).
        digits: usize,
    },
    /// Non-zero but smaller in magnitude than 1E-130.
    #[error("magnitude below 1E-130, the smallest non-zero DynamoDB number")]
    TooSmall,
    /// Larger in magnitude than 9.99…9E+125.
    #[error("magnitude above 9.9999999999999999999999999999999999999E+125, the largest DynamoDB number")]
    TooLarge,
}

/// Every error this crate returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A number outside DynamoDB's Number type.
    #[error("invalid number {input:?}: {reason}")]
    Number {
        /// The text as given.
        input: String,
        /// The rule it broke.
        reason: NumberError,
    },
    /// A date or datetime that is malformed or outside years 0000–9999.
    #[error("invalid date/time {input:?}: {reason}")]
    Time {
        /// The text as given.
        input: String,
        /// The rule it broke.
        reason: &'static str,
    },
    /// An encoded key over DynamoDB's byte limit for its kind of key attribute.
    #[error("{kind} is {actual} bytes; DynamoDB allows at most {limit} bytes", limit = kind.max_bytes())]
    TooLong {
        /// Sort or partition key.
        kind: KeyKind,
        /// The encoded size in bytes.
        actual: usize,
    },
    /// An encoded key of zero bytes (a tuple with no components).
    #[error("{kind} is empty; DynamoDB key attributes must be at least 1 byte")]
    Empty {
        /// Sort or partition key.
        kind: KeyKind,
    },
    /// Input that is not a well-formed key of the expected format.
    #[error("malformed {format} key at byte {offset}: {reason}")]
    Malformed {
        /// `"K1 text"` or `"B1 binary"`.
        format: &'static str,
        /// Byte offset of the problem in the key.
        offset: usize,
        /// What was wrong there.
        reason: &'static str,
    },
    /// A segment of a hierarchical key that cannot be parsed back.
    #[error("malformed hierarchical key {key:?}: {reason}")]
    Hierarchical {
        /// The key as given.
        key: String,
        /// What was wrong.
        reason: &'static str,
    },
    /// A stream sequence number that is not 1–40 decimal digits.
    #[error("invalid stream sequence number {input:?}: {reason}")]
    SequenceNumber {
        /// The text as given.
        input: String,
        /// The rule it broke.
        reason: &'static str,
    },
}
