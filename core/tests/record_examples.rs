//! The shared example files in public/schema/examples: the valid ones read back exactly, each
//! invalid one is refused with a message naming its field (the part of its file name before
//! `--`). The TypeScript reader runs against the same files.

use nowcast_core::import::read_text;
use nowcast_core::json::SerdeJson;
use nowcast_core::record::{Metric, Record, Status};
use std::path::PathBuf;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../public/schema/examples")
}

#[test]
fn valid_examples_parse_and_round_trip() {
    let text = std::fs::read_to_string(examples().join("valid.ndjson")).unwrap();
    let records: Vec<Record> = text.lines().map(|l| Record::parse(l).unwrap()).collect();
    assert_eq!(records[2].metric, Metric::BandwidthDown);
    assert_eq!(records[4].status, Status::Timeout);
    for r in &records {
        assert_eq!(&Record::parse(&r.to_line()).unwrap(), r);
    }
}

#[test]
fn invalid_examples_are_refused_naming_the_field() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples().join("invalid")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let field = name.split("--").next().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let err = Record::parse(text.trim()).expect_err(&name);
        assert_eq!(err.field.as_deref(), Some(field), "{name}: {err}");
        seen += 1;
    }
    assert!(seen >= 10);
}

#[test]
fn a_bad_line_loses_nothing_else() {
    let good = r#"{"schema_version":"1.0","timestamp_ms":1,"source":"browser","metric":"rtt","value":2,"unit":"ms","to":"x"}"#;
    let text = format!("{good}\nnot json\n\n{good}\n{{\"schema_version\":\"9.1\"}}\n");
    let r = read_text(&text, SerdeJson);
    assert_eq!(r.series[0].2.len(), 2);
    let lines: Vec<u64> = r.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 5]);
    assert!(
        r.errors[1].message.contains("newer than this reader"),
        "{}",
        r.errors[1]
    );
}

#[test]
fn every_record_written_reads_back() {
    // The schema's rules hold for what the writer writes: a record made with every field
    // set reads back equal, and the JSON Schema examples cover each refusal.
    let mut r = Record::new(1.5, "nowcast tcp", Metric::BandwidthUp, 93.5, "h:1");
    r.from = Some("me".into());
    r.seq = Some(u64::MAX);
    r.period_ms = Some(1000.0);
    r.timeout_ms = Some(15000.0);
    r.probe = Some(nowcast_core::record::Probe {
        transport: Some(nowcast_core::record::Transport::Tcp),
        payload_bytes: Some(1 << 20),
        nagle: Some(false),
        streams: Some(2),
        sndbuf_bytes: Some(1),
        rcvbuf_bytes: Some(2),
        raw_ms: Some(90.0),
        rtt_subtracted_ms: Some(1.25),
    });
    r.forecast = Some(nowcast_core::record::RecordForecast {
        value: 90.0,
        method: "median_31".into(),
        selector: nowcast_core::record::Selector::Mae,
        error: 3.0,
    });
    assert_eq!(Record::parse(&r.to_line()), Ok(r));
}
