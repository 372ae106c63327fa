//! NDJSON measurement records, one per line, flushed after each experiment so that a reader
//! downstream (a pipe, a file being followed) sees each as it comes.

use super::{Experiment, Heading, RecordSink};
use crate::series::SeriesStats;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

pub struct Ndjson<W: Write> {
    out: W,
}

impl<W: Write> Ndjson<W> {
    pub fn new(out: W) -> Self {
        Self { out }
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

impl Ndjson<BufWriter<File>> {
    /// Records to a new file at `path` (replacing one that is there).
    pub fn create(path: &Path) -> io::Result<Self> {
        let f = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: create: {e}", path.display())))?;
        Ok(Self::new(BufWriter::new(f)))
    }
}

impl<W: Write> RecordSink for Ndjson<W> {
    fn begin(&mut self, _: &Heading) -> io::Result<()> {
        Ok(())
    }

    fn experiment(&mut self, e: &Experiment<'_>) -> io::Result<()> {
        for r in e.records {
            writeln!(self.out, "{}", r.to_line())?;
        }
        self.out.flush()
    }

    fn finish(&mut self, _: &[SeriesStats]) -> io::Result<()> {
        self.out.flush()
    }
}
