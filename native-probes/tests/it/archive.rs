//! The archive: import and export through the command (bad lines named, the rest kept;
//! the page's formats), and the same questions answered alike by SQLite and a real
//! ClickHouse server started by the test, which is also down for a while first: records
//! wait in the spool and arrive once it is up.

use crate::common;

use common::clickhouse::ClickhouseServer;
use common::{nowcast, text};
use nowcast::archive::clickhouse::{Clickhouse, ClickhouseConfig};
use nowcast::archive::query::{close, Filter};
use nowcast::archive::sqlite::Sqlite;
use nowcast::archive::{Archive, ArchiveConfig};
use nowcast::runlog::{Outcome, RunLog};
use nowcast_core::record::{
    ClassifierMetric, Congestion, CongestionAction, LossCount, Metric, Probe, Record,
    RecordForecast, Selector, Status, Transport,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const T0: f64 = 1_767_225_600_000.0; // 2026-01-01T00:00:00Z
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// A test's directory, removed when the test ends (passed or failed).
struct Dir(PathBuf);

impl std::ops::Deref for Dir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Dir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("nowcast-archive-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `nowcast archive import FILES… --batch 1000` and the archive's flags; asserts it
/// succeeded and returns its standard error.
fn import(files: &[&Path], archive: &[&str]) -> String {
    let mut args = vec!["archive", "import"];
    args.extend(files.iter().map(|f| path(f)));
    args.extend_from_slice(archive);
    args.extend_from_slice(&["--batch", "1000"]);
    let out = nowcast(&args, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    err
}

/// `nowcast archive export` of the SQLite file (NDJSON, in time order), with `extra` flags.
fn export(db: &Path, extra: &[&str]) -> String {
    let mut args = vec!["archive", "export", "--archive", path(db)];
    args.extend_from_slice(extra);
    let out = nowcast(&args, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The lines of an NDJSON file of `records` with copies that test an import: a record
/// twice where `--batch 1000` would cut a batch between them (identical records of one
/// file are kept), a value of -0 (SQLite keeps it as 0) and an empty probe object (kept as
/// no probe).
fn import_lines(records: &[Record]) -> Vec<String> {
    let mut lines: Vec<String> = records.iter().map(Record::to_line).collect();
    let mut zero = Record::new(T0 + 5.5, "nowcast udp", Metric::Loss, -0.0, "10.0.0.9:8060");
    zero.seq = Some(1);
    let mut empty =
        Record::new(T0 + 6.5, "nowcast udp", Metric::Loss, 0.5, "10.0.0.9:8060").to_line();
    empty.pop();
    empty.push_str(",\"probe\":{}}");
    assert!(Record::parse(&empty).unwrap().probe.is_some());
    lines.insert(5, zero.to_line());
    lines.insert(6, empty);
    // The 1000th line again: the first batch is full with the first copy.
    lines.insert(1000, lines[999].clone());
    lines
}

/// Three days of five targets' rtt, throughput and loss every 10 minutes, with timeouts,
/// errors, forecasts and probe details.
fn synthetic() -> Vec<Record> {
    let mut out = Vec::new();
    let mut s: u64 = 7;
    let mut rnd = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    for k in 0..(3 * 144) {
        for t in 0..5 {
            let ts = T0 + (k * 600_000) as f64 + t as f64 * 1_000.0 + 0.25;
            let to = format!("10.0.0.{t}:8060");
            let mut rtt = Record::new(ts, "nowcast tcp", Metric::Rtt, 20.0 + 5.0 * rnd(), &to);
            rtt.seq = Some(k as u64);
            rtt.period_ms = Some(600_000.0);
            rtt.probe = Some(Probe {
                transport: Some(Transport::Tcp),
                payload_bytes: Some(2),
                nagle: Some(false),
                ..Probe::default()
            });
            rtt.forecast = Some(RecordForecast {
                value: 22.0,
                method: "median_5".into(),
                selector: Selector::Mse,
                error: 1.5,
            });
            if rnd() < 0.05 {
                rtt.status = Status::Timeout;
                rtt.value = None;
                rtt.timeout_ms = Some(1000.0);
                rtt.error = Some("rtt timed out \"quoted\", \\ and ü".into());
            }
            out.push(rtt);
            let mut tp = Record::new(
                ts + 0.5,
                "iperf3",
                Metric::Throughput,
                300.0 + 100.0 * rnd(),
                &format!("10.0.0.{t}:5201"),
            );
            tp.probe = Some(Probe {
                streams: Some(4),
                sndbuf_bytes: Some(1 << 20),
                raw_ms: Some(10_000.0),
                ..Probe::default()
            });
            if rnd() < 0.03 {
                tp.status = Status::Error;
                tp.value = None;
                tp.error = Some("iperf3: connection refused".into());
            }
            out.push(tp);
            let mut loss = Record::new(
                ts + 0.75,
                "nowcast udp",
                Metric::Loss,
                (rnd() * 0.1 * 1000.0).round() / 1000.0,
                &to,
            );
            // Now and then a FOBS congestion event (schema 1.2), its object kept whole.
            if k % 10 == 0 {
                loss.source = "nowcast fobs".into();
                loss.congestion = Some(Congestion {
                    signature_loss_rate: rnd() * 0.05,
                    classifier_metric: ClassifierMetric::Complexity,
                    metric_value: Some(rnd()),
                    p_cpu: (t % 2 == 0).then(&mut rnd),
                    action: CongestionAction::RateFromResponse,
                    long_term_loss_rate: rnd() * 0.01,
                    loss_count: [None, Some(LossCount::Events), Some(LossCount::Packets)][t % 3],
                    rate_mbit_s: 900.0 * rnd(),
                });
            }
            out.push(loss);
        }
    }
    out
}

fn runs() -> Vec<RunLog> {
    (0..50)
        .map(|i| RunLog {
            id: i,
            campaign: "c'1".into(),
            job: format!("t{}/rtt", i % 3),
            target: format!("t{}", i % 3),
            probe: "rtt".into(),
            nominal_ms: T0 as i64 + i as i64 * 60_000,
            due_ms: T0 as i64 + i as i64 * 60_000 + 5,
            started_ms: (i % 7 != 0).then_some(T0 as i64 + i as i64 * 60_000 + 6),
            ended_ms: T0 as i64 + i as i64 * 60_000 + 50,
            outcome: if i % 7 == 0 {
                Outcome::Missed
            } else {
                Outcome::Ok
            },
            reason: (i % 7 == 0).then(|| "the link was busy".to_string()),
            slots: 1,
            gate_check: false,
        })
        .collect()
}

#[test]
fn import_names_bad_lines_and_export_gives_the_records_back() {
    let dir = temp("import");
    let valid = include_str!("../../../public/schema/examples/valid.ndjson");
    let want: Vec<Record> = valid
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Record::parse(l).unwrap())
        .collect();
    let mut lines: Vec<String> = valid.lines().map(str::to_string).collect();
    lines.insert(2, "{\"schema_version\":\"1.0\",\"timestamp_ms\":1}".into());
    lines.insert(4, "not json".into());
    lines.push(format!("{{\"schema_version\":\"2.0\",{}", "\"x\":1}"));
    let file = dir.join("in.ndjson");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let db = dir.join("a.sqlite");
    let out = nowcast(
        &[
            "archive",
            "import",
            file.to_str().unwrap(),
            "--archive",
            db.to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("line 3: field 'source': is required"), "{err}");
    assert!(err.contains("line 5: not valid JSON"), "{err}");
    assert!(
        err.contains(&format!(
            "line {}: field 'schema_version': version 2.0 is newer",
            lines.len()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{} records imported, 0 already in the archive, 3 bad lines skipped",
            want.len()
        )),
        "{err}"
    );
    let exp = nowcast(
        &["archive", "export", "--archive", db.to_str().unwrap()],
        Duration::from_secs(20),
    );
    let mut got = common::records(&exp);
    let mut want = want.clone();
    let key = |r: &Record| (r.timestamp_ms.to_bits(), r.metric.name());
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want, "the export gives back every record imported");
    let csv = nowcast(
        &[
            "archive",
            "export",
            "--archive",
            db.to_str().unwrap(),
            "--format",
            "csv",
            "--metric",
            "rtt",
        ],
        Duration::from_secs(20),
    );
    let csv = text(&csv.stdout);
    let mut rows = csv.lines();
    // The page's CSV export: time in ms, value, metric, unit, transport, target, title, source,
    // sender.
    assert_eq!(
        rows.next(),
        Some("time,value,metric,unit,transport,to,series,source,from")
    );
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), 9, "{row}");
        assert!(
            cells[0].parse::<f64>().is_ok() && cells[1].parse::<f64>().is_ok(),
            "{row}"
        );
        assert_eq!((cells[2], cells[3]), ("rtt", "ms"), "{row}");
        assert!(cells[6].contains(" rtt ("), "{row}");
        assert!(!cells[7].is_empty(), "{row}");
    }
    // `nowcast forecast` reads it back one series at a time (it averaged every target's
    // values into one series when the export had no metric and target columns).
    let csv_path = dir.join("export.csv");
    std::fs::write(&csv_path, &csv).unwrap();
    let out = nowcast(&["forecast", path(&csv_path)], Duration::from_secs(20));
    let said = text(&out.stderr) + &text(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("series rtt/"), "{said}");
    assert!(said.contains("other series"), "{said}");

    // That CSV imported by mistake, beside a file of records: one line names it, the
    // records of the other file are kept, and the exit status says something was not read.
    let csv_file = dir.join("rtt.csv");
    std::fs::write(&csv_file, &csv).unwrap();
    let db2 = dir.join("b.sqlite");
    let out = nowcast(
        &[
            "archive",
            "import",
            csv_file.to_str().unwrap(),
            file.to_str().unwrap(),
            "--archive",
            db2.to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("rtt.csv: not NDJSON records"), "{err}");
    assert_eq!(
        err.matches("rtt.csv").count(),
        2,
        "named once, then in the verdict: {err}"
    );
    assert!(
        err.contains(&format!("{} records imported", want.len())),
        "{err}"
    );
    let report = nowcast(
        &["report", csv_file.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert!(!report.status.success());
    assert!(text(&report.stderr).contains("rtt.csv: not NDJSON records"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn importing_a_file_again_adds_nothing_and_an_appended_one_only_its_new_lines() {
    let dir = temp("reimport");
    let all = synthetic();
    let lines = import_lines(&all[..4000]);
    let n = lines.len();
    let file = dir.join("f.ndjson");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let db = dir.join("a.sqlite");
    let flags = ["--archive", path(&db)];
    let err = import(&[&file], &flags);
    assert!(
        err.contains(&format!(
            "f.ndjson: {n} records imported, 0 already in the archive, 0 bad lines skipped"
        )),
        "{err}"
    );
    let first = export(&db, &[]);
    assert_eq!(
        first.lines().count(),
        n,
        "the file's two copies of a record are kept"
    );
    // Again: nothing is added, and the archive is as it was.
    let err = import(&[&file], &flags);
    assert!(
        err.contains(&format!(
            "f.ndjson: 0 records imported, {n} already in the archive, 0 bad lines skipped"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "0 records imported into {}, {n} already in it",
            db.display()
        )),
        "{err}"
    );
    assert_eq!(export(&db, &[]), first, "imported again");
    // Appended to since: its new lines only.
    let more: Vec<String> = all[4000..].iter().map(Record::to_line).collect();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(&mut f, (more.join("\n") + "\n").as_bytes()).unwrap();
    drop(f);
    let err = import(&[&file], &flags);
    assert!(
        err.contains(&format!(
            "f.ndjson: {} records imported, {n} already in the archive",
            more.len()
        )),
        "{err}"
    );
    // The same archive as the whole file imported once.
    let once = dir.join("once.sqlite");
    import(&[&file], &["--archive", path(&once)]);
    let whole = export(&once, &[]);
    assert_eq!(whole.lines().count(), n + more.len());
    assert_eq!(export(&db, &[]), whole, "imported in two steps and once");

    // Two exports that overlap (the first two days, the last two), imported together into
    // a new archive: the second's middle day is there already.
    let (d1, d2) = (
        (T0 as i64 + DAY).to_string(),
        (T0 as i64 + 2 * DAY).to_string(),
    );
    let (a, b) = (dir.join("a.ndjson"), dir.join("b.ndjson"));
    std::fs::write(&a, export(&db, &["--until", &d2])).unwrap();
    std::fs::write(&b, export(&db, &["--since", &d1])).unwrap();
    let count = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count();
    let overlap = export(&db, &["--since", &d1, "--until", &d2])
        .lines()
        .count();
    assert!(overlap > 2000, "{overlap}");
    let both = dir.join("both.sqlite");
    let err = import(&[&a, &b], &["--archive", path(&both)]);
    assert!(
        err.contains(&format!(
            "a.ndjson: {} records imported, 0 already in the archive",
            count(&a)
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "b.ndjson: {} records imported, {overlap} already in the archive",
            count(&b) - overlap
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{} records imported into {}, {overlap} already in it",
            n + more.len(),
            both.display()
        )),
        "{err}"
    );
    assert_eq!(export(&both, &[]), whole, "two overlapping exports");
}

/// Two imports of one file into one SQLite archive at the same moment: each reads back
/// what is archived and writes the rest in one transaction, so each record is written once
/// (without it, both found a batch missing and both wrote it).
#[test]
fn two_imports_of_one_file_at_once_write_each_record_once() {
    let dir = temp("at-once");
    let lines: Vec<String> = synthetic().iter().map(Record::to_line).collect();
    let n = lines.len();
    let file = dir.join("f.ndjson");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let db = dir.join("a.sqlite");
    let start = || {
        let (f, d) = (file.clone(), path(&db).to_string());
        std::thread::spawn(move || import(&[&f], &["--archive", &d]))
    };
    let (a, b) = (start(), start());
    // "nowcast: …/f.ndjson: X records imported, Y already in the archive, …"
    let counts = |err: String| -> (usize, usize) {
        let line = err
            .lines()
            .find(|l| l.contains("f.ndjson: "))
            .unwrap_or_else(|| panic!("{err}"))
            .to_string();
        let num = |after: &str| -> usize {
            line[..line.find(after).unwrap_or_else(|| panic!("{line}"))]
                .rsplit(|c: char| !c.is_ascii_digit())
                .find(|w| !w.is_empty())
                .unwrap()
                .parse()
                .unwrap()
        };
        (num(" records imported"), num(" already in the archive"))
    };
    let (a, b) = (counts(a.join().unwrap()), counts(b.join().unwrap()));
    assert_eq!(
        (a.0 + b.0, a.1 + b.1),
        (n, n),
        "imported, already: {a:?} and {b:?}"
    );
    assert_eq!(export(&db, &[]).lines().count(), n);
}

/// Asserts two record lists are equal, naming the first difference only.
fn same(a: &[Record], b: &[Record], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!("{what}: record {i} differs:\n{:?}\n{:?}", a[i], b[i]);
    }
}

fn sorted(mut v: Vec<Record>) -> Vec<Record> {
    v.sort_by(|a, b| {
        a.timestamp_ms
            .total_cmp(&b.timestamp_ms)
            .then(a.to.cmp(&b.to))
            .then(a.metric.name().cmp(b.metric.name()))
    });
    v
}

#[test]
fn sqlite_and_clickhouse_answer_alike_and_a_down_clickhouse_loses_nothing() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = temp("ch");
    let ch_cfg = |db: &str| ClickhouseConfig {
        url: format!("http://127.0.0.1:{port}"),
        database: db.into(),
        user: None,
        password: None,
        timeout: Duration::from_secs(60),
    };
    // ClickHouse down: the records wait in its spool, SQLite has them at once.
    let mut cfg = ArchiveConfig::sqlite(dir.join("live.sqlite"));
    cfg.fsync = false;
    cfg.clickhouse = Some(ch_cfg("live"));
    let mut archive = Archive::start(&cfg).unwrap();
    let early: Vec<Record> = synthetic().into_iter().take(3000).collect();
    for chunk in early.chunks(100) {
        archive.write(chunk, &[]).unwrap();
    }
    archive.write(&[], &runs()).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let st = archive.status();
        let (sq, ch) = (&st[0], &st[1]);
        if sq.backlog == 0 && ch.failures > 0 {
            assert_eq!(ch.backlog, 3050, "{ch:?}");
            assert!(
                ch.last_error.as_deref().unwrap().contains("ClickHouse at"),
                "{ch:?}"
            );
            break;
        }
        assert!(Instant::now() < until, "{st:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The segments waiting for ClickHouse, kept to be shipped again below (as after a crash
    // between an INSERT and the deletion of its segment).
    let spool_ch = cfg.spool.join("clickhouse");
    let kept = dir.join("kept");
    std::fs::create_dir_all(&kept).unwrap();
    let mut kept_lines = 0;
    for seg in nowcast::archive::spool::segments(&spool_ch).unwrap() {
        let s = nowcast::archive::spool::read(&seg).unwrap();
        kept_lines += s.records.len() + s.runs.len();
        std::fs::copy(&seg, kept.join(seg.file_name().unwrap())).unwrap();
    }
    assert_eq!(kept_lines, 3050, "the spool's segments are all closed");
    let server = match ClickhouseServer::start(port) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: ClickHouse cannot start here: {why}");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    // Up: the spool drains (the back-off has grown to a few seconds at most).
    let until = Instant::now() + Duration::from_secs(40);
    while archive.status()[1].backlog > 0 {
        assert!(Instant::now() < until, "{:?}", archive.status());
        std::thread::sleep(Duration::from_millis(200));
    }
    archive.close(Duration::from_secs(5));
    // The same segments shipped again: ClickHouse's MergeTree would keep them twice; the
    // shipper leaves out what it already holds. (The spool, emptied, went at the close.)
    std::fs::create_dir_all(&spool_ch).unwrap();
    for seg in std::fs::read_dir(&kept).unwrap() {
        let seg = seg.unwrap().path();
        std::fs::copy(&seg, spool_ch.join(seg.file_name().unwrap())).unwrap();
    }
    let mut archive = Archive::start(&cfg).unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while archive.status()[1].shipped < 3050 {
        assert!(Instant::now() < until, "{:?}", archive.status());
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = archive.close(Duration::from_secs(5));
    assert_eq!((st[1].backlog, st[1].failures), (0, 0), "{st:?}");
    let live = Clickhouse::new(ch_cfg("live")).unwrap();
    let mut got = Vec::new();
    live.records(&Filter::default(), &mut |r| {
        got.push(r);
        Ok(())
    })
    .unwrap();
    same(
        &sorted(got),
        &sorted(early.clone()),
        "every record arrived once",
    );
    assert_eq!(live.runs(Some("c'1"), 0).unwrap(), runs());
    assert_eq!(live.runs(None, 0).unwrap(), runs());
    assert_eq!(live.campaigns().unwrap(), ["c'1"]);

    // The same records in both: the same answers. Two sources measure one target's rtt
    // (`nowcast udp` beside `nowcast tcp`, every 10 minutes, about 100 ms against 22): two
    // series, which no answer may average together.
    let mut all = synthetic();
    for k in 0..(3 * 144) {
        let ts = T0 + (k * 600_000) as f64 + 2_000.5;
        let mut r = Record::new(ts, "nowcast udp", Metric::Rtt, 100.0 + (k % 7) as f64, TWO);
        if k % 9 == 4 {
            r.status = Status::Timeout;
            r.value = None;
            r.timeout_ms = Some(1000.0);
        }
        all.push(r);
    }
    let mut sq = Sqlite::open(&dir.join("cmp.sqlite")).unwrap();
    sq.write(&all, &runs(), None, 0).unwrap();
    let ch = Clickhouse::new(ch_cfg("cmp")).unwrap();
    ch.ensure_schema().unwrap();
    for c in all.chunks(5000) {
        ch.write(c, &[]).unwrap();
    }
    ch.write(&[], &runs()).unwrap();
    // --source by a probe type: the same records from both (the SQL's LIKE for a campaign
    // probe's named series run by ClickHouse itself; the Rust filter in SQLite's).
    let by_type = Filter {
        sources: vec!["nowcast udp".into(), "no_such%".into()],
        ..Filter::default()
    };
    let (mut from_sq, mut from_ch) = (0, 0);
    sq.records(&by_type, &mut |_| {
        from_sq += 1;
        Ok(())
    })
    .unwrap();
    ch.records(&by_type, &mut |_| {
        from_ch += 1;
        Ok(())
    })
    .unwrap();
    let want = all.iter().filter(|r| r.source == "nowcast udp").count();
    assert_eq!((from_sq, from_ch), (want, want));
    for day in 0..3 {
        let from = T0 as i64 + day * DAY;
        let (a, b) = (
            sq.summary(from, from + DAY).unwrap(),
            ch.summary(from, from + DAY).unwrap(),
        );
        // 5 targets' rtt, throughput, and loss from two sources (udp and fobs); one rtt more.
        assert_eq!(a.len(), 21);
        assert_eq!(a.len(), b.len());
        let want = summaries(&all, from, from + DAY);
        for ((x, y), w) in a.iter().zip(&b).zip(&want) {
            assert_eq!(
                (&x.target, &x.metric, &x.source, x.n, x.ok),
                (&y.target, &y.metric, &y.source, y.n, y.ok)
            );
            let got = (x.target.as_str(), x.metric.as_str(), x.source.as_str());
            assert_eq!((got.0, got.1, got.2, x.n, x.ok), w.0);
            assert!(
                close(x.mean, y.mean) && x.min == y.min && x.max == y.max,
                "{x:?} {y:?}"
            );
            assert!(close(x.mean, w.1), "{x:?} {w:?}");
        }
        let two: Vec<_> = a
            .iter()
            .filter(|x| x.target == TWO && x.metric == "rtt")
            .collect();
        assert_eq!(two.len(), 2, "{two:?}");
        assert_eq!((two[0].source.as_str(), two[0].n), ("nowcast tcp", 144));
        assert_eq!((two[1].source.as_str(), two[1].n), ("nowcast udp", 144));
        assert_eq!(two[1].ok, 144 - 16, "{two:?}");
        assert!(two[0].mean.unwrap() < 25.0 && two[1].mean.unwrap() > 100.0);
    }
    let (a, b) = (
        sq.hourly(
            "10.0.0.3:5201",
            Metric::Throughput,
            T0 as i64,
            T0 as i64 + 3 * DAY,
        )
        .unwrap(),
        ch.hourly(
            "10.0.0.3:5201",
            Metric::Throughput,
            T0 as i64,
            T0 as i64 + 3 * DAY,
        )
        .unwrap(),
    );
    assert_eq!(a.len(), 72);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((x.hour_ms, x.n, x.ok), (y.hour_ms, y.n, y.ok));
        assert!(
            close(x.mean, y.mean) && x.min == y.min && x.max == y.max,
            "{x:?} {y:?}"
        );
    }
    // One target's rtt by the hour: a bucket per source.
    let (a, b) = (
        sq.hourly(TWO, Metric::Rtt, T0 as i64, T0 as i64 + 3 * DAY)
            .unwrap(),
        ch.hourly(TWO, Metric::Rtt, T0 as i64, T0 as i64 + 3 * DAY)
            .unwrap(),
    );
    assert_eq!(a.len(), 144);
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(
            (x.hour_ms, &x.source, x.n, x.ok),
            (y.hour_ms, &y.source, y.n, y.ok)
        );
        assert!(close(x.mean, y.mean), "{x:?} {y:?}");
        let source = ["nowcast tcp", "nowcast udp"][i % 2];
        assert_eq!(
            (x.hour_ms, x.source.as_str(), x.n),
            (T0 as i64 + (i / 2) as i64 * HOUR, source, 6)
        );
    }
    let latest = sq.latest().unwrap();
    assert_eq!(latest, ch.latest().unwrap());
    assert_eq!(latest.len(), 21);
    let two: Vec<_> = latest
        .iter()
        .filter(|l| l.target == TWO && l.metric == "rtt")
        .map(|l| (l.source.as_str(), l.value))
        .collect();
    let last = |source: &str| {
        all.iter()
            .filter(|r| r.to == TWO && r.metric == Metric::Rtt && r.source == source)
            .filter(|r| r.status == Status::Ok)
            .max_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms))
            .unwrap()
            .value
            .unwrap()
    };
    assert_eq!(
        two,
        [
            ("nowcast tcp", last("nowcast tcp")),
            ("nowcast udp", last("nowcast udp"))
        ]
    );
    // A `latest` view made before it was kept per source is made again.
    let old = Clickhouse::new(ch_cfg("old")).unwrap();
    old.execute("CREATE DATABASE old").unwrap();
    old.execute(&format!(
        "CREATE TABLE old.records (day Date, {}) ENGINE = MergeTree() PARTITION BY day \
         ORDER BY (target, metric, ts_ms)",
        nowcast::archive::query::CLICKHOUSE_COLUMNS
    ))
    .unwrap();
    old.execute(
        "CREATE MATERIALIZED VIEW old.latest ENGINE = AggregatingMergeTree() \
         ORDER BY (target, metric) POPULATE AS SELECT target, metric, maxState(ts_ms) AS t, \
         argMaxState(value, ts_ms) AS v FROM old.records WHERE status = 'ok' \
         GROUP BY target, metric",
    )
    .unwrap();
    old.write(&all, &[]).unwrap();
    assert!(old.latest().is_err(), "the old view has no source");
    old.ensure_schema().unwrap();
    assert_eq!(old.latest().unwrap(), latest);
    let f = Filter {
        since_ms: Some(T0 + DAY as f64 + 0.5),
        until_ms: Some(T0 + 2.0 * DAY as f64),
        targets: vec!["10.0.0.1:8060".into()],
        metrics: vec![Metric::Rtt],
        sources: vec![],
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    sq.records(&f, &mut |r| {
        a.push(r);
        Ok(())
    })
    .unwrap();
    ch.records(&f, &mut |r| {
        b.push(r);
        Ok(())
    })
    .unwrap();
    assert_eq!(a.len(), 144);
    same(&a, &b, "records");
    assert_eq!(sq.runs("c'1", 0).unwrap(), ch.runs(Some("c'1"), 0).unwrap());
    assert_eq!(sq.campaigns().unwrap(), ch.campaigns().unwrap());
    // The command reads ClickHouse as it reads SQLite.
    // The flags after the question, as the README writes them.
    let q = |src: &[&str]| {
        let mut args = vec!["archive", "query", "latest", "--json"];
        args.extend_from_slice(src);
        let out = nowcast(&args, Duration::from_secs(30));
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let url = server.url();
    let cmp_db = dir.join("cmp.sqlite");
    let from_sqlite = q(&["--archive", cmp_db.to_str().unwrap()]);
    assert!(from_sqlite.starts_with("[{\"target\""), "{from_sqlite}");
    assert!(
        from_sqlite.contains(&format!(
            "{{\"target\":\"{TWO}\",\"metric\":\"rtt\",\"source\":\"nowcast udp\","
        )),
        "{from_sqlite}"
    );
    assert_eq!(from_sqlite, q(&["--clickhouse", &url, "--database", "cmp"]));
    // The day's table: a row per source.
    let out = nowcast(
        &[
            "archive",
            "query",
            "day",
            "2026-01-02",
            "--archive",
            path(&cmp_db),
        ],
        Duration::from_secs(30),
    );
    let table = text(&out.stdout);
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with(TWO) && l.contains(" rtt ms "))
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(
        rows[0].contains(" nowcast tcp ") && rows[0].contains(" 144 "),
        "{table}"
    );
    assert!(
        rows[1].contains(" nowcast udp ") && rows[1].contains(" 128 "),
        "{table}"
    );

    // `archive import` into ClickHouse: a file imported again adds nothing, one appended to
    // since its new lines; the records are kept as the file has them.
    let lines = import_lines(&all[..4000]);
    let n = lines.len();
    let file = dir.join("f.ndjson");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let flags = ["--clickhouse", &url, "--database", "imp"];
    let err = import(&[&file], &flags);
    assert!(
        err.contains(&format!(
            "f.ndjson: {n} records imported, 0 already in the archive, 0 bad lines skipped"
        )),
        "{err}"
    );
    let imp = Clickhouse::new(ch_cfg("imp")).unwrap();
    let held = |db: &Clickhouse| {
        let mut v = Vec::new();
        db.records(&Filter::default(), &mut |r| {
            v.push(r);
            Ok(())
        })
        .unwrap();
        sorted(v)
    };
    let first = held(&imp);
    assert_eq!(first.len(), n);
    let err = import(&[&file], &flags);
    assert!(
        err.contains(&format!(
            "f.ndjson: 0 records imported, {n} already in the archive, 0 bad lines skipped"
        )),
        "{err}"
    );
    same(&held(&imp), &first, "imported again");
    let more: Vec<String> = all[4000..].iter().map(Record::to_line).collect();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(&mut f, (more.join("\n") + "\n").as_bytes()).unwrap();
    let err = import(&[&file], &flags);
    assert!(
        err.contains(&format!(
            "f.ndjson: {} records imported, {n} already in the archive",
            more.len()
        )),
        "{err}"
    );
    // The same as SQLite makes of the same file.
    let sq_file = dir.join("imp.sqlite");
    import(&[&file], &["--archive", path(&sq_file)]);
    let mut from_sq = Vec::new();
    Sqlite::open(&sq_file)
        .unwrap()
        .records(&Filter::default(), &mut |r| {
            from_sq.push(r);
            Ok(())
        })
        .unwrap();
    same(
        &held(&imp),
        &sorted(from_sq),
        "ClickHouse and SQLite imports",
    );
    drop(server);
}

/// The target two sources measure the rtt of.
const TWO: &str = "10.0.0.2:8060";

/// What a day's summary must say, from the records: per (target, metric, source) in
/// ClickHouse's order, the counts and the mean.
#[allow(clippy::type_complexity)]
fn summaries(
    all: &[Record],
    from: i64,
    to: i64,
) -> Vec<((&str, &str, &str, u64, u64), Option<f64>)> {
    let mut by: std::collections::BTreeMap<(&str, &str, &str), (u64, u64, f64, u64)> =
        Default::default();
    for r in all
        .iter()
        .filter(|r| r.timestamp_ms >= from as f64 && r.timestamp_ms < to as f64)
    {
        let e = by
            .entry((r.to.as_str(), r.metric.name(), r.source.as_str()))
            .or_default();
        e.0 += 1;
        e.1 += u64::from(r.status == Status::Ok);
        if let Some(v) = r.value {
            e.2 += v;
            e.3 += 1;
        }
    }
    by.into_iter()
        .map(|((t, m, s), (n, ok, sum, nv))| ((t, m, s, n, ok), (nv > 0).then(|| sum / nv as f64)))
        .collect()
}
