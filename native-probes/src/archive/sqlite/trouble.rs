//! What went wrong with an archive file, in one line that names the file and what was being
//! done, and says what a full disk, a damaged file or someone else's database mean.

use anyhow::Result;
use rusqlite::Connection;
use std::path::Path;

/// What was being done to the archive file when SQLite failed, for [`explain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Doing {
    /// Opening it: the file, its `-wal` and `-shm` files, its tables (and making them).
    Open,
    Read,
    Write,
}

impl Doing {
    fn verb(self) -> &'static str {
        match self {
            Doing::Open => "open",
            Doing::Read => "read",
            Doing::Write => "write",
        }
    }
}

/// An error of SQLite's as one line naming the file and what was being done, and saying
/// what the two causes an operator can act on mean: a full disk (SQLITE_FULL, or an I/O
/// error whose system call failed with ENOSPC or EDQUOT, as growing the `-shm` file does)
/// and a damaged file (SQLITE_CORRUPT, SQLITE_NOTADB). An error that is not SQLite's passes
/// unchanged (a reader gone from `archive export`, a bad row); so does one explained
/// already, as the result keeps only SQLite's message, not its error (whose own message,
/// "Error code 11: …", would repeat it). `conn` gives the failed system call's errno.
pub(super) fn explain(
    path: &Path,
    conn: Option<&Connection>,
    doing: Doing,
    e: anyhow::Error,
) -> anyhow::Error {
    let Some(sql) = e.chain().find_map(|c| c.downcast_ref::<rusqlite::Error>()) else {
        return e;
    };
    let (file, verb) = (path.display(), doing.verb());
    let rusqlite::Error::SqliteFailure(failure, message) = sql else {
        return anyhow::anyhow!("{file}: {verb}: {sql}");
    };
    let message = message
        .clone()
        .unwrap_or_else(|| rusqlite::ffi::code_to_str(failure.extended_code).to_string());
    // SAFETY: the handle is the open connection's, and `sqlite3_system_errno` only reads it.
    let errno = conn.map_or(0, |c| unsafe {
        rusqlite::ffi::sqlite3_system_errno(c.handle())
    });
    use rusqlite::ErrorCode as C;
    let said = match failure.code {
        C::DiskFull => full(path, verb),
        C::SystemIoFailure if errno == libc::ENOSPC || errno == libc::EDQUOT => full(path, verb),
        // A connection that failed to open is gone with its errno: the disk says.
        C::SystemIoFailure if errno == 0 && nearly_full(path) => full(path, verb),
        C::DatabaseCorrupt | C::NotADatabase => format!(
            "{file} is damaged (not a valid SQLite database: {message}); could not {verb} it"
        ),
        C::ReadOnly => format!(
            "{file}: {verb}: {message} (the file, or its folder, which holds its -wal and -shm \
             files, is write-protected or on a read-only mount)"
        ),
        _ => format!("{file}: {verb}: {message}"),
    };
    anyhow::anyhow!(said)
}

/// Whether the file system holding `path` has less room left than a few pages of the
/// archive and its `-shm` file need (64 KiB).
fn nearly_full(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path and `st` a statvfs for the call to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    (st.f_bavail as u64).saturating_mul(st.f_frsize as u64) < 64 * 1024
}

fn full(path: &Path, verb: &str) -> String {
    format!(
        "no space left on the disk holding {} (could not {verb} it)",
        path.display()
    )
}

/// The tables of an archive (all three since its first version): what a read needs.
const TABLES: [&str; 3] = ["series", "records", "runs"];

pub(super) fn not_a_directory(path: &Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!("{}: a directory, not an archive file", path.display());
    }
    Ok(())
}

/// SQLite's answer to a file that is not a database (text, a CSV, an encrypted file).
pub(super) fn not_sqlite(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase)
}

/// The error for a file that is not a nowcast archive: what it is, and which of the
/// archive's tables it lacks.
pub(super) fn not_an_archive<T>(path: &Path, what: &str, missing: &[&str]) -> Result<T> {
    let lacks = match missing {
        [] => String::new(),
        [one] => format!(": no table {one}"),
        [first @ .., last] => format!(": no table {} or {last}", first.join(", ")),
    };
    anyhow::bail!("{}: not a nowcast archive ({what}{lacks})", path.display())
}

/// Refuses a file that is not a nowcast archive, naming what it is and which tables it
/// lacks, before anything reads or writes the archive's tables (SQLite would answer only
/// "no such table: series", naming no file). To read, an archive has all of [`TABLES`];
/// to write, a file may also be new: empty, or a database of no tables (whose schema is
/// then made), but not one of other tables.
pub(super) fn check_tables(conn: &Connection, path: &Path, write: bool) -> Result<()> {
    let names = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        });
    let names = match names {
        Err(e) if not_sqlite(&e) => return not_an_archive(path, "not a SQLite file", &[]),
        r => r?,
    };
    let missing: Vec<&str> = TABLES
        .iter()
        .copied()
        .filter(|t| !names.iter().any(|n| n == t))
        .collect();
    if missing.is_empty() || (write && names.is_empty()) {
        return Ok(());
    }
    let what = if !names.is_empty() {
        // Someone else's names: escaped for the terminal.
        const SHOWN: usize = 5;
        let mut list = names
            .iter()
            .take(SHOWN)
            .map(|n| crate::format::clean(n))
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > SHOWN {
            list.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        format!("a SQLite database of the tables {list}")
    } else if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        "an empty file".to_string()
    } else {
        "a SQLite database of no tables".to_string()
    };
    not_an_archive(path, &what, &missing)
}
