//! `sidestream plan <function>`: a function's plan of an event file, without AWS, as each
//! function explains it (`StreamFunction::explain`), printed as it is made.

use std::fs::File;
use std::io::{self, BufWriter, StderrLock, StdoutLock, Write};
use std::path::{Path, PathBuf};

use stream_runtime::explain::Sink;

/// Prints the plan's writes to stdout, one JSON object a line, and its notes to stderr, one line
/// each, as they come. With an output folder, also writes each object the plan would write to
/// `<folder>/<key>` (the ttl-archiver's objects, for `sidestream archive cat`).
pub(crate) struct Printer<'o> {
    out: BufWriter<StdoutLock<'static>>,
    err: StderrLock<'static>,
    files: Option<&'o Path>,
}

impl<'o> Printer<'o> {
    /// A printer to stdout and stderr, writing files under `files` if given.
    pub(crate) fn new(files: Option<&'o Path>) -> Printer<'o> {
        Printer { out: BufWriter::new(io::stdout().lock()), err: io::stderr().lock(), files }
    }

    /// Writes out what is still buffered.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Sink for Printer<'_> {
    fn write(&mut self, json: &[u8]) -> io::Result<()> {
        self.out.write_all(json)?;
        self.out.write_all(b"\n")
    }

    fn note(&mut self, note: &str) -> io::Result<()> {
        writeln!(self.err, "sidestream: {note}")
    }

    fn wants_files(&self) -> bool {
        self.files.is_some()
    }

    fn file(&mut self, key: &str, body: &[u8]) -> io::Result<()> {
        let Some(dir) = self.files else { return Ok(()) };
        let path: PathBuf = dir.join(key);
        let named = |e: io::Error, what: &Path| {
            io::Error::new(e.kind(), format!("cannot write {}: {e}", what.display()))
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| named(e, parent))?;
        }
        File::create(&path).and_then(|mut f| f.write_all(body)).map_err(|e| named(e, &path))
    }
}
