//! `sidestream plan <function>`: a function's plan of an event file, without AWS, as each
//! function explains it (`StreamFunction::explain`).

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::Context as _;
use stream_runtime::Explained;

/// Writes the plan's writes to stdout, one JSON object a line, and its notes to stderr, one line
/// each. With `out_dir`, also writes each object the plan would write to `out_dir/<key>` (the
/// ttl-archiver's objects, for `sidestream archive cat`).
pub(crate) fn print(explained: &Explained, out_dir: Option<&Path>) -> anyhow::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    for line in &explained.writes {
        serde_json::to_writer(&mut out, line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    if let Some(dir) = out_dir {
        for (key, body) in &explained.files {
            let path = dir.join(key);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    let mut err = io::stderr().lock();
    for note in &explained.notes {
        writeln!(err, "sidestream: {note}")?;
    }
    Ok(())
}
