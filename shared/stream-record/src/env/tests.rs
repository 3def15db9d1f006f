//! Tests for environment configuration.

use std::collections::HashMap;

use super::*;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn required_optional_and_integers() {
    let env = vars(&[("TABLE", "issues"), ("BLANK", "  "), ("N", " 8 "), ("BAD", "eight"), ("BIG", "99")]);
    let lookup = |k: &str| env.get(k).cloned();
    let v = Vars::new(&lookup);
    assert_eq!(v.required("TABLE", "the table"), Ok("issues".to_owned()));
    assert_eq!(
        v.required("BLANK", "the table name").unwrap_err().to_string(),
        "environment variable BLANK is not set: the table name"
    );
    assert_eq!(v.optional("UNSET"), None);
    assert_eq!(v.integer("N", 4_usize, 1, 64), Ok(8));
    assert_eq!(v.integer("UNSET", 4_usize, 1, 64), Ok(4));
    assert_eq!(
        v.integer("BAD", 4_usize, 1, 64).unwrap_err().to_string(),
        r#"environment variable BAD is invalid: "eight" is not an integer from 1 to 64"#
    );
    assert!(v.integer("BIG", 4_usize, 1, 64).unwrap_err().to_string().contains("BIG"));
}

#[test]
fn a_choice_is_one_of_its_values_or_the_first_when_unset() {
    let env = vars(&[("MODE", " any "), ("WRONG", "some")]);
    let lookup = |k: &str| env.get(k).cloned();
    let v = Vars::new(&lookup);
    let choices = [("stream", 1), ("any", 2)];
    assert_eq!(v.choice("MODE", &choices), Ok(2));
    assert_eq!(v.choice("UNSET", &choices), Ok(1));
    assert_eq!(
        v.choice("WRONG", &choices).unwrap_err().to_string(),
        "environment variable WRONG is invalid: \"some\": expected stream or any"
    );
}

/// A configuration that stops at its first missing variable is reported with every one it
/// reaches, in the order it reads them; a set one stays as set; one missing is named alone.
#[test]
fn build_names_every_missing_variable_at_once() {
    struct Config {
        table: String,
        bucket: String,
        prefix: String,
    }
    let read = |vars: &Vars<'_>| -> Result<Config, ConfigError> {
        Ok(Config {
            table: vars.required("TABLE", "the table")?,
            bucket: vars.required("BUCKET", "the bucket")?,
            prefix: vars.required("PREFIX", "the prefix")?,
        })
    };
    let none = |_: &str| None;
    let error = Vars::new(&none).build(read).err().unwrap();
    assert_eq!(
        error,
        ConfigError::MissingMany {
            vars: vec![("TABLE", "the table"), ("BUCKET", "the bucket"), ("PREFIX", "the prefix")]
        }
    );
    assert_eq!(
        error.to_string(),
        "environment variables are not set: TABLE (the table); BUCKET (the bucket); PREFIX (the prefix)"
    );
    let one = |name: &str| (name != "BUCKET").then(|| format!("{name}-value"));
    let error = Vars::new(&one).build(read).err().unwrap();
    assert_eq!(error, ConfigError::Missing { var: "BUCKET", hint: "the bucket" });
    let all = |name: &str| Some(format!("{name}-value"));
    let config = Vars::new(&all).build(read).unwrap();
    assert_eq!(
        (config.table.as_str(), config.bucket.as_str(), config.prefix.as_str()),
        ("TABLE-value", "BUCKET-value", "PREFIX-value")
    );
}
