//! `nowcast forecast` as a user runs it: the built binary on files it reads from disk.

use std::path::PathBuf;
use std::process::{Command, Output};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("nowcast-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn nowcast(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nowcast"))
        .args(args)
        .output()
        .expect("run nowcast")
}

fn series(n: usize) -> String {
    (0..n)
        .map(|i| format!("{}\n", 20.0 + ((i * 37) % 11) as f64 * 0.5))
        .collect()
}

#[test]
fn json_report_covers_every_forecaster_and_rule() {
    let dir = TempDir::new("json");
    let f = dir.file("s.txt", &series(400));
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["report"]["points"], 400);
    assert_eq!(doc["input"]["format"], "plain");
    let ids: Vec<&str> = doc["report"]["selected"]
        .as_array()
        .unwrap()
        .iter()
        .chain(doc["report"]["baselines"].as_array().unwrap())
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    for id in [
        "nws_faithful_mse",
        "nws_faithful_mae",
        "nws_improved_mse",
        "nws_improved_mae",
        "oracle",
        "last_value",
        "mean_5",
        "ewma_0.7",
        "rfc6298_srtt",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    assert_eq!(
        doc["report"]["primaries"].as_array().unwrap().len(),
        nowcast_core::Bank::new(nowcast_core::Mode::Improved).primaries()
    );
    assert_eq!(
        doc["report"]["timeouts"].as_array().unwrap().len(),
        nowcast_core::timeout::Rule::standard().len()
    );
    for row in doc["report"]["selected"].as_array().unwrap() {
        assert_eq!(row["n"], 399, "errors over points 2..n");
    }
}

#[test]
fn human_report_and_csv_columns() {
    let dir = TempDir::new("csv");
    let f = dir.file("s.csv", "time,rtt,loss\n0,10,0\n1,12,0\n2,11,0\n3,13,0\n");
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--column", "rtt"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("4 values (csv), column rtt"), "{text}");
    assert!(text.contains("NWS faithful, MSE-selected") && text.contains("windowed_k2_w20"));
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--column", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no column named 'nope'"));
    // One value: a forecast, but no error to give it a range.
    let one = dir.file("one.txt", "5\n");
    let out = nowcast(&["forecast", one.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.contains("error unknown until a second value"),
        "{text}"
    );
    assert!(!text.contains("± 0"), "{text}");
    // A time column and text: the time column is named as what it was taken for.
    let times = dir.file("t.csv", "time,host\n1700000000,a\n1700000001,b\n");
    let out = nowcast(&["forecast", times.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("besides the time column 'time'"), "{err}");
}

#[test]
fn a_malformed_line_stops_with_its_number_unless_skipped() {
    let dir = TempDir::new("bad");
    let f = dir.file("s.txt", "1\n2\n3\nfour\n5\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 4") && err.contains("four") && err.contains("--skip-bad"),
        "{err}"
    );
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--skip-bad", "--json"]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["skipped_bad"], 1);
    assert_eq!(doc["report"]["points"], 4);
}

#[test]
fn records_of_one_metric_are_read_and_others_counted() {
    let dir = TempDir::new("ndjson");
    let mut text = String::new();
    for i in 0..50 {
        text += &format!(
            "{{\"schema_version\":\"1.0\",\"timestamp_ms\":{i},\"source\":\"browser\",\"metric\":\"rtt\",\"value\":{},\"unit\":\"ms\",\"to\":\"x\"}}\n",
            20 + i % 3
        );
        text += &format!(
            "{{\"schema_version\":\"1.0\",\"timestamp_ms\":{i},\"source\":\"browser\",\"metric\":\"bandwidth_down\",\"value\":90,\"unit\":\"Mbit/s\",\"to\":\"x\"}}\n"
        );
    }
    let f = dir.file("r.ndjson", &text);
    let out = nowcast(&[
        "forecast",
        f.to_str().unwrap(),
        "--metric",
        "bandwidth_down",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["metric"], "bandwidth_down");
    assert_eq!(doc["input"]["series"], "bandwidth_down to x");
    assert_eq!(
        (
            doc["report"]["points"].as_u64(),
            doc["input"]["other_series"][0]["values"].as_u64()
        ),
        (Some(50), Some(50))
    );
    assert_eq!(
        doc["input"]["other_series"][0]["choose"],
        "--metric rtt --target \"x\""
    );
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--metric", "latency"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("'latency' is not a metric"));
    // Without a choice, the first series is read and the others are named.
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("50 values (ndjson), series rtt to x"),
        "{text}"
    );
    assert!(
        text.contains("bandwidth_down to x (50 values): --metric bandwidth_down --target \"x\""),
        "{text}"
    );
    // Nothing matches: the error lists what there is.
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--target", "y"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no values to forecast in a series matching the options"),
        "{err}"
    );
    assert!(
        err.contains("rtt to x (--metric rtt --target \"x\")"),
        "{err}"
    );
}

#[test]
fn the_page_exports_and_iperf3_json_are_read() {
    let dir = TempDir::new("page");
    // The page's CSV export: one series per metric, transport and target.
    let mut csv = String::from("time,value,metric,unit,transport,to,series\n");
    for i in 0..30 {
        csv += &format!("{},{},rtt,ms,websocket,h:443,RTT\n", 1000 * i, 20 + i % 3);
        csv += &format!(
            "{},{},bandwidth_down,Mbit/s,websocket,h:443,Down\n",
            1000 * i,
            90 + i % 5
        );
    }
    let f = dir.file("export.csv", &csv);
    let out = nowcast(&[
        "forecast",
        f.to_str().unwrap(),
        "--metric",
        "bandwidth_down",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["series"], "bandwidth_down/websocket to h:443");
    assert_eq!(doc["report"]["points"], 30);
    // iperf3 -J, as iperf3 wrote it (core/tests/import/, made by running iperf3).
    let iperf3 = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/import/iperf3-tcp-bidir.json");
    let out = nowcast(&[
        "forecast",
        iperf3.to_str().unwrap(),
        "--metric",
        "bandwidth_down",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("4 values (iperf3), series iperf3 bandwidth_down to 10.231.82.2:5201"),
        "{text}"
    );
    assert!(
        text.contains("iperf3 bandwidth_up to 10.231.82.2:5201 (4 values)"),
        "{text}"
    );
}

#[test]
fn empty_or_missing_input_is_a_clear_error() {
    let dir = TempDir::new("empty");
    let f = dir.file("e.txt", "# nothing\n\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no values to forecast"));
    let out = nowcast(&["forecast", "/nonexistent/series.txt"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open /nonexistent/series.txt"));
    let f = dir.file("huge.txt", "1\n1e200\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2: field 'value': 1e200 is outside"),
        "{err}"
    );
}

/// One value: its forecast has no error yet, so no range, in the table and in the JSON
/// (null, as the table's "error unknown"), and no forecast was checked, so the errors of
/// the forecasters are null rather than a perfect 0.
#[test]
fn after_one_value_the_error_is_unknown_in_the_table_and_the_json() {
    let dir = TempDir::new("one");
    let f = dir.file("one.txt", "5\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error unknown until a second value"),
        "{text}"
    );
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for n in doc["report"]["next"].as_array().unwrap() {
        assert_eq!(n["value"], 5.0);
        assert!(
            n["error"].is_null() && n["low"].is_null() && n["high"].is_null(),
            "{n}"
        );
    }
    for r in doc["report"]["baselines"].as_array().unwrap() {
        assert!(
            r["n"] == 0 && r["mae"].is_null() && r["rmse"].is_null(),
            "{r}"
        );
    }
}

/// Runs `nowcast ARGS` with standard input written by `feed`; its output, exit status and
/// peak resident memory in KiB, from GNU `time` (`wait4` on a child of this process counts
/// this process's resident memory at the spawn, shared until the exec: another test's data
/// in memory read as the child's).
fn run_fed(
    args: &[&str],
    feed: impl FnOnce(&mut dyn std::io::Write) + Send + 'static,
) -> (Output, u64) {
    use std::process::Stdio;
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let rss = std::env::temp_dir().join(format!(
        "nowcast-fed-rss-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&rss)
        .arg(env!("CARGO_BIN_EXE_nowcast"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run /usr/bin/time (Debian's package time) and nowcast");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || feed(&mut stdin));
    let out = child.wait_with_output().expect("wait for nowcast");
    let _ = writer.join();
    let peak = std::fs::read_to_string(&rss).unwrap_or_default();
    let _ = std::fs::remove_file(&rss);
    // The last line: a child killed by a signal has a line about that before it.
    let kib = peak.lines().last().and_then(|l| l.trim().parse().ok());
    (out, kib.expect("time's peak RSS"))
}

#[test]
fn a_64_mib_line_of_commas_is_refused_by_its_number_in_bounded_memory() {
    // The finding: a 64 MiB CSV line of commas took 2.1 GB, and errors quoted whole lines.
    let feed = |w: &mut dyn std::io::Write| {
        let commas = vec![b','; 1 << 20];
        let _ = w.write_all(b"time,value\n1,2\n");
        for _ in 0..64 {
            if w.write_all(&commas).is_err() {
                return; // the reader stopped at the long line
            }
        }
        let _ = w.write_all(b"\n3,4\n5,6\n");
    };
    let (out, peak_kib) = run_fed(&["forecast", "-"], feed);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("line 3: the line is longer than 1048576 bytes"),
        "{err}"
    );
    assert!(err.len() < 400, "the error quotes a prefix only: {err}");
    assert!(peak_kib < 40 * 1024, "peak memory {peak_kib} KiB");

    let (out, peak_kib) = run_fed(&["forecast", "-", "--skip-bad", "--json"], feed);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["skipped_bad"], 1);
    assert_eq!(doc["input"]["values"], 3);
    assert!(peak_kib < 40 * 1024, "peak memory {peak_kib} KiB");
}

/// NDJSON records of `metric` with `values`, as `nowcast tcp` writes them.
fn records_of(metric: &str, unit: &str, values: &[f64]) -> String {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "{{\"schema_version\":\"1.0\",\"timestamp_ms\":{i},\"source\":\"nowcast tcp\",\"metric\":\"{metric}\",\"value\":{v},\"unit\":\"{unit}\",\"to\":\"h:1\"}}\n"
            )
        })
        .collect()
}

fn wavy(n: usize, level: f64, spread: f64) -> Vec<f64> {
    (0..n)
        .map(|i| level + spread * (((i * 37) % 11) as f64 / 10.0 - 0.5))
        .collect()
}

#[test]
fn the_next_forecast_is_printed_with_its_range_in_the_series_unit_for_each_mode() {
    let dir = TempDir::new("next");
    let values = wavy(300, 20.0, 4.0);
    let f = dir.file("rtt.ndjson", &records_of("rtt", "ms", &values));
    let path = f.to_str().unwrap();
    let out = nowcast(&["forecast", path, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["mode"].as_str(), doc["unit"].as_str()),
        (Some("both"), Some("ms"))
    );
    let next = doc["report"]["next"].as_array().unwrap();
    assert_eq!(next.len(), 2);
    for (n, mode) in next
        .iter()
        .zip([nowcast_core::Mode::Improved, nowcast_core::Mode::Faithful])
    {
        // The same forecast as the core's bank fed the same values, ± 2·RMSE.
        let mut bank = nowcast_core::Bank::new(mode);
        bank.update_all(&values).unwrap();
        let want = bank.forecast().unwrap().mse;
        let (value, error) = (n["value"].as_f64().unwrap(), n["error"].as_f64().unwrap());
        assert_eq!(n["mode"], serde_json::to_value(mode).unwrap());
        assert_eq!((value, error), (want.value, want.error.sqrt()));
        assert_eq!(n["method"], bank.method(want.method).0);
        // Improved mode combines every forecaster: the one named has a share of it.
        match mode {
            nowcast_core::Mode::Improved => {
                let share = n["share"].as_f64().unwrap();
                assert!(share > 0.0 && share <= 1.0 + 1e-9, "{n}");
            }
            nowcast_core::Mode::Faithful => assert!(n["share"].is_null(), "{n}"),
        }
        assert_eq!(n["low"].as_f64().unwrap(), value - 2.0 * error);
        assert_eq!(n["high"].as_f64().unwrap(), value + 2.0 * error);
    }
    for row in doc["report"]["selected"].as_array().unwrap() {
        assert!(
            row["mode"].is_string(),
            "every NWS row names its mode: {row}"
        );
    }

    let out = nowcast(&["forecast", path]);
    let text = String::from_utf8_lossy(&out.stdout);
    let improved = text
        .lines()
        .find(|l| l.trim_start().starts_with("improved mode"))
        .unwrap_or_else(|| panic!("{text}"));
    let (v, e) = (
        next[0]["value"].as_f64().unwrap(),
        next[0]["error"].as_f64().unwrap(),
    );
    let words: Vec<&str> = improved.split_whitespace().collect();
    // "improved mode  20.1 ± 2.3 ms  likely 17.8 to 22.4 ms  by …"
    assert_eq!(
        (words[3], words[5], words[6]),
        ("±", "ms", "likely"),
        "{improved}"
    );
    let shown: f64 = words[2].parse().unwrap();
    let band: f64 = words[4].parse().unwrap();
    assert!(
        (shown - v).abs() < 0.05 && (band - 2.0 * e).abs() < 0.05,
        "{improved}"
    );
    assert_eq!((words[8], words[10]), ("to", "ms"), "{improved}");
    // The range is the value and band as printed: 20.1 ± 2.3 is 17.8 to 22.4.
    let (low, high): (f64, f64) = (words[7].parse().unwrap(), words[9].parse().unwrap());
    assert!(
        (low - (shown - band)).abs() < 1e-9 && (high - (shown + band)).abs() < 1e-9,
        "{improved}"
    );
    // Said to be a combination, not one forecaster's own forecast; faithful mode's is.
    assert!(
        improved.contains("combined, largest weight ") && improved.ends_with(" %)"),
        "{improved}"
    );
    let faithful = text
        .lines()
        .find(|l| l.trim_start().starts_with("faithful mode"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(faithful.contains(" by "), "{faithful}");
    assert!(
        text.contains("MAE ms") && text.contains("RMSE ms") && text.contains("mean timeout ms")
    );

    // One mode alone: its rows only, its primaries and rules.
    for (mode, other) in [("faithful", "improved"), ("improved", "faithful")] {
        let out = nowcast(&["forecast", path, "--mode", mode, "--json"]);
        assert!(out.status.success());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["mode"], mode);
        let r = &doc["report"];
        assert_eq!(r["primaries_mode"], mode);
        assert_eq!(r["next"].as_array().unwrap().len(), 1);
        assert_eq!(r["next"][0]["mode"], mode);
        let m: nowcast_core::Mode = mode.parse().unwrap();
        assert_eq!(
            r["primaries"].as_array().unwrap().len(),
            nowcast_core::Bank::new(m).primaries()
        );
        assert!(!r["timeouts"].as_array().unwrap().is_empty());
        assert!(!r["baselines"].as_array().unwrap().is_empty());
        for row in r["selected"].as_array().unwrap() {
            assert_eq!(row["mode"], mode, "{row}");
        }
        let out = nowcast(&["forecast", path, "--mode", mode]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{mode} mode")), "{text}");
        assert!(!text.contains(&format!("NWS {other}")), "{text}");
    }
    let out = nowcast(&["forecast", path, "--mode", "best"]);
    assert_eq!(out.status.code(), Some(2), "clap refuses an unknown mode");
}

#[test]
fn a_fast_link_is_shown_in_gbit_per_s_and_a_range_never_goes_below_zero() {
    let dir = TempDir::new("gbit");
    let f = dir.file(
        "bw.ndjson",
        &records_of("bandwidth_up", "Mbit/s", &wavy(100, 23_083.0, 2_000.0)),
    );
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.lines().next().unwrap().ends_with(", in Gbit/s"),
        "the unit the figures are in is named, one: {text}"
    );
    assert!(!text.contains("Mbit/s"), "{text}");
    assert!(text.contains("MAE Gbit/s"), "{text}");
    let improved = text.lines().find(|l| l.contains("improved mode")).unwrap();
    assert!(improved.contains("Gbit/s  likely 2"), "{improved}");
    assert!(!text.contains("Mbit/s  likely"), "{text}");
    // No timeouts of a rate (they were printed in Gbit/s).
    assert!(
        text.contains("Timeout rules: not shown, as they time a wait and this series is a rate"),
        "{text}"
    );

    // A series of small, scattered RTTs: the likely range starts at 0 ms, not below.
    let f = dir.file(
        "rtt.ndjson",
        &records_of("rtt", "ms", &[0.1, 3.0, 0.1, 0.2, 4.0, 0.1, 0.1, 5.0, 0.1]),
    );
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for n in doc["report"]["next"].as_array().unwrap() {
        assert_eq!(n["low"], 0.0, "{n}");
        assert!(n["value"].as_f64().unwrap() - 2.0 * n["error"].as_f64().unwrap() < 0.0);
    }
}

#[test]
fn only_numeric_columns_are_chosen_and_the_one_read_is_named() {
    let dir = TempDir::new("numeric");
    // The last column is text, the one before holds the numbers.
    let f = dir.file(
        "s.csv",
        "time,rtt_ms,host\n1,10.5,a\n2,11.0,b\n3,10.8,c\n4,10.1,d\n",
    );
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("4 values (csv), column rtt_ms, in ms (from the column's name)"),
        "{text}"
    );
    assert!(text.contains("column(s) of text not read: host"), "{text}");
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["column"], "rtt_ms");
    assert_eq!(
        (doc["unit"].as_str(), doc["unit_from"].as_str()),
        (Some("ms"), Some("column name"))
    );
    // No unit in the file: none is made up.
    let f = dir.file("v.csv", "time,value,host\n1,10,a\n2,11,b\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("column value; the file names no unit"),
        "{text}"
    );
    assert!(
        text.contains("  MAE ") && !text.contains("MAE ms"),
        "{text}"
    );
}

#[test]
fn line_numbers_count_crlf_lines_as_lines() {
    let dir = TempDir::new("crlf");
    // The bad value is on line 6 of each file, after a comment and a blank line.
    let cases = [
        ("plain.txt", "# rtt\r\n\r\n1\r\n2\r\n3\r\nfour\r\n5\r\n"),
        (
            "s.csv",
            "# rtt\r\n\r\ntime,rtt\r\n1,2\r\n2,3\r\n3,four\r\n4,5\r\n",
        ),
        (
            "s.tsv",
            "# rtt\r\n\r\n1\t2\r\n2\t3\r\n3\t4\r\n4\tfour\r\n5\t6\r\n",
        ),
        (
            "r.ndjson",
            concat!(
                "# rtt\r\n\r\n",
                r#"{"schema_version":"1.0","timestamp_ms":1,"source":"s","metric":"rtt","value":2,"unit":"ms","to":"x"}"#,
                "\r\n",
                r#"{"schema_version":"1.0","timestamp_ms":2,"source":"s","metric":"rtt","value":3,"unit":"ms","to":"x"}"#,
                "\r\n",
                r#"{"schema_version":"1.0","timestamp_ms":3,"source":"s","metric":"rtt","value":4,"unit":"ms","to":"x"}"#,
                "\r\n",
                r#"{"schema_version":"1.0","timestamp_ms":4,"source":"s","metric":"rtt","value":"four","unit":"ms","to":"x"}"#,
                "\r\n",
            ),
        ),
    ];
    for (name, body) in cases {
        let f = dir.file(name, body);
        let out = nowcast(&["forecast", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains("line 6"), "{name}: {err}");
        let out = nowcast(&["forecast", f.to_str().unwrap(), "--skip-bad"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("skipped 1 malformed line (--skip-bad):\n  line 6"),
            "{name}: {text}"
        );
    }
}

/// `--skip-bad` says what is wrong with each line it skipped, the first five, and counts the
/// rest (it named only the first).
#[test]
fn skipped_lines_are_each_named() {
    let dir = TempDir::new("skipped");
    let mut body = String::from("time,rtt_ms\n");
    for i in 1..=20 {
        if i % 3 == 0 {
            body.push_str(&format!("{i},bad{i}\n"));
        } else {
            body.push_str(&format!("{i},{}\n", 10 + i));
        }
    }
    let f = dir.file("s.csv", &body);
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--skip-bad"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Values 3, 6, …, 18 are bad: six lines, the first on line 4 (after the header).
    let listed: Vec<String> = [4, 7, 10, 13, 16]
        .iter()
        .map(|l| format!("  line {l}: field 'rtt_ms': 'bad{}' is not a number", l - 1))
        .collect();
    assert!(
        text.contains("skipped 6 malformed lines (--skip-bad):\n")
            && listed.iter().all(|l| text.contains(l.as_str()))
            && text.contains("\n  and 1 more\n")
            && !text.contains("line 19:"),
        "{text}"
    );
}

/// A field of the column read that is not a number is named with its line, not taken for a
/// column of text (which left "no column of numbers" although `value` was there); thousands
/// separators are named.
#[test]
fn a_value_with_thousands_separators_is_named_on_its_line() {
    let dir = TempDir::new("thousands");
    let f = dir.file("s.csv", "time,value\n1,\"1,200\"\n2,\"1,300\"\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2: field 'value': '1,200' is not a number (thousands separators?"),
        "{err}"
    );
}

/// An empty field is no value, counted and said, as other skipped lines are.
#[test]
fn empty_fields_are_counted_and_said() {
    let dir = TempDir::new("empty-fields");
    let f = dir.file("s.csv", "time,value\n1,5\n2,\n3,7\n4,8\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 values (csv)")
            && text.contains("note: 1 empty field (no value) in the columns read, on line 3"),
        "{text}"
    );
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["without_value"], 1);
}

/// A compressed file is named, with the command that reads it (as `nowcast pcap` names
/// one); a file of `;`-separated fields is told how to convert it.
#[test]
fn compressed_and_semicolon_separated_files_are_named() {
    let dir = TempDir::new("compressed");
    let gz = dir.0.join("s.txt.gz");
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, series(50).as_bytes()).unwrap();
    std::fs::write(&gz, z.finish().unwrap()).unwrap();
    let out = nowcast(&["forecast", gz.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the input is gzip-compressed (it starts with 1f 8b")
            && err.contains("`gzip -dc FILE | nowcast forecast -`"),
        "{err}"
    );
    let xz = dir.0.join("s.xz");
    std::fs::write(&xz, b"\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4\x46\x02\x00!\x01").unwrap();
    let out = nowcast(&["forecast", xz.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("xz-compressed"),
        "{out:?}"
    );
    let semi = dir.file("s.csv", "time;value\n1;5,5\n2;6,1\n");
    let out = nowcast(&["forecast", semi.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 1 ('time;value') has fields separated by ';'")
            && err.contains("sed 's/,/./g; s/;/,/g' FILE | nowcast forecast -"),
        "{err}"
    );
}

/// In faithful mode the Exp Smooth rows and the oracle count point 1 (the original's
/// smoothers start at 0 and are charged for it), and the table says so; with both modes the
/// oracle is the improved bank's, and says so.
#[test]
fn faithful_rows_over_every_point_are_explained() {
    let dir = TempDir::new("faithful-n");
    let f = dir.file("s.txt", "10\n12\n11\n14\n13\n15\n12\n16\n14\n13\n17\n15\n");
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--mode", "faithful"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let oracle = text.lines().find(|l| l.contains("Oracle (")).unwrap();
    assert!(oracle.split_whitespace().any(|w| w == "12"), "{oracle}");
    assert!(
        text.contains("Oracle: the best of the faithful primaries")
            && text.contains("n = 12: the oracle is charged for point 1 too")
            && text.contains("n = 12: errors over points 1..n; the faithful Exp Smooth"),
        "{text}"
    );
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Oracle: the best of the improved primaries") && !text.contains("n = 12"),
        "{text}"
    );
}

/// A negative range reads ("-8.24 to -1.31", not "-8.24–-1.31"); a file's one series of no
/// metric, asked for with --metric, is not listed with empty options "()".
#[test]
fn a_negative_range_reads_and_no_empty_options_are_listed() {
    let dir = TempDir::new("negative");
    let f = dir.file("s.txt", "-5\n-3\n-6\n-2\n-7\n-4\n-5\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("likely -9.44 to -0.32"), "{text}");
    assert!(!text.contains("–"), "{text}");
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--metric", "rtt"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("()"), "{err}");
    assert!(
        err.contains("value (no option chooses it: leave out --metric"),
        "{err}"
    );
}

/// Two columns of one name: the one read is named with its index and keeps the unit its
/// name gives; the other is offered by its index, and asking by the shared name says the
/// indices (the name chose the first, and the other was offered as `--column "rtt_ms"`).
#[test]
fn columns_sharing_a_name_are_chosen_by_index() {
    let dir = TempDir::new("shared-name");
    let f = dir.file("s.csv", "time,rtt_ms,rtt_ms\n1,10,5\n2,11,6\n3,12,7\n");
    let out = nowcast(&["forecast", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 values (csv), column rtt_ms (column 2), in ms (from the column's name)")
            && text.contains("  rtt_ms (column 1): --column \"1\""),
        "{text}"
    );
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--column", "rtt_ms"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(
                "2 columns are named 'rtt_ms': choose one by its index (--column 1, --column 2)"
            ),
        "{err}"
    );
}
