//! The archive: import and export through the command (bad lines named, the rest kept;
//! the page's formats), and the same questions answered alike by SQLite and a real
//! ClickHouse server started by the test, which is also down for a while first: records
//! wait in the spool and arrive once it is up.

mod common;

use common::clickhouse::ClickhouseServer;
use common::{nowcast, text};
use nowcast::archive::clickhouse::{Clickhouse, ClickhouseConfig};
use nowcast::archive::query::{close, Filter};
use nowcast::archive::sqlite::Sqlite;
use nowcast::archive::{Archive, ArchiveConfig};
use nowcast::campaign::runlog::{Outcome, RunLog};
use nowcast_core::record::{
    ClassifierMetric, Congestion, CongestionAction, LossCount, Metric, Probe, Record,
    RecordForecast, Selector, Status, Transport,
};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const T0: f64 = 1_767_225_600_000.0; // 2026-01-01T00:00:00Z
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nowcast-archive-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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
    let valid = include_str!("../../public/schema/examples/valid.ndjson");
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
            "{} records imported, 3 bad lines skipped",
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
    assert_eq!(rows.next(), Some("time,value,series"));
    // The page's CSV reader: `time,value,series`, time in ms.
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), 3, "{row}");
        assert!(
            cells[0].parse::<f64>().is_ok() && cells[1].parse::<f64>().is_ok(),
            "{row}"
        );
        assert!(cells[2].contains(" rtt ("), "{row}");
    }

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
    assert_eq!(live.runs("c'1", 0).unwrap(), runs());

    // The same records in both: the same answers.
    let all = synthetic();
    let mut sq = Sqlite::open(&dir.join("cmp.sqlite")).unwrap();
    sq.write(&all, &runs(), None, 0).unwrap();
    let ch = Clickhouse::new(ch_cfg("cmp")).unwrap();
    ch.ensure_schema().unwrap();
    for c in all.chunks(5000) {
        ch.write(c, &[]).unwrap();
    }
    ch.write(&[], &runs()).unwrap();
    for day in 0..3 {
        let from = T0 as i64 + day * DAY;
        let (a, b) = (
            sq.summary(from, from + DAY).unwrap(),
            ch.summary(from, from + DAY).unwrap(),
        );
        assert_eq!(a.len(), 15);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                (&x.target, &x.metric, x.n, x.ok),
                (&y.target, &y.metric, y.n, y.ok)
            );
            assert!(
                close(x.mean, y.mean) && x.min == y.min && x.max == y.max,
                "{x:?} {y:?}"
            );
        }
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
    assert_eq!(sq.latest().unwrap(), ch.latest().unwrap());
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
    assert_eq!(sq.runs("c'1", 0).unwrap(), ch.runs("c'1", 0).unwrap());
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
    assert_eq!(from_sqlite, q(&["--clickhouse", &url, "--database", "cmp"]));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
