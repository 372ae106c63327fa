//! A reader that goes away (`nowcast … | head -1`) ends the command quietly with success, as
//! for any Unix filter: a real pipe through `sh`, against a real `nowcast serve`.

use crate::common;

use common::{run_bounded, text, Server, BIN};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Runs `nowcast ARGS | head -1` in `sh`; nowcast's exit status, its stderr and head's
/// output.
fn piped_to_head(args: &str) -> (String, String, String) {
    let dir = std::env::temp_dir().join(format!("nowcast-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = dir.join("stderr");
    let status = dir.join("status");
    let script = format!(
        "{{ '{BIN}' {args} 2>'{}'; echo $? >'{}'; }} | head -1",
        err.display(),
        status.display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]);
    let out = run_bounded(cmd, LIMIT);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let result = (
        read(&status).trim().to_string(),
        read(&err),
        text(&out.stdout),
    );
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[test]
fn a_closed_pipe_is_a_quiet_success() {
    let server = Server::start(&["--bind", "127.0.0.1"]);
    // Many experiments back to back: head exits after the first line, and a later write
    // finds the pipe closed.
    let (status, stderr, line) = piped_to_head(&format!(
        "tcp {} --json --count 100000 --period 0 --size 1K",
        server.tcp
    ));
    assert_eq!((status.as_str(), stderr.as_str()), ("0", ""), "tcp --json");
    assert!(line.starts_with('{'), "{line}");
    let (status, stderr, line) = piped_to_head(&format!(
        "tcp {} --count 100000 --period 0 --size 1K",
        server.tcp
    ));
    assert_eq!((status.as_str(), stderr.as_str()), ("0", ""), "tcp table");
    assert!(line.starts_with("nowcast tcp"), "{line}");
    for flags in ["--json", ""] {
        let (status, stderr, line) = piped_to_head(&format!(
            "udp {} {flags} --count 100000 --period 0 --probes 2 --interval 0",
            server.udp
        ));
        assert_eq!((status.as_str(), stderr.as_str()), ("0", ""), "udp {flags}");
        assert!(!line.is_empty());
    }

    let dir = std::env::temp_dir().join(format!("nowcast-pipe-series-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.txt");
    let values: String = (0..20_000).map(|i| format!("{}\n", 10 + i % 7)).collect();
    std::fs::write(&file, values).unwrap();
    for flags in ["--json", "", "--mode faithful"] {
        let (status, stderr, line) =
            piped_to_head(&format!("forecast '{}' {flags}", file.display()));
        assert_eq!(
            (status.as_str(), stderr.as_str()),
            ("0", ""),
            "forecast {flags}"
        );
        assert!(!line.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);

    // One JSON line per signature: the shipped held-out signatures fill the pipe many times.
    let sigs = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/signatures/eval-network-random.sig"
    );
    let (status, stderr, line) = piped_to_head(&format!("classify --json '{sigs}'"));
    assert_eq!((status.as_str(), stderr.as_str()), ("0", ""), "classify");
    assert!(line.starts_with('{'), "{line}");
}

/// Runs `nowcast ARGS 2>&1 >/dev/null | true` in `sh`: standard error is a pipe whose reader
/// has gone before nowcast writes to it. Nowcast's exit status.
fn stderr_to_nobody(args: &str) -> String {
    let dir = std::env::temp_dir().join(format!("nowcast-pipe-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let status = dir.join("status");
    // `sleep` lets `true` exit first, so the pipe is closed when nowcast writes.
    let script = format!(
        "{{ sleep 0.3; '{BIN}' {args} 2>&1 >/dev/null; echo $? >'{}'; }} | true",
        status.display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]);
    run_bounded(cmd, LIMIT);
    let s = std::fs::read_to_string(&status).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    s.trim().to_string()
}

#[test]
fn a_closed_standard_error_loses_the_warning_not_the_run() {
    // Each writes to standard error; `eprintln!` panicked there (exit 101).
    let dir = std::env::temp_dir().join(format!("nowcast-pipe-err-in-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("bad.pcap");
    // A valid pcap header, then no record that can be read.
    let mut bytes = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    bytes.extend([0; 8]);
    bytes.extend(65535u32.to_le_bytes());
    bytes.extend(1u32.to_le_bytes());
    bytes.extend(b"not a record, not a packet");
    std::fs::write(&pcap, bytes).unwrap();
    let missing = dir.join("missing.csv");
    // Its error, on a closed standard error: exit 1 as ever, no panic.
    assert_eq!(
        stderr_to_nobody(&format!("forecast '{}'", missing.display())),
        "1"
    );
    assert_eq!(stderr_to_nobody(&format!("pcap '{}'", pcap.display())), "1");
    let _ = std::fs::remove_dir_all(&dir);
}
