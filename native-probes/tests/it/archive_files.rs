//! The archive's file on disk, through real `nowcast` processes: `tcp` and `udp --archive`
//! refuse a file that cannot be an archive before probing, and say at the end (exit status
//! 2) when records did not go in, naming the spool that keeps them; a read (`archive query`,
//! `export`, `report`, `campaign status`) leaves the folder and the file as it found them,
//! names a file that is not an archive, and never makes one; `archive import` makes no
//! archive for nothing and no folder for a mistyped path.

use crate::common;

use common::{nowcast, one_record, text, Server, TempDir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// A test's directory, removed when the test ends (passed or failed).
fn temp(name: &str) -> TempDir {
    TempDir::new(&format!("archive-files-{name}"))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

const LIMIT: Duration = Duration::from_secs(30);

/// Every file under `dir` (relative name → content): what a command must leave alone.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(format!("{name}/"), Vec::new());
                walk(root, &p, out);
            } else {
                out.insert(name, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn names(s: &BTreeMap<String, Vec<u8>>) -> Vec<&str> {
    s.keys().map(String::as_str).collect()
}

/// `nowcast udp` of one burst of 5 probes to `server` archiving to `archive`.
fn udp(server: &Server, archive: &Path) -> Output {
    nowcast(
        &[
            "udp",
            &server.udp,
            "--probes",
            "5",
            "--interval",
            "1",
            "--archive",
            path(archive),
        ],
        LIMIT,
    )
}

fn records_in(db: &Path) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .unwrap()
}

fn segments(spool: &Path) -> usize {
    std::fs::read_dir(spool).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "seg")
        })
        .count()
    })
}

#[test]
fn tcp_and_udp_refuse_an_archive_that_cannot_be_one_before_probing() {
    let dir = temp("refused");
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let adir = dir.join("adir");
    std::fs::create_dir(&adir).unwrap();
    let csv = dir.join("notdb.csv");
    std::fs::write(&csv, "time,value\n1,2\n").unwrap();
    let missing = dir.join("no/such/a.sqlite");
    let cases: [(&Path, String); 3] = [
        (
            &adir,
            format!("{}: a directory, not an archive file", path(&adir)),
        ),
        (
            &csv,
            format!("{}: not a nowcast archive (not a SQLite file)", path(&csv)),
        ),
        (
            &missing,
            format!(
                "{}: create: no such directory {}",
                path(&missing),
                path(&dir.join("no/such"))
            ),
        ),
    ];
    for (archive, said) in &cases {
        let before = snapshot(&dir);
        for out in [
            udp(&server, archive),
            nowcast(
                &[
                    "tcp",
                    &server.tcp,
                    "--count",
                    "1",
                    "--size",
                    "64K",
                    "--archive",
                    path(archive),
                ],
                LIMIT,
            ),
        ] {
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(err.contains(said.as_str()), "{err}");
            // Refused at the start: nothing probed, nothing spooled, nothing made.
            assert_eq!(text(&out.stdout), "", "{err}");
            assert_eq!(snapshot(&dir), before, "{err}");
        }
    }
}

#[test]
fn records_that_do_not_go_in_are_said_at_the_end_and_wait_in_the_spool() {
    let dir = temp("later");
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let db = dir.join("a.sqlite");
    let spool = dir.join("a.sqlite.spool/sqlite");
    let out = udp(&server, &db);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first = records_in(&db);
    assert!(first > 0);
    assert_eq!(segments(&spool), 0);
    // The archive opens, and then refuses every record written to it.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON records \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
        )
        .unwrap();
    let out = udp(&server, &db);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    // The run measured, and says where its records are.
    assert!(
        text(&out.stdout).contains("rtt ms"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        err.contains(&format!("{}: ", path(&db)))
            && err.contains("not archived (write: refused by the test")
            && err.contains(&format!("they wait in {}", path(&spool))),
        "{err}"
    );
    assert_eq!(records_in(&db), first);
    assert!(segments(&spool) > 0, "{err}");
    // Once the archive takes records again, the next run brings the spool in with its own.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("DROP TRIGGER refuse")
        .unwrap();
    let out = udp(&server, &db);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(records_in(&db), 3 * first);
    // The spool, emptied, is gone with its folder.
    assert_eq!(names(&snapshot(&dir)), ["a.sqlite"]);
}

/// A campaign configuration whose archive is `db` (beside it, as its default is).
fn campaign_config(dir: &Path, db: &str) -> PathBuf {
    let cfg = dir.join("lab.toml");
    std::fs::write(
        &cfg,
        format!(
            "name = \"lab\"\n\n[archive]\nsqlite = \"{db}\"\n\n[[targets]]\nname = \"t\"\n\
             host = \"127.0.0.1\"\nport = 9\n\n[[probes]]\nname = \"rtt\"\nkind = \"udp\"\n\
             every = \"1m\"\n"
        ),
    )
    .unwrap();
    cfg
}

/// The reads of an archive: the three questions, an export, the report, a campaign's
/// status.
fn reads(db: &Path, cfg: &Path) -> Vec<Vec<String>> {
    let a = path(db).to_string();
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    vec![
        owned(&["archive", "query", "latest", "--archive", &a]),
        owned(&["archive", "query", "day", "2026-01-01", "--archive", &a]),
        owned(&["archive", "query", "hourly", "h:1", "rtt", "--archive", &a]),
        owned(&["archive", "export", "--archive", &a]),
        owned(&["report", "--archive", &a]),
        owned(&["campaign", "status", path(cfg)]),
    ]
}

fn run(args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    nowcast(&args, LIMIT)
}

#[test]
fn a_read_leaves_the_folder_and_the_archive_as_it_found_them() {
    let dir = temp("reads");
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let db = dir.join("x.sqlite");
    assert_eq!(udp(&server, &db).status.code(), Some(0));
    // Every record in: no empty spool left beside the archive.
    assert_eq!(names(&snapshot(&dir)), ["x.sqlite"]);
    let cfg = campaign_config(&dir, "x.sqlite");
    let before = snapshot(&dir);
    assert_eq!(names(&before), ["lab.toml", "x.sqlite"]);
    for args in reads(&db, &cfg) {
        let out = run(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let after = snapshot(&dir);
        assert_eq!(names(&after), names(&before), "{args:?}");
        assert!(after == before, "{args:?} changed the archive");
    }
}

#[test]
fn a_file_that_is_not_an_archive_is_named_and_left_alone() {
    let dir = temp("not");
    let empty = dir.join("e.sqlite");
    std::fs::write(&empty, "").unwrap();
    let csv = dir.join("t.csv");
    std::fs::write(&csv, "time,value\n1,2\n").unwrap();
    let other = dir.join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (t TEXT); CREATE TABLE series (x)")
        .unwrap();
    let cases = [
        (
            &empty,
            "not a nowcast archive (an empty file: no table series, records or runs)",
        ),
        (&csv, "not a nowcast archive (not a SQLite file)"),
        (
            &other,
            "not a nowcast archive (a SQLite database of the tables notes, series: no table \
             records or runs)",
        ),
    ];
    for (file, said) in cases {
        let cfg = campaign_config(&dir, file.file_name().unwrap().to_str().unwrap());
        let before = snapshot(&dir);
        for args in reads(file, &cfg) {
            let out = run(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(
                err.contains(&format!("{}: {said}", path(file))),
                "{args:?}: {err}"
            );
            assert!(snapshot(&dir) == before, "{args:?} changed {}", path(file));
        }
    }
    // Nor is one written to: an import adds no archive's tables to someone else's database.
    let recs = one_record(&dir, "r.ndjson");
    let before = snapshot(&dir);
    for file in [&csv, &other] {
        let out = nowcast(
            &["archive", "import", path(&recs), "--archive", path(file)],
            LIMIT,
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("not a nowcast archive"), "{err}");
        assert!(snapshot(&dir) == before, "{err}");
    }
}

#[test]
fn an_import_makes_no_archive_for_nothing_and_no_folder() {
    let dir = temp("import");
    let db = dir.join("lab3.sqlite");
    let bad = dir.join("bad.ndjson");
    std::fs::write(&bad, "not a record\n").unwrap();
    let good = one_record(&dir, "r.ndjson");
    let before = snapshot(&dir);
    for input in [dir.join("nosuch.ndjson"), bad.clone()] {
        let out = nowcast(
            &["archive", "import", path(&input), "--archive", path(&db)],
            LIMIT,
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(path(&input)), "{err}");
        assert!(
            snapshot(&dir) == before,
            "{err}: {:?}",
            names(&snapshot(&dir))
        );
    }
    // A folder that does not exist is named, not made.
    let deep = dir.join("no/such/dir/a.sqlite");
    let out = nowcast(
        &["archive", "import", path(&good), "--archive", path(&deep)],
        LIMIT,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{}: create: no such directory {}",
            path(&deep),
            path(&dir.join("no/such/dir"))
        )),
        "{err}"
    );
    assert!(snapshot(&dir) == before, "{err}");
    // Records to import make it.
    let out = nowcast(
        &["archive", "import", path(&good), "--archive", path(&db)],
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(records_in(&db), 1);
}
