//! The archive's errors through the real `nowcast`, each in one line naming what failed and
//! why: a ClickHouse URL where a server takes the connection and says nothing, where
//! another HTTP server answers with its page, or whose host never answers the connection
//! (root only: a namespace that drops the SYNs); a damaged SQLite file; a full disk under the
//! archive (a small tmpfs, root only), with how much of an import went in; a
//! write-protected archive; and a time range that ends before it starts.

use crate::common;

use common::netns::Netns;
use common::{is_root, nowcast, run_bounded, sh, text, TempDir, Tmpfs, BIN};
use nowcast::archive::clickhouse::{Clickhouse, ClickhouseConfig};
use nowcast::archive::query::Filter;
use nowcast_core::record::{Metric, Record};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const T0: f64 = 1_767_225_600_000.0; // 2026-01-01T00:00:00Z

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `n` records of five targets, one a second, as NDJSON at `dir/name`.
fn records_file(dir: &Path, name: &str, n: usize) -> PathBuf {
    let p = dir.join(name);
    let mut body = String::new();
    for i in 0..n {
        let to = format!("10.0.0.{}:8060", i % 5);
        let r = Record::new(
            T0 + i as f64 * 1_000.5,
            "nowcast tcp",
            Metric::Rtt,
            20.0 + (i % 7) as f64,
            &to,
        );
        body.push_str(&r.to_line());
        body.push('\n');
    }
    std::fs::write(&p, body).unwrap();
    p
}

/// A loopback listener that answers each connection with `answer` (nothing at all when
/// `None`, the connection held open) until the test ends.
fn listener(answer: Option<&'static str>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            match answer {
                None => held.push(c),
                Some(a) => {
                    let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut buf = [0u8; 65536];
                    let _ = c.read(&mut buf);
                    let _ = c.write_all(a.as_bytes());
                }
            }
        }
    });
    url
}

/// The one line of standard error of a failed run, asserted to be one line.
fn one_error(out: &Output) -> String {
    let err = text(&out.stderr);
    assert!(
        !out.status.success(),
        "succeeded: {err} {}",
        text(&out.stdout)
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "more than one line: {err}"
    );
    err
}

#[test]
fn a_clickhouse_that_says_nothing_is_given_up_on_and_said() {
    let url = listener(None);
    let dir = TempDir::new("archive-silent");
    let file = records_file(&dir, "r.ndjson", 10);
    // The library as the campaign's shipper uses it, with its configured timeout: every
    // kind of request gives up on time.
    let ch = Clickhouse::new(ClickhouseConfig {
        url: url.clone(),
        database: "nowcast".into(),
        user: None,
        password: None,
        timeout: Duration::from_secs(1),
    })
    .unwrap();
    let want = format!("no HTTP answer from {url} within 1 s");
    let started = Instant::now();
    let e = ch.ensure_schema().unwrap_err();
    assert!(format!("{e:#}").contains(&want), "{e:#}");
    let e = ch.records(&Filter::default(), &mut |_| Ok(())).unwrap_err();
    assert!(format!("{e:#}").contains(&want), "{e:#}");
    let recs = vec![Record::new(T0, "nowcast tcp", Metric::Rtt, 1.0, "h:1")];
    let e = ch.write(&recs, &[]).unwrap_err();
    assert!(format!("{e:#}").contains(&want), "{e:#}");
    let e = ch.latest().unwrap_err();
    assert!(format!("{e:#}").contains(&want), "{e:#}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    // The commands, at once: each says within its wait (30 s unless told; 2 s here) what
    // it waited for.
    let wait = ["--clickhouse-timeout", "2"];
    let runs: Vec<_> = [
        vec!["archive", "query", "latest", "--clickhouse", &url],
        vec!["archive", "export", "--clickhouse", &url],
        vec!["archive", "import", path(&file), "--clickhouse", &url],
        vec!["report", "--clickhouse", &url],
    ]
    .into_iter()
    .map(|args| {
        let args: Vec<String> = args.iter().chain(&wait).map(|a| a.to_string()).collect();
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let t = Instant::now();
            let out = nowcast(&args, Duration::from_secs(60));
            (args.join(" "), out, t.elapsed())
        })
    })
    .collect();
    let want = format!("nowcast: no HTTP answer from {url} within 2 s");
    for r in runs {
        let (args, out, took) = r.join().unwrap();
        let err = one_error(&out);
        assert!(err.contains(&want), "{args}: {err}");
        assert!(took < Duration::from_secs(10), "{args}: {took:?}");
    }
}

/// A ClickHouse whose host never answers the connection (its SYNs dropped, as a firewall
/// does): given up on at the 5 s connection limit, not the 30 s answer timeout, and said as no
/// connection. Root only: a namespace of its own, its loopback up, nftables dropping the SYNs
/// to ClickHouse's port there.
#[test]
fn a_clickhouse_host_that_never_answers_the_connection_is_given_up_on_in_5_s() {
    if !is_root() {
        eprintln!("skipped: needs root (a network namespace of its own and nftables)");
        return;
    }
    let ns = format!("nwc-chsyn-{}", std::process::id());
    let net = Netns::new(std::slice::from_ref(&ns));
    let nft = |rule: &[&str]| sh(&[&["ip", "netns", "exec", &ns, "nft"][..], rule].concat());
    nft(&["add", "table", "inet", "t"]);
    nft(&[
        "add",
        "chain",
        "inet",
        "t",
        "in",
        "{ type filter hook input priority 0; }",
    ]);
    nft(&[
        "add", "rule", "inet", "t", "in", "tcp", "dport", "8123", "drop",
    ]);
    let url = "http://127.0.0.1:8123";
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns, BIN, "archive", "query", "latest"])
        .args(["--clickhouse", url]);
    let started = Instant::now();
    let out = run_bounded(cmd, Duration::from_secs(60));
    let took = started.elapsed();
    drop(net);
    let err = one_error(&out);
    assert!(
        err.contains(&format!(
            "nowcast: no connection to ClickHouse at {url} within 5 s"
        )),
        "{err}"
    );
    assert!(
        took >= Duration::from_millis(4_500) && took < Duration::from_secs(12),
        "{took:?}"
    );
}

#[test]
fn a_url_where_another_http_server_answers_is_said_in_one_short_line() {
    const PAGE: &str = "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n\
        <title>404 Not Found</title>\n</head>\n<body>\n<h1>Not Found</h1>\n\
        <p>The requested URL was not found on this server.</p>\n<hr>\n\
        <address>Apache/2.4.62 (Debian) Server at 127.0.0.1 Port 80</address>\n\
        </body>\n</html>\n";
    let dir = TempDir::new("archive-html");
    let file = records_file(&dir, "r.ndjson", 10);
    let answers: [&'static str; 2] = [
        Box::leak(
            format!(
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{PAGE}",
                PAGE.len()
            )
            .into_boxed_str(),
        ),
        // A success from it too: nothing was written.
        Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{PAGE}",
                PAGE.len()
            )
            .into_boxed_str(),
        ),
    ];
    for answer in answers {
        let url = listener(Some(answer));
        for args in [
            vec!["archive", "query", "latest", "--clickhouse", &url],
            vec!["archive", "import", path(&file), "--clickhouse", &url],
        ] {
            let out = nowcast(&args, Duration::from_secs(20));
            let err = one_error(&out);
            assert!(
                err.contains(&format!("nowcast: {url} does not look like ClickHouse"))
                    && err.contains("no X-ClickHouse-* headers and an HTML page"),
                "{args:?}: {err}"
            );
            assert!(!err.contains('<') && err.len() < 300, "{args:?}: {err}");
        }
    }
}

/// An archive of 5,000 records at `dir/name`.
fn archive_of(dir: &Path, name: &str) -> PathBuf {
    let db = dir.join(name);
    let file = records_file(dir, &format!("{name}.ndjson"), 5_000);
    let out = nowcast(
        &["archive", "import", path(&file), "--archive", path(&db)],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    db
}

#[test]
fn a_damaged_archive_is_named_as_damaged() {
    let dir = TempDir::new("archive-damaged");
    let db = archive_of(&dir, "c.sqlite");
    let file = records_file(&dir, "more.ndjson", 100);
    // 8,000 bytes of noise from byte 20,000: pages of the index of series, which these
    // read (an export reads the table alone, in key order).
    let mut bytes = std::fs::read(&db).unwrap();
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in &mut bytes[20_000..28_000] {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *b = s as u8;
    }
    std::fs::write(&db, bytes).unwrap();
    let want = format!(
        "{} is damaged (not a valid SQLite database: database disk image is malformed); \
         could not read it",
        db.display()
    );
    for args in [
        vec!["archive", "query", "latest", "--archive", path(&db)],
        vec!["archive", "import", path(&file), "--archive", path(&db)],
        vec!["report", "--archive", path(&db)],
    ] {
        let out = nowcast(&args, Duration::from_secs(30));
        let err = one_error(&out);
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(!err.contains("Error code"), "{args:?}: {err}");
    }
}

/// The count `nowcast: the import stopped after N records went in` says.
fn went_in(err: &str) -> usize {
    let after = err
        .split("the import stopped after ")
        .nth(1)
        .unwrap_or_else(|| panic!("no count: {err}"));
    after.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_full_disk_under_the_archive_is_said_with_what_went_in() {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs takes root");
        return;
    }
    let dir = TempDir::new("archive-full");
    let file = records_file(&dir, "many.ndjson", 5_000);
    let mnt = Tmpfs::mount(&dir.join("mnt"), "200k");
    let db = mnt.0.join("s.sqlite");
    let full = format!("no space left on the disk holding {}", db.display());
    let import = |extra: &[&str]| {
        let mut args = vec!["archive", "import", path(&file), "--archive", path(&db)];
        args.extend_from_slice(extra);
        nowcast(&args, Duration::from_secs(60))
    };

    // One batch: nothing went in, and that is said.
    let err = one_error(&import(&[]));
    assert!(
        err.contains("the import stopped before any record went in") && err.contains(&full),
        "{err}"
    );
    for f in ["s.sqlite", "s.sqlite-wal", "s.sqlite-shm"] {
        let _ = std::fs::remove_file(mnt.0.join(f));
    }

    // Batches of 1,000: those committed are counted, and the same import again, with room,
    // adds only the rest.
    let err = one_error(&import(&["--batch", "1000"]));
    assert!(
        err.contains(&full) && err.contains("adds only the rest"),
        "{err}"
    );
    let committed = went_in(&err);
    assert!((1_000..5_000).contains(&committed), "{err}");

    // A read where not even the -shm file can be made.
    let _ = std::fs::remove_file(mnt.0.join("s.sqlite-shm"));
    let filler = mnt.0.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    while f.write_all(&[0u8; 4096]).is_ok() {}
    drop(f);
    let out = nowcast(
        &["archive", "query", "latest", "--archive", path(&db)],
        Duration::from_secs(30),
    );
    let err = one_error(&out);
    assert!(
        err.contains(&format!("{full} (could not open it)")),
        "{err}"
    );
    std::fs::remove_file(&filler).unwrap();

    mnt.remount("size=4m");
    let out = import(&["--batch", "1000"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{} records imported into {}, {committed} already in it",
            5_000 - committed,
            db.display()
        )),
        "{err}"
    );
}

#[test]
fn a_write_protected_archive_is_said_before_anything_is_read() {
    let dir = TempDir::new("archive-protected");
    let db = archive_of(&dir, "r.sqlite");
    let file = records_file(&dir, "more.ndjson", 100);
    let mut perms = std::fs::metadata(&db).unwrap().permissions();
    use std::os::unix::fs::PermissionsExt;
    perms.set_mode(0o444);
    std::fs::set_permissions(&db, perms).unwrap();
    let args = ["archive", "import", path(&file), "--archive", path(&db)];
    // Root writes any file: the import runs as nobody there.
    let out = if is_root() {
        for p in [&dir.0, &db, &file] {
            let mut m = std::fs::metadata(p).unwrap().permissions();
            m.set_mode(m.mode() | 0o555);
            std::fs::set_permissions(p, m).unwrap();
        }
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .args(args);
        common::run_bounded(cmd, Duration::from_secs(30))
    } else {
        nowcast(&args, Duration::from_secs(30))
    };
    let err = one_error(&out);
    assert_eq!(
        err.trim_end(),
        format!(
            "nowcast: {}: open: it cannot be written (write-protected, or on a read-only mount)",
            db.display()
        )
    );
    let beside: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("-wal") || n.contains("-shm"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
}

#[test]
fn a_range_that_ends_before_it_starts_is_refused() {
    let dir = TempDir::new("archive-range");
    let db = archive_of(&dir, "a.sqlite");
    for args in [
        vec!["archive", "export", "--since", "7d", "--until", "30d"],
        vec!["report", "--since", "7d", "--until", "30d"],
        vec![
            "archive",
            "query",
            "hourly",
            "10.0.0.1:8060",
            "rtt",
            "--since",
            "7d",
            "--until",
            "30d",
        ],
    ] {
        let mut args = args.clone();
        args.extend_from_slice(&["--archive", path(&db)]);
        let out = nowcast(&args, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("error: --since 7d (") && err.contains(") is after --until 30d ("),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Dates too, and a range of one day the right way round is still fine.
    let out = nowcast(
        &[
            "archive",
            "export",
            "--since",
            "2026-01-02",
            "--until",
            "2026-01-01",
            "--archive",
            path(&db),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("--since 2026-01-02T00:00:00Z is after --until 2026-01-01T00:00:00Z"),
        "{}",
        text(&out.stderr)
    );
    let out = nowcast(
        &[
            "archive",
            "export",
            "--since",
            "2026-01-01",
            "--until",
            "2026-01-02",
            "--archive",
            path(&db),
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 5_000);
}
