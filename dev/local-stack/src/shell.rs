//! The environment a second shell needs to use a running local stack: where the emulator is,
//! credentials for it, the stack's names, and the stream functions' configuration, so that
//! `sidestream` commands run there as they would against a deployed stack.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::Stack;

/// One variable of a second shell, with what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellVar {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl Stack {
    /// The variables a second shell exports to use this stack: `AWS_ENDPOINT_URL` and the
    /// Region and credentials for the emulator at `endpoint`; `STACK`; each table's and bucket's
    /// name under its logical id in capitals (`IssuesTable`: `ISSUES_TABLE`, a team's own issues
    /// table too, which `IssuesTableStreamArn` names); and the stream
    /// functions' own variables (`MULTIKEY_INDEXES`, `PARKING_BUCKET`, …) that every one of them
    /// that reads a variable gives the same value, so that `sidestream failures replay`,
    /// `index` and `grid` are configured as the functions are. The functions' credentials
    /// (their roles') are not among them: an operator signs as themself.
    pub fn shell_environment(&self, endpoint: &str, region: &str) -> Vec<ShellVar> {
        let var = |name: &str, value: &str| ShellVar { name: name.to_owned(), value: value.to_owned() };
        let mut vars = vec![
            var("AWS_ENDPOINT_URL", endpoint),
            var("AWS_REGION", region),
            var("AWS_ACCESS_KEY_ID", "testing"),
            var("AWS_SECRET_ACCESS_KEY", "testing"),
            var("S3_FORCE_PATH_STYLE", "true"),
            var("STACK", &self.name),
        ];
        for table in &self.tables {
            vars.push(var(&capitals(&table.logical_id), &table.name));
        }
        // A team's own issues table, which the stack reads but did not create.
        if !vars.iter().any(|v| v.name == "ISSUES_TABLE")
            && let Ok(table) = self.issues_table()
        {
            vars.push(var("ISSUES_TABLE", &table));
        }
        for bucket in &self.buckets {
            vars.push(var(&capitals(&bucket.logical_id), &bucket.name));
        }
        let mut shared: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for function in self.functions.iter().filter(|f| !f.streams.is_empty()) {
            for (name, value) in &function.environment {
                if name.starts_with("AWS_") {
                    continue;
                }
                shared
                    .entry(name)
                    .and_modify(|seen| {
                        if *seen != Some(value.as_str()) {
                            *seen = None;
                        }
                    })
                    .or_insert(Some(value));
            }
        }
        for (name, value) in shared {
            if let Some(value) = value
                && !vars.iter().any(|v| v.name == name)
            {
                vars.push(var(name, value));
            }
        }
        vars
    }
}

/// `IssuesTable` as `ISSUES_TABLE`.
fn capitals(logical_id: &str) -> String {
    let mut out = String::new();
    for (i, c) in logical_id.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// `vars` as lines a POSIX shell runs: `export NAME='value'`, each value quoted.
pub fn exports(vars: &[ShellVar]) -> String {
    let mut lines = String::new();
    for var in vars {
        let quoted = var.value.replace('\'', r"'\''");
        // Writing to a String cannot fail.
        let _ = writeln!(lines, "export {}='{quoted}'", var.name);
    }
    lines
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_and_quotes() {
        assert_eq!(super::capitals("IssuesTable"), "ISSUES_TABLE");
        assert_eq!(super::capitals("ArchiveBucket"), "ARCHIVE_BUCKET");
        let vars = [super::ShellVar { name: "X".into(), value: r#"{"a":"it's"}"#.into() }];
        assert_eq!(super::exports(&vars), "export X='{\"a\":\"it'\\''s\"}'\n");
    }
}
