//! A campaign's archive when things go wrong under it, through the real `nowcast`: a full
//! disk under the spool (a small tmpfs, root only) holds the records in memory, says so, and
//! writes them once the disk has room, losing nothing and stopping nothing; a destination
//! that refuses writes (ClickHouse with a wrong password, or not there) is said at once,
//! naming why; a database name ClickHouse cannot take is refused by `check`; and a
//! write-protected archive or one on a read-only mount is read, leaving nothing beside it.

use crate::common;

use common::campaign::Running;

use common::clickhouse::ClickhouseServer;
use common::{is_root, nowcast, text, Server, TempDir, Tmpfs, BIN};
use nowcast::archive::sqlite::Sqlite;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Fills the file system of `dir` with `dir/filler` until it is full.
fn fill(dir: &Path) -> PathBuf {
    let p = dir.join("filler");
    let mut f = std::fs::File::create(&p).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    p
}

/// A campaign of one TCP probe every second to `server`, archived at `db`.
fn config(dir: &Path, name: &str, server: &str, archive: &str) -> PathBuf {
    let (host, port) = server.rsplit_once(':').unwrap();
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "name = \"{name}\"\nshutdown_grace = \"3s\"\n\n[archive]\n{archive}\n\n\
             [[targets]]\nname = \"t\"\nhost = \"{host}\"\nport = {port}\n\n\
             [[probes]]\nname = \"rtt\"\nkind = \"tcp\"\nevery = \"1s\"\ntimeout = \"900ms\"\n"
        ),
    )
    .unwrap();
    cfg
}

#[test]
fn a_full_disk_under_the_spool_holds_the_records_says_so_and_loses_nothing() {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let dir = TempDir::new("campaign-full-disk");
    let mnt = dir.join("mnt");
    let mount = Tmpfs::mount(&mnt, "1m");
    let server = Server::start(&["--bind", "127.0.0.1"]);
    let db = mnt.join("full.sqlite");
    let cfg = config(
        &dir,
        "full",
        &server.tcp,
        &format!("sqlite = \"{}\"", db.display()),
    );
    let mut c = Running::start(&cfg);
    assert!(
        c.line("nowcast campaign full", Duration::from_secs(10))
            .is_some(),
        "{}",
        c.all()
    );
    std::thread::sleep(Duration::from_millis(2_500));
    let filler = fill(&mnt);
    // The next run's lines do not fit: held in memory, and said, naming the spool and why
    // (the SQLite file on the same disk may be said to refuse its writes first).
    let said = c
        .line("held in memory", Duration::from_secs(15))
        .unwrap_or_else(|| panic!("nothing said of the full disk: {}", c.all()));
    assert!(
        said.starts_with("archive sqlite: the spool ")
            && said.contains("No space left on device")
            && said.contains("held in memory until it can"),
        "{said}"
    );
    // The campaign goes on measuring while the disk is full.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        c.alive(),
        "the campaign stopped on a full disk: {}",
        c.all()
    );
    std::fs::remove_file(&filler).unwrap();
    let back = c
        .line("written again", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("the recovery was not said: {}", c.all()));
    assert!(back.contains("nothing lost"), "{back}");
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(c.stop(Duration::from_secs(15)), "{}", c.all());
    let all = c.all();
    assert!(!all.contains("lost:"), "{all}");
    let stopped = c.line("stopped: ", Duration::ZERO).unwrap();
    // Every slot is in the run log, one row each, ids without a gap, and every ok run's
    // records are there.
    let mut a = Sqlite::open_read(&db).unwrap();
    let rows = a.runs("full", 0).unwrap();
    let mut ids: Vec<u64> = rows.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..rows.len() as u64).collect::<Vec<_>>(), "{all}");
    let slots: u64 = rows.iter().map(|r| r.slots).sum();
    let logged: u64 = stopped
        .trim_start_matches("stopped: ")
        .split(", ")
        .map(|p| p.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(slots, logged, "{stopped}");
    let ok = rows
        .iter()
        .filter(|r| r.outcome == nowcast::runlog::Outcome::Ok)
        .count() as u64;
    assert!(ok >= 6, "{ok} ok runs: {all}");
    // A TCP session gives handshake_rtt, rtt and rtt_nagle.
    assert!(a.count().unwrap() >= 3 * ok, "{}", a.count().unwrap());
    drop(a);
    drop(mount);
}

#[test]
fn a_destination_that_refuses_writes_is_said_at_once_with_why() {
    let dir = TempDir::new("campaign-refused");
    let server = Server::start(&["--bind", "127.0.0.1"]);
    // Nothing listens on this port: ClickHouse is not there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = dir.join("a.sqlite");
    let cfg = config(
        &dir,
        "down",
        &server.tcp,
        &format!(
            "sqlite = \"{}\"\n[archive.clickhouse]\nurl = \"http://127.0.0.1:{port}\"\ntimeout = \"2s\"",
            db.display()
        ),
    );
    let mut c = Running::start(&cfg);
    let said = c
        .line("archive clickhouse:", Duration::from_secs(10))
        .unwrap_or_else(|| panic!("nothing said of ClickHouse: {}", c.all()));
    assert!(
        said.contains(&format!(
            "ClickHouse http://127.0.0.1:{port} cannot be written"
        )) && said.contains("retried with back-off"),
        "{said}"
    );
    assert!(c.stop(Duration::from_secs(15)), "{}", c.all());
    // The wait for the archive after the grace is said, with what waits, then what is left.
    let drain = c
        .line(
            "stopping: the archive gets up to 5s to write what waits in its spool (",
            Duration::ZERO,
        )
        .unwrap_or_else(|| panic!("the archive's drain not said: {}", c.all()));
    assert!(drain.contains("clickhouse: "), "{drain}");
    assert!(
        c.line("records not archived", Duration::ZERO).is_some(),
        "{}",
        c.all()
    );

    // A wrong password, on a real server: its refusal is said while the campaign runs.
    let ch = match ClickhouseServer::start(0) {
        Ok(ch) => ch,
        Err(why) => {
            eprintln!("the wrong password part skipped: {why}");
            return;
        }
    };
    let cfg = config(
        &dir,
        "badpw",
        &server.tcp,
        &format!(
            "sqlite = \"{}\"\n[archive.clickhouse]\nurl = \"{}\"\nuser = \"default\"\npassword = \"wrong\"",
            dir.join("b.sqlite").display(),
            ch.url()
        ),
    );
    let mut c = Running::start(&cfg);
    let said = c
        .line("archive clickhouse:", Duration::from_secs(15))
        .unwrap_or_else(|| panic!("nothing said of ClickHouse: {}", c.all()));
    assert!(said.contains("Wrong password"), "{said}");
    assert!(c.stop(Duration::from_secs(15)), "{}", c.all());
}

#[test]
fn a_database_name_clickhouse_cannot_take_is_refused_by_check() {
    let dir = TempDir::new("campaign-bad-db");
    let cfg = config(
        &dir,
        "baddb",
        "127.0.0.1:9",
        "[archive.clickhouse]\nurl = \"http://127.0.0.1:9\"\ndatabase = \"no-such db\"",
    );
    let out = nowcast(
        &["campaign", "check", cfg.to_str().unwrap()],
        Duration::from_secs(10),
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("archive.clickhouse.database: 'no-such db' is not a ClickHouse name"),
        "{err}"
    );
}

/// The names of the files in `dir`.
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// An archive of one record at `db`, closed (no `-wal` or `-shm` left).
fn archive_at(db: &Path) {
    let rec = nowcast_core::record::Record::new(
        1_767_225_600_000.0,
        "nowcast tcp",
        nowcast_core::record::Metric::Rtt,
        1.5,
        "h:1",
    );
    let mut a = Sqlite::open(db).unwrap();
    a.write(&[rec], &[], None, 0).unwrap();
}

const READS: [&[&str]; 3] = [
    &["archive", "query", "latest", "--archive"],
    &["archive", "export", "--archive"],
    &["report", "--archive"],
];

#[test]
fn a_write_protected_or_read_only_mounted_archive_is_read_and_left_alone() {
    if !is_root() {
        eprintln!("skipped: a read-only mount and reading as another user need root");
        return;
    }
    let dir = TempDir::new("campaign-ro-archive");
    // On a read-only mount: SQLite cannot make the `-shm` a WAL file needs.
    let mnt = dir.join("ro");
    let mount = Tmpfs::mount(&mnt, "4m");
    let db = mnt.join("a.sqlite");
    archive_at(&db);
    assert_eq!(files(&mnt), ["a.sqlite"]);
    mount.remount("ro");
    for read in READS {
        let mut args = read.to_vec();
        args.push(db.to_str().unwrap());
        let out = nowcast(&args, Duration::from_secs(20));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("h:1"), "{args:?}");
    }
    assert_eq!(files(&mnt), ["a.sqlite"]);
    drop(mount);

    // A write-protected file read by a user who may write its folder: nothing is left
    // beside it (a read-only connection would leave its `-wal` and `-shm` files).
    let own = dir.join("own");
    std::fs::create_dir_all(&own).unwrap();
    let db = own.join("a.sqlite");
    archive_at(&db);
    let nobody = 65_534;
    std::os::unix::fs::chown(&own, Some(nobody), Some(nobody)).unwrap();
    std::os::unix::fs::chown(&db, Some(nobody), Some(nobody)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    // The binary must be reachable for nobody.
    if Command::new(BIN)
        .arg("--version")
        .uid(nobody)
        .gid(nobody)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!("the write-protected part skipped: user nobody cannot run {BIN}");
        return;
    }
    for read in READS {
        let out = common::run_bounded(
            {
                let mut c = Command::new(BIN);
                c.args(read).arg(&db).uid(nobody).gid(nobody);
                c
            },
            Duration::from_secs(20),
        );
        assert!(out.status.success(), "{read:?}: {}", text(&out.stderr));
        assert_eq!(files(&own), ["a.sqlite"], "{read:?}");
    }
}

use std::os::unix::process::CommandExt;
