//! `nowcast pcap` as a user runs it on small real captures: those of `tests/corpus/pcap/` (made
//! by `tests/pcap_peers.rs`) and of `tests/corpus/pcap-cli/` (tcpdump on loopback: five UDP
//! datagrams, `udp-only.pcap`; one short TCP exchange, `tcp-small.pcap`), whole and cut short.
//! Every output that has nothing to show says so and why; a file too short for its header is
//! an error like an empty one; a packet the end of the file cuts short is treated alike in
//! pcap and pcapng; every line fits in 100 columns.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name)
}

fn nowcast(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nowcast"))
        .arg("pcap")
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `bytes` in a folder of its own (tests run in parallel), kept until the value is dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, bytes: &[u8]) -> (Scratch, PathBuf) {
        let dir = std::env::temp_dir().join(format!("nwpc-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        (Scratch(dir), path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn assert_narrow(s: &str) {
    for l in s.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
}

#[test]
fn a_capture_without_tcp_says_what_it_held_instead_of_an_empty_table() {
    let udp = corpus("pcap-cli/udp-only.pcap");
    let out = nowcast(&[], &udp);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("\nno TCP flows in 5 packets (5 UDP)\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("flow from → to"), "{stdout}");
    // --flows, --samples and --trains say the same instead of nothing.
    let out = nowcast(&["--flows", "--samples", "--trains"], &udp);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "no TCP flows in 5 packets (5 UDP)\n\
         no RTT samples: no TCP flows in 5 packets (5 UDP)\n\
         no Wren trains: no TCP flows in 5 packets (5 UDP)\n"
    );
}

#[test]
fn trains_that_are_none_are_said_with_why() {
    let out = nowcast(&["--trains"], &corpus("pcap-cli/tcp-small.pcap"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("no Wren trains in the 1 direction Wren analysed (of 1 flow): a train is at least 7 data packets in a row"), "{stdout}");
    // The same with --json: on standard error, the records on standard output.
    let out = nowcast(&["--trains", "--json"], &corpus("pcap-cli/tcp-small.pcap"));
    assert!(
        text(&out.stderr).starts_with("no Wren trains in "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn flows_and_trains_fit_in_100_columns_with_rtts_in_ms() {
    // From a short path: a line that names the file is as long as its path.
    let bytes = std::fs::read(corpus("pcap/eth-nanosecond.pcap")).unwrap();
    let (_dir, file) = Scratch::new("w.pcap", &bytes);
    let out = nowcast(&["--flows", "--trains", "--samples"], &file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_narrow(&stdout);
    // A block per flow: joined, the fields of one flow; RTTs in ms, as the table has them.
    let joined = stdout.replace("\n  ", " ");
    let flow = joined
        .lines()
        .find(|l| l.starts_with("flow=1 "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let field = |k: &str| {
        flow.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k}: {flow}"))
    };
    let median: f64 = field("ab.ack_rtt.median_ms").parse().unwrap();
    let table = text(&nowcast(&[], &file).stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("1 ") && l.contains("10.231.77.1:50692 →"))
        .unwrap_or_else(|| panic!("{table}"));
    let shown: f64 = row.split_whitespace().last().unwrap().parse().unwrap();
    assert!(
        // The table shows two or three significant digits.
        (median - shown).abs() <= 0.05 * shown,
        "{median} ms vs the table's {shown}: {flow}\n{table}"
    );
    // The trains: a table under a heading for the direction.
    assert!(
        stdout.contains("flow 1 10.231.77.1:50692 → 10.231.77.2:5201:\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ISR Mbit/s  ACK Mbit/s  verdict"),
        "{stdout}"
    );
    assert!(stdout.contains(" lower_bound\n"), "{stdout}");
    assert!(
        stdout.contains("sample flow=0 dir=ab packet=2 method=ack rtt_ms="),
        "{stdout}"
    );
}

#[test]
fn a_file_too_short_for_its_header_is_an_error_as_an_empty_one_is() {
    for (seed, name) in [
        ("pcap/eth-nanosecond.pcap", "short.pcap"),
        ("pcap/two-interfaces.pcapng", "short.pcapng"),
    ] {
        let bytes = std::fs::read(corpus(seed)).unwrap();
        for cut in [0, 10] {
            let (_dir, file) = Scratch::new(&format!("{cut}-{name}"), &bytes[..cut]);
            let out = nowcast(&[], &file);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name} cut at {cut}: {stderr}");
            assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
            let what = match (cut, name.ends_with("ng")) {
                (0, _) => "the file is empty".to_string(),
                (_, false) => "10 bytes: a pcap file header cut short (it is 24 bytes)".into(),
                (_, true) => "10 bytes: a pcapng section header cut short".into(),
            };
            assert!(
                stderr.contains(&format!("{}: {what}", file.display())),
                "{stderr}"
            );
            assert!(stderr.contains("1 of 1 input file not read"), "{stderr}");
        }
    }
}

/// The packets `nowcast pcap` counted in `file`, from the headline.
fn packets(file: &Path) -> (u64, String) {
    let out = nowcast(&[], file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // "FILE: N packets, …", or, when that would pass 100 columns, "FILE:" with "  N packets,
    // …" under it (the length of the path decides).
    let n = stdout
        .lines()
        .find_map(|l| {
            l.split(" packets, ")
                .next()?
                .rsplit([' ', ':'])
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{stdout}"));
    (n, text(&out.stderr))
}

#[test]
fn a_packet_cut_short_by_the_end_of_the_file_is_not_counted_in_pcap_or_pcapng() {
    for (seed, name) in [
        ("pcap/eth-nanosecond.pcap", "cut.pcap"),
        ("pcap/two-interfaces.pcapng", "cut.pcapng"),
    ] {
        let whole = corpus(seed);
        let (all, _) = packets(&whole);
        let bytes = std::fs::read(&whole).unwrap();
        let (_dir, file) = Scratch::new(name, &bytes[..bytes.len() - 7]);
        let (cut, stderr) = packets(&file);
        assert_eq!(cut, all - 1, "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("(packet {all}): truncated"))
                && stderr.contains("that packet is not analysed or counted"),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn a_flows_throughput_record_carries_its_bytes_and_the_time_they_took() {
    // `nowcast report` groups the flows into transfers by IEPM-BW's three methods from these
    // (their start, bytes and duration); without the duration every flow was compared only as
    // recorded, and the record's time was the flow's end, a transfer's length from its run.
    let out = nowcast(&["--json"], &corpus("pcap/eth-nanosecond.pcap"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut seen = 0;
    for line in text(&out.stdout).lines() {
        let r = nowcast_core::record::Record::parse(line).unwrap();
        if r.source != "pcap" || r.metric != nowcast_core::record::Metric::Throughput {
            continue;
        }
        let p = r.probe.as_ref().expect("a probe");
        let (bytes, ms) = (p.payload_bytes.unwrap() as f64, p.raw_ms.unwrap());
        let value = r.value.unwrap();
        assert!(ms > 0.0, "{line}");
        assert!(
            (value - bytes * 8.0 / ms / 1e3).abs() <= 1e-9 * value.max(1.0),
            "the rate is its bytes over its time: {line}"
        );
        seen += 1;
    }
    assert!(seen >= 2, "{seen} throughput records");
}

#[test]
fn records_name_a_service_by_its_port_and_a_client_by_its_address() {
    // Three iperf3 connections (client 10.231.77.1, ports 50680, 50692, 50698, to the server's
    // 5201). The client's ephemeral port names one connection: as a target it made every
    // connection's reverse direction a series of its own (a capture of many connections gave
    // the report hundreds of "targets"). The records keep it in `from`.
    let out = nowcast(&["--json"], &corpus("pcap/eth-nanosecond.pcap"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let records: Vec<nowcast_core::record::Record> = text(&out.stdout)
        .lines()
        .map(|l| nowcast_core::record::Record::parse(l).unwrap())
        .collect();
    let mut targets: Vec<&str> = records.iter().map(|r| r.to.as_str()).collect();
    targets.sort();
    targets.dedup();
    // The flows' records to the service and back to the client; the transfers' by address.
    assert_eq!(
        targets,
        ["10.231.77.1", "10.231.77.2", "10.231.77.2:5201"],
        "{records:?}"
    );
    let back: Vec<&str> = records
        .iter()
        .filter(|r| r.to == "10.231.77.1")
        .filter_map(|r| r.from.as_deref())
        .collect();
    assert!(!back.is_empty() && back.iter().all(|f| *f == "10.231.77.2:5201"));
    let mut clients: Vec<&str> = records
        .iter()
        .filter(|r| r.to == "10.231.77.2:5201")
        .filter_map(|r| r.from.as_deref())
        .collect();
    clients.sort();
    clients.dedup();
    assert_eq!(
        clients,
        [
            "10.231.77.1:50680",
            "10.231.77.1:50692",
            "10.231.77.1:50698"
        ]
    );
}
