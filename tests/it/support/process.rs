//! The project's binaries as processes: where this build put them, and `sidestream` run as a
//! user runs it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};

/// The repository's root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A function binary from this build: `target/<profile>/<name>`, beside the test binary's `deps`.
pub(crate) fn binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir =
        exe.parent().and_then(Path::parent).context("the test binary is not in target/<profile>/deps")?;
    let path = dir.join(name);
    ensure!(
        path.exists(),
        "{} is missing: build it first (cargo build --workspace --bins; scripts/test does)",
        path.display()
    );
    Ok(path)
}

/// What one run of the binary gave.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Its stdout.
    pub(crate) out: String,
    /// Its stderr.
    pub(crate) err: String,
    /// Whether it exited with status 0.
    pub(crate) ok: bool,
    /// Its exit status (none if a signal ended it).
    pub(crate) code: Option<i32>,
}

/// Runs `sidestream args…` with `stdin` as its input and `env` added to this process's.
pub(crate) fn sidestream(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Ran {
    let binary = binary("sidestream").unwrap();
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
        code: output.status.code(),
    }
}
