//! The shared example files in public/schema/examples: the valid ones read back exactly, each
//! invalid one is refused with a message naming its field (the part of its file name before
//! `--`). The TypeScript reader runs against the same files.

use nowcast_core::record::{read_ndjson, Metric, Record, Status};
use std::path::PathBuf;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../public/schema/examples")
}

#[test]
fn valid_examples_parse_and_round_trip() {
    let text = std::fs::read_to_string(examples().join("valid.ndjson")).unwrap();
    let (records, errors) = read_ndjson(&text);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(records.len(), text.lines().count());
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
    let (records, errors) = read_ndjson(&text);
    assert_eq!(records.len(), 2);
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].line, 2);
    assert_eq!(errors[1].line, 5);
    assert!(
        errors[1].to_string().contains("newer than this reader"),
        "{}",
        errors[1]
    );
}
