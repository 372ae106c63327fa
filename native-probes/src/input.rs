//! An input named on the command line, opened for reading: `-` is standard input, as for
//! most Unix tools (`zcat trace.pcap.gz | nowcast pcap -`, `nowcast report -`).

use std::io::{self, Read};
use std::path::Path;

/// The name that stands for standard input.
pub const STDIN: &str = "-";

/// `path` opened for reading, or standard input for [`STDIN`].
pub fn open(path: &Path) -> io::Result<Box<dyn Read>> {
    if path.as_os_str() == STDIN {
        Ok(Box::new(io::stdin().lock()))
    } else {
        Ok(Box::new(std::fs::File::open(path)?))
    }
}
