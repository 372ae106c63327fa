//! What a new user met in `nowcast archive`, `report` and `--help`, through the built
//! binary: a bad time (`--since`, `--until`, a query's day) is refused when the flags are
//! parsed, naming the flag, with exit status 2 in every command (before, 1 and, for `archive
//! query hourly`, no flag named); an empty report says what is true of its inputs, naming
//! filters only when some were given; `nowcast delay` is listed in `--help`. (The spool left
//! empty is gone after a run: `tests/it/archive_files.rs`.)

use crate::common;

use common::{nowcast, one_record, text, TempDir};
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_bad_time_is_refused_naming_its_flag_with_status_2_in_every_command() {
    let dir = TempDir::new("bad-times");
    // Never opened: refused before.
    let a = dir.join("lab.sqlite");
    let a = path(&a);
    let rows: [(&[&str], &str); 7] = [
        (
            &["archive", "export", "--archive", a, "--since", "yesterday"],
            "'--since <SINCE>': 'yesterday' is not a time",
        ),
        (
            &["archive", "export", "--archive", a, "--until", "2026-99-01"],
            "'--until <UNTIL>': '2026-99-01' is not a date",
        ),
        (
            &["report", "--archive", a, "--since", "bogus"],
            "'--since <SINCE>': 'bogus' is not a time",
        ),
        (
            &["report", "x.ndjson", "--until", "soon"],
            "'--until <UNTIL>': 'soon' is not a time",
        ),
        (
            &[
                "archive", "query", "hourly", "h:1", "rtt", "--since", "bogus",
            ],
            "'--since <SINCE>': 'bogus' is not a time",
        ),
        (
            &[
                "archive",
                "query",
                "hourly",
                "h:1",
                "rtt",
                "--until",
                "2026-02-30",
            ],
            "'--until <UNTIL>': '2026-02-30' is not a date",
        ),
        (
            &["archive", "query", "day", "bogus", "--archive", a],
            "'<DAY>': 'bogus' is not a time",
        ),
    ];
    for (args, says) in rows {
        let out = nowcast(args, LIMIT);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !Path::new(a).exists(),
            "{args:?}: refused before anything opened"
        );
    }
    // The forms a time takes are still taken.
    let empty = dir.join("empty.ndjson");
    std::fs::write(&empty, "").unwrap();
    for t in [
        "7d",
        "now",
        "2026-03-01",
        "2026-03-01T06:00:00Z",
        "1767225600000",
    ] {
        let out = nowcast(&["report", path(&empty), "--since", t, "--until", t], LIMIT);
        assert_eq!(out.status.code(), Some(0), "{t}: {}", text(&out.stderr));
    }
}

#[test]
fn an_empty_report_says_what_is_true_of_its_inputs() {
    let dir = TempDir::new("empty-report");
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let one = one_record(&dir, "one.ndjson");
    let a = dir.join("none.sqlite");
    let (e, o) = (path(&empty), path(&one));
    let rows: [(&[&str], String); 5] = [
        (&["report", e], format!("{e}: no records")),
        // A filter leaves out nothing of nothing: not named.
        (&["report", e, "--since", "1d"], format!("{e}: no records")),
        (
            &["report", o, "--since", "2030-01-01", "--target", "x:1"],
            format!("{o}: 1 record, none matching --since, --target"),
        ),
        (
            &["report", e, o, "--metric", "loss"],
            format!("{e}, {o}: 1 record, none matching --metric"),
        ),
        (
            &["report", "--archive", path(&a), "--source", "iperf3"],
            format!("{}: no records matching --source", path(&a)),
        ),
    ];
    // An archive of the one record, which --source leaves out.
    let out = nowcast(&["archive", "import", o, "--archive", path(&a)], LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (args, says) in rows {
        let out = nowcast(args, LIMIT);
        let (got, err) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(got, format!("0 records\n\n{says}\n"), "{args:?}");
        assert!(!got.contains("nothing matched"), "{args:?}: {got}");
    }
}

#[test]
fn delay_is_listed_in_help() {
    let out = nowcast(&["--help"], LIMIT);
    let help = text(&out.stdout);
    assert!(
        help.lines()
            .any(|l| l.trim_start().starts_with("delay ") && l.contains("fixed delay")),
        "{help}"
    );
    // The benchmark's TUN delay line stays out of it.
    assert!(!help.contains("delay-tun"), "{help}");
}

/// `--source` with a probe type also takes the series a campaign's probes of that type write
/// under their own names (`nowcast tcp (bw)`): on an archive and on files alike (it found
/// none of them).
#[test]
fn a_probe_types_source_takes_its_named_probes() {
    let dir = TempDir::new("source-type");
    let file = dir.join("r.ndjson");
    let line = |t: u64, source: &str| {
        format!(
            r#"{{"schema_version":"1.2","timestamp_ms":{t},"source":"{source}","metric":"rtt","value":1.5,"unit":"ms","to":"h:8060"}}"#
        )
    };
    let text_of = [
        line(1_700_000_000_000, "nowcast tcp (rtt)"),
        line(1_700_000_001_000, "nowcast tcp (bw)"),
        line(1_700_000_002_000, "nowcast udp"),
        line(1_700_000_003_000, "nowcast tcpx (odd)"),
    ]
    .join("\n");
    std::fs::write(&file, text_of + "\n").unwrap();
    let a = dir.join("a.sqlite");
    let out = nowcast(
        &["archive", "import", path(&file), "--archive", path(&a)],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for input in [&["--archive", path(&a)][..], &[path(&file)][..]] {
        let mut args = vec!["report", "--json", "--source", "nowcast tcp"];
        args.extend_from_slice(input);
        let out = nowcast(&args, LIMIT);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["records"], 2, "{args:?}: {doc}");
    }
}
