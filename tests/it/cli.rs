//! The `sidestream` binary as a process: what a user types, what they get back.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// What one run of the binary gave.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Its stdout.
    pub(crate) out: String,
    /// Its stderr.
    pub(crate) err: String,
    /// Whether it exited with status 0.
    pub(crate) ok: bool,
}

/// Runs `sidestream args…` with `stdin` as its input and `env` added to this process's.
pub(crate) fn sidestream(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Ran {
    let binary = crate::lambda::binary("sidestream").unwrap();
    let mut child = Command::new(binary)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    Ran {
        out: String::from_utf8(output.stdout).unwrap(),
        err: String::from_utf8(output.stderr).unwrap(),
        ok: output.status.success(),
    }
}
