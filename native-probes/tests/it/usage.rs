//! A bad option value is refused the same way whichever command and whoever checks it: one
//! line naming the flag, and exit status 2, as clap's own refusal of a flag it cannot parse.
//! Before, values clap parsed but the command refused (`serve --handshake 0`, `fobs send
//! --rate 0`) exited 1, and some did not name their flag (`a token is 32 hex digits`).

use crate::common;

use common::{nowcast, text, TempDir};
use std::time::Duration;

#[test]
fn bad_option_values_name_their_flag_and_exit_2() {
    let dir = TempDir::new("usage");
    let file = dir.join("x.bin");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let token = "00112233445566778899aabbccddeeff";
    let config = dir.join("proxy.toml");
    std::fs::write(
        &config,
        "[[service]]\nprefix = \"/\"\nreplicas = [{ name = \"a\", url = \"http://127.0.0.1:9\" }]\nepsilon = 2\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let d = dir.to_str().unwrap();
    let rows: [(&[&str], &str); 23] = [
        // clap's own refusal, the reference.
        (&["serve", "--handshake", "soon"], "--handshake"),
        (
            &["serve", "--handshake", "0"],
            "--handshake must be a positive number of seconds",
        ),
        (
            &["fobs", "send", f, "127.0.0.1", "--token", "xyz"],
            "--token: ",
        ),
        (
            &[
                "fobs",
                "send",
                f,
                "127.0.0.1",
                "--token",
                token,
                "--rate",
                "0",
            ],
            "--rate: ",
        ),
        (
            &[
                "fobs",
                "send",
                f,
                "127.0.0.1",
                "--token",
                token,
                "--max-rate",
                "fast",
            ],
            "--max-rate: ",
        ),
        (
            &["pcap", "--idle", "0", f],
            "--idle must be a positive number of seconds",
        ),
        // Ignored without a word with files until 2026-12-08.
        (
            &["pcap", "--filter", "port 9", f],
            "--filter applies to --live captures; to analyse part of a file, filter it first",
        ),
        (
            &["pcap", "--duration", "5", f],
            "--duration applies to --live captures",
        ),
        (
            &["forecast", f, "--timeout-floor=-1"],
            "--timeout-floor must be",
        ),
        // A negative number is the flag's value, refused by the flag's own parser: it said
        // "unexpected argument '-1' found", with a tip to pass it as the target.
        (
            &["udp", "127.0.0.1:9", "--interval", "-1"],
            "for '--interval <INTERVAL>': '-1' is not a duration",
        ),
        (
            &["forecast", f, "--timeout-floor", "-1"],
            "--timeout-floor must be",
        ),
        // Refused after parsing, with the subcommand's usage (it printed the top's).
        (
            &["report", f, "--since", "1h", "--until", "2h"],
            "the range holds no time\n\nUsage: nowcast report [OPTIONS]",
        ),
        (
            &[
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--replica",
                "a=http://127.0.0.1:9",
                "--epsilon",
                "2",
            ],
            "--epsilon: 2 is not within 0..1",
        ),
        // A file's setting is the --config flag's value (it exited 1).
        (
            &["proxy", "--config", config],
            "line 4, column 11: `service.epsilon`: 2 is not within 0..1",
        ),
        // Timeout flags against each other and the series' defaults (it said "timeout bounds
        // need 0 < floor ≤ ceiling" with the core's field names).
        (
            &["tcp", "127.0.0.1:9", "--timeout-floor", "5min"],
            "--timeout-floor 300000 ms is above the handshake_rtt series' default ceiling of 10000 ms (--timeout-ceiling sets it)",
        ),
        (
            &["udp", "127.0.0.1:9", "--timeout-initial", "0"],
            "--timeout-initial must be above 0",
        ),
        (
            &["udp", "127.0.0.1:9", "--timeout-floor", "2s", "--timeout-ceiling", "1s"],
            "--timeout-floor 2000 ms is above --timeout-ceiling 1000 ms",
        ),
        // A receiver's flags, each by its own name (`--idle 0` named --grace-ms; 0 connections
        // a minute acted as 1; --rcvbuf 0 was taken).
        (
            &["fobs", "recv", "--dir", d, "--idle", "0"],
            "--idle 0 must be above 0",
        ),
        (
            &["fobs", "recv", "--dir", d, "--per-client-per-minute", "0"],
            "--per-client-per-minute 0 must be above 0",
        ),
        (
            &["fobs", "recv", "--dir", d, "--keep-unfinished", "0"],
            "--keep-unfinished 0 must be above 0",
        ),
        (
            &["fobs", "recv", "--dir", d, "--rcvbuf", "0"],
            "--rcvbuf 0: give a size above 0",
        ),
        (
            &["fobs", "recv", "--dir", d, "--max-size", "abc"],
            "--max-size: 'abc' is not a size",
        ),
        (
            &["fobs", "recv", "--dir", &format!("{d}/nope")],
            "--dir ",
        ),
    ];
    for (args, says) in rows {
        let out = nowcast(args, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
