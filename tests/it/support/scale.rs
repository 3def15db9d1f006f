//! How large the scale tests run: small by default, so that `scripts/test` takes minutes, and at
//! full size under `SIDESTREAM_TEST_SCALE=full` (`scripts/test --scale`).
//!
//! Each scale test asserts by count that its race or fault happened, at either size: a smaller
//! size makes fewer of them, never none. The small size is what CI runs: each test's doc comment
//! says why that size proves the same property with margin. Run the full sizes before resolving
//! an issue that touches their area.

/// The variable that chooses the size.
const VAR: &str = "SIDESTREAM_TEST_SCALE";

/// `small` by default, `full` when `SIDESTREAM_TEST_SCALE` is `full`. Any other value fails
/// the test, naming the variable.
pub(crate) fn size<T>(small: T, full: T) -> T {
    match std::env::var(VAR).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("" | "small") => small,
        Ok("full") => full,
        Ok(other) => panic!("{VAR} is {other:?}: expected \"small\" (the default) or \"full\""),
        Err(std::env::VarError::NotUnicode(_)) => panic!("{VAR} is not UTF-8"),
    }
}
