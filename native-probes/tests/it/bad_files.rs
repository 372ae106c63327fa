//! Files as people and hostile hands make them, through the commands that read them: a UTF-8
//! byte order mark (some Windows tools write one) is not data; a file that cannot be read is
//! named and the others are still read; a bad line is quoted in part, never whole; an output
//! that names an input is refused before anything is overwritten.

use crate::common;

use common::{nowcast, text};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);
const BOM: &str = "\u{feff}";

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nowcast-bad-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn record(t: u64, v: f64) -> String {
    format!(
        "{{\"schema_version\":\"1.2\",\"timestamp_ms\":{t},\"source\":\"nowcast tcp\",\
         \"metric\":\"rtt\",\"value\":{v},\"unit\":\"ms\",\"to\":\"h:1\"}}"
    )
}

#[test]
fn a_byte_order_mark_is_not_data() {
    let d = Dir::new("bom");
    // A header after the mark is still a header, and its time column is read.
    let csv = d.file(
        "a.csv",
        &format!("{BOM}time,rtt_ms\n1767225600000,2.5\n1767225601000,2.7\n1767225602000,2.6\n"),
    );
    let out = nowcast(&["forecast", path(&csv)], LIMIT);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("3 values (csv), column rtt_ms"), "{said}");
    assert!(!said.contains("gives no times"), "{said}");
    // One number a line: the first is a value, not a header.
    let plain = d.file("a.txt", &format!("{BOM}1.5\n2.5\n3.5\n"));
    let out = nowcast(&["forecast", path(&plain)], LIMIT);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains("3 values (plain)"), "{said}");
    // Records: the first line is a record.
    let lines = [
        record(1_767_225_600_000, 2.5),
        record(1_767_225_601_000, 2.7),
    ];
    let nd = d.file("a.ndjson", &format!("{BOM}{}\n{}\n", lines[0], lines[1]));
    let out = nowcast(&["forecast", path(&nd)], LIMIT);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("2 values (ndjson)"), "{said}");
    let db = d.0.join("a.sqlite");
    let out = nowcast(
        &["archive", "import", path(&nd), "--archive", path(&db)],
        LIMIT,
    );
    let said = text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("2 records imported, 0 already in the archive, 0 bad lines"),
        "{said}"
    );
    // Signatures.
    let sig = d.file("a.sig", &format!("{BOM}cpu 64 3 7-9\nnetwork 64 1 40\n"));
    let out = nowcast(&["classify", path(&sig)], LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn an_unreadable_file_is_named_and_the_others_are_imported() {
    let d = Dir::new("unreadable");
    let good = d.file(
        "good.ndjson",
        &format!(
            "{}\n{}\n",
            record(1_767_225_600_000, 2.5),
            record(1_767_225_601_000, 2.7)
        ),
    );
    let dir = d.0.join("adir");
    std::fs::create_dir_all(&dir).unwrap();
    let missing = d.0.join("missing.ndjson");
    let later = d.file(
        "later.ndjson",
        &format!("{}\n", record(1_767_225_602_000, 2.6)),
    );
    let db = d.0.join("a.sqlite");
    let out = nowcast(
        &[
            "archive",
            "import",
            path(&good),
            path(&dir),
            path(&missing),
            path(&later),
            "--archive",
            path(&db),
        ],
        LIMIT,
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&format!("{}: read", dir.display())), "{err}");
    assert!(
        err.contains(&format!("{}: open", missing.display())),
        "{err}"
    );
    assert!(
        err.contains("3 records imported into"),
        "the files before and after: {err}"
    );
    assert!(err.contains("could not read all of: "), "{err}");
}

#[test]
fn a_bad_signature_is_quoted_in_part_and_a_model_never_overwrites_its_inputs() {
    let d = Dir::new("classify");
    // A 4 MB word where the label goes.
    let huge = d.file("huge.sig", &format!("{}\n", "x".repeat(4 << 20)));
    let out = nowcast(&["classify", path(&huge)], LIMIT);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("huge.sig:1: label 'xxx"),
        "{}",
        &err[..err.len().min(300)]
    );
    assert!(err.len() < 1000, "{} bytes of error", err.len());
    // Not text.
    let bin = d.0.join("bin.sig");
    std::fs::write(&bin, b"cpu 64 \xff\xfe 3\n").unwrap();
    let err = text(&nowcast(&["classify", path(&bin)], LIMIT).stderr);
    assert!(err.contains("bin.sig:1: not UTF-8"), "{err}");
    // `train --out` naming one of its inputs is refused; the input is left as it was.
    let mut lines = String::new();
    for i in 0..40 {
        lines += &format!("cpu 4096 {}-{}\n", 10 * i, 10 * i + 30);
        lines += &format!("network 4096 {} {}\n", 7 * i, 900 + 13 * i);
    }
    let sigs = d.file("t.sig", &lines);
    let out = nowcast(
        &["classify", "train", path(&sigs), "--out", path(&sigs)],
        LIMIT,
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("would be overwritten"), "{err}");
    assert_eq!(std::fs::read_to_string(&sigs).unwrap(), lines);
}
