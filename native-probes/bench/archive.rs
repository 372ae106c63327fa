//! `cargo bench -p native-probes --bench archive`: the archive at scale. Writes N records
//! (default 10 M: 1,000 targets measured every minute for a week) into SQLite and into a
//! ClickHouse server started for the bench, and times the report's three questions on both:
//! one day of all targets, one target over the week in hourly buckets, the latest value of
//! every target. Prints insert rates, query medians (5 runs after a warm-up), size on disk
//! per record, and checks that both archives give the same answers.
//!
//! NOWCAST_BENCH_RECORDS=N sets the count; BENCH_QUICK=1 uses 1 M.

#[path = "../tests/common/clickhouse.rs"]
mod clickhouse_server;

use nowcast::archive::clickhouse::{Clickhouse, ClickhouseConfig};
use nowcast::archive::query::{close, Bucket, Latest, Summary};
use nowcast::archive::sqlite::Sqlite;
use nowcast_core::record::{Metric, Probe, Record, Transport};
use std::time::{Duration, Instant};

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const MINUTE: i64 = 60_000;
const DAY: i64 = 1_440 * MINUTE;
const TARGETS: u64 = 1_000;
const BATCH: u64 = 100_000;

/// Record `i` of the synthetic archive: target i % 1000 at minute i / 1000, with a
/// forecast-free probe record like a campaign's rtt.
fn record(i: u64) -> Record {
    let t = i % TARGETS;
    let minute = i / TARGETS;
    let ts = (T0 + minute as i64 * MINUTE) as f64 + t as f64 * 37.0 + 0.125;
    let x = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f64 / (1u64 << 24) as f64;
    let mut r = Record::new(
        ts,
        "nowcast tcp",
        Metric::Rtt,
        10.0 + t as f64 * 0.1 + x,
        &format!("10.1.{}.{}:8060", t / 250, t % 250),
    );
    r.seq = Some(minute);
    r.period_ms = Some(60_000.0);
    r.probe = Some(Probe {
        transport: Some(Transport::Tcp),
        payload_bytes: Some(2),
        nagle: Some(false),
        ..Probe::default()
    });
    if i % 97 == 0 {
        r.status = nowcast_core::record::Status::Timeout;
        r.value = None;
        r.timeout_ms = Some(1000.0);
    }
    r
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn time<T>(mut f: impl FnMut() -> T) -> (T, (f64, f64, f64)) {
    let out = f();
    let mut t = Vec::new();
    for _ in 0..5 {
        let s = Instant::now();
        let _ = f();
        t.push(s.elapsed().as_secs_f64());
    }
    (out, median(t))
}

fn dir_size(p: &std::path::Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = e.metadata().unwrap();
            n += if m.is_dir() {
                dir_size(&e.path())
            } else {
                m.len()
            };
        }
    }
    n
}

/// CPU time of this process so far (user + system), seconds: the insert's cost without the
/// wait for a busy machine's cores.
fn cpu_s() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn fmt3((m, lo, hi): (f64, f64, f64)) -> String {
    format!("{:.3} s ({:.3}–{:.3})", m, lo, hi)
}

fn main() {
    let n: u64 = std::env::var("NOWCAST_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if std::env::var_os("BENCH_QUICK").is_some() {
            1_000_000
        } else {
            10_000_000
        });
    let dir = std::env::temp_dir().join(format!("nowcast-bench-archive-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let days = (n / TARGETS) as i64 * MINUTE / DAY;
    let day = T0 + (days / 2).max(0) * DAY;
    let week = (T0, T0 + 7 * DAY);
    let one = "10.1.2.7:8060";
    println!(
        "archive bench: {n} records ({TARGETS} targets, one a minute, {:.1} days)",
        n as f64 / TARGETS as f64 / 1440.0
    );

    // SQLite.
    let path = dir.join("bench.sqlite");
    let mut db = Sqlite::open(&path).unwrap();
    let mut gen_s = 0.0;
    let mut ins_s = 0.0;
    let mut ins_cpu = 0.0;
    let mut i = 0;
    while i < n {
        let g = Instant::now();
        let batch: Vec<Record> = (i..(i + BATCH).min(n)).map(record).collect();
        gen_s += g.elapsed().as_secs_f64();
        let s = Instant::now();
        let c = cpu_s();
        db.write(&batch, &[], None, 0).unwrap();
        ins_cpu += cpu_s() - c;
        ins_s += s.elapsed().as_secs_f64();
        i += BATCH;
    }
    drop(db);
    let mut db = Sqlite::open_read(&path).unwrap();
    let size: u64 = ["", "-wal", "-shm"]
        .iter()
        .map(|s| {
            std::fs::metadata(format!("{}{s}", path.display()))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum();
    println!("\nSQLite (WAL, synchronous=FULL, one transaction per {BATCH} records)");
    println!(
        "  insert: {:.0} records/s ({:.1} s; generating the records took {:.1} s more)",
        n as f64 / ins_s,
        ins_s,
        gen_s
    );
    println!(
        "  insert CPU: {:.1} s user + system, {:.0} records per CPU-second (load average at the end: {})",
        ins_cpu,
        n as f64 / ins_cpu,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "  size: {:.1} MB, {:.1} bytes/record",
        size as f64 / 1e6,
        size as f64 / n as f64
    );
    let (s_sum, t1) = time(|| db.summary(day, day + DAY).unwrap());
    let (s_hour, t2) = time(|| db.hourly(one, Metric::Rtt, week.0, week.1).unwrap());
    let (s_latest, t3) = time(|| db.latest().unwrap());
    println!(
        "  one day of all targets ({} series): {}",
        s_sum.len(),
        fmt3(t1)
    );
    println!(
        "  one target over a week, hourly ({} buckets): {}",
        s_hour.len(),
        fmt3(t2)
    );
    println!(
        "  latest of every target ({} series): {}",
        s_latest.len(),
        fmt3(t3)
    );

    // ClickHouse.
    let server = match clickhouse_server::ClickhouseServer::start(0) {
        Ok(s) => s,
        Err(why) => {
            println!("\nClickHouse: skipped ({why})");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    let ch = Clickhouse::new(ClickhouseConfig {
        url: server.url(),
        database: "bench".into(),
        user: None,
        password: None,
        timeout: Duration::from_secs(600),
    })
    .unwrap();
    ch.ensure_schema().unwrap();
    let mut ins_s = 0.0;
    let mut i = 0;
    while i < n {
        let batch: Vec<Record> = (i..(i + BATCH).min(n)).map(record).collect();
        let s = Instant::now();
        ch.write(&batch, &[]).unwrap();
        ins_s += s.elapsed().as_secs_f64();
        i += BATCH;
    }
    let _ = ch.execute("OPTIMIZE TABLE bench.records FINAL");
    let size = dir_size(&server.dir.join("data/data/bench/records"));
    println!("\nClickHouse 18.16 (MergeTree by day, ordered by target and time; RowBinary inserts of {BATCH})");
    println!(
        "  insert: {:.0} records/s ({:.1} s)",
        n as f64 / ins_s,
        ins_s
    );
    println!(
        "  size: {:.1} MB, {:.1} bytes/record (after OPTIMIZE)",
        size as f64 / 1e6,
        size as f64 / n as f64
    );
    let (c_sum, t1) = time(|| ch.summary(day, day + DAY).unwrap());
    let (c_hour, t2) = time(|| ch.hourly(one, Metric::Rtt, week.0, week.1).unwrap());
    let (c_latest, t3) = time(|| ch.latest().unwrap());
    println!(
        "  one day of all targets ({} series): {}",
        c_sum.len(),
        fmt3(t1)
    );
    println!(
        "  one target over a week, hourly ({} buckets): {}",
        c_hour.len(),
        fmt3(t2)
    );
    println!(
        "  latest of every target ({} series): {}",
        c_latest.len(),
        fmt3(t3)
    );

    let same_sum = |a: &[Summary], b: &[Summary]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.target == y.target
                    && x.n == y.n
                    && x.ok == y.ok
                    && close(x.mean, y.mean)
                    && x.min == y.min
                    && x.max == y.max
            })
    };
    let same_hour = |a: &[Bucket], b: &[Bucket]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.hour_ms == y.hour_ms && x.n == y.n && close(x.mean, y.mean))
    };
    let same_latest = |a: &[Latest], b: &[Latest]| a == b;
    println!(
        "\nsame answers from both: day {}, hourly {}, latest {}",
        same_sum(&s_sum, &c_sum),
        same_hour(&s_hour, &c_hour),
        same_latest(&s_latest, &c_latest)
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
