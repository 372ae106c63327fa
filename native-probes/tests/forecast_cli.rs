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
    assert_eq!(
        (
            doc["report"]["points"].as_u64(),
            doc["input"]["other_metric"].as_u64()
        ),
        (Some(50), Some(50))
    );
    let out = nowcast(&["forecast", f.to_str().unwrap(), "--metric", "latency"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown metric 'latency'"));
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the supported range"));
}
