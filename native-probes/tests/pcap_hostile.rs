//! `nowcast pcap` against hostile and careless inputs, run as a user would (the built binary
//! on files made here, each in a folder of its own):
//!
//! - a capture of many one-packet flows (a SYN flood, a port scan) is analysed in bounded
//!   memory: the flow table holds at most `--max-flows` flows, and the output says how many
//!   were reported early to make room (peak RSS of the child from GNU `time`);
//! - `--out` naming an input is refused before anything is written: the capture is intact;
//! - a readable capture next to an unreadable input is analysed, the unreadable one named
//!   with its reason, and the run fails at its end;
//! - a well-formed pcapng block beyond the reader's 16 MiB limit is skipped whole and said to
//!   be, not reported as a corrupt block.

use nowcast::pcap::read::{read_capture, Problem};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_nowcast");

/// A folder of this test's own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nwph-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet + IPv4 + TCP frame (no options) from `src:sport` to 192.0.2.1:80.
fn frame(src: [u8; 4], sport: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 20 + payload.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&[192, 0, 2, 1]);
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&0u32.to_be_bytes());
    f.extend_from_slice(&[5 << 4, flags]);
    f.extend_from_slice(&64240u16.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

const SYN: u8 = 0x02;

/// A microsecond pcap of `frames` (capture time in µs since 1970, frame).
fn pcap(frames: impl IntoIterator<Item = (i64, Vec<u8>)>) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for (us, f) in frames {
        for v in [
            (us / 1_000_000) as u32,
            (us % 1_000_000) as u32,
            f.len() as u32,
            f.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&f);
    }
    b
}

/// `n` TCP SYNs over 10 s, each from a source address and port of its own: `n` flows of one
/// packet each.
fn syn_flood(n: u32) -> Vec<u8> {
    let t0 = 1_700_000_000_000_000i64;
    pcap((0..n).map(|i| {
        let src = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
        let us = t0 + i as i64 * 10_000_000 / n as i64;
        (
            us,
            frame(
                src,
                1024 + (i % 60_000) as u16,
                i.wrapping_mul(7919),
                SYN,
                &[],
            ),
        )
    }))
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
    /// Peak resident set of the child, KiB.
    max_rss_kib: i64,
}

/// Runs `nowcast ARGS` with its output in files (no pipe to drain while it runs), under GNU
/// `time` for its own peak RSS. (`wait4` on a child of this process counts this process's
/// resident memory at the spawn, shared until the exec: another test's capture in memory
/// read as the child's.)
fn nowcast(dir: &Dir, args: &[&str]) -> Run {
    let (out, err, rss) = (dir.path("stdout"), dir.path("stderr"), dir.path("rss"));
    let status = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&rss)
        .arg(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .expect("start /usr/bin/time (Debian's package time) and nowcast");
    let rss = std::fs::read_to_string(&rss).unwrap();
    Run {
        ok: status.success(),
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
        // The last line: a child killed by a signal has a line about that before it.
        max_rss_kib: rss
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_flood_of_one_packet_flows_is_analysed_in_bounded_memory_and_the_cap_is_said() {
    let dir = Dir::new("flood");
    let file = dir.path("flood.pcap");
    // 200,000 flows: twice the default cap. Unbounded, they took 3.7 KB each (760 MB).
    std::fs::write(&file, syn_flood(200_000)).unwrap();

    let r = nowcast(&dir, &["pcap", s(&file)]);
    assert!(r.ok, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("200000 frames, 200000 TCP segments in 200000 flows"),
        "{}",
        &r.stdout[..r.stdout.len().min(2000)]
    );
    assert!(
        r.stdout
            .contains("the flow table was full (100000 flows at once, --max-flows)"),
        "{}",
        &r.stdout[..r.stdout.len().min(2000)]
    );
    assert!(
        r.stdout
            .contains("199950 of 200000 flows are not in the table, which holds the 50 with the most bytes (--rows)"),
        "{}",
        &r.stdout[..r.stdout.len().min(2000)]
    );
    // A table for people: 50 rows (it printed 100,000 rows, one per flow the table held).
    let rows = r.stdout.lines().filter(|l| l.contains(":80 ")).count();
    assert_eq!(rows, 50, "the default --rows");
    assert!(
        r.max_rss_kib < 400 << 10,
        "peak RSS {} MiB with the default cap",
        r.max_rss_kib >> 10
    );

    // A smaller cap: memory follows it. With --json, the records alone on standard output
    // (SYNs make none), the note on standard error.
    let r = nowcast(&dir, &["pcap", "--json", "--max-flows", "10000", s(&file)]);
    assert!(r.ok, "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    let evicted: u64 = r
        .stderr
        .split("the flow table was full (10000 flows at once, --max-flows): ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no note: {}", r.stderr));
    assert!((190_000..200_000).contains(&evicted), "{evicted}");
    assert!(
        r.max_rss_kib < 120 << 10,
        "peak RSS {} MiB with 10000 flows at most",
        r.max_rss_kib >> 10
    );
}
#[test]
fn a_flow_table_that_never_fills_changes_nothing() {
    // Ten flows of data, one of them long: the same table with a cap far above them.
    let dir = Dir::new("small");
    let file = dir.path("small.pcap");
    let t0 = 1_700_000_000_000_000i64;
    let mut frames = Vec::new();
    for i in 0..10u8 {
        for k in 0..(1 + u32::from(i) * 3) {
            let us = t0 + i64::from(i) * 1000 + i64::from(k) * 100_000;
            frames.push((us, frame([10, 0, 0, i], 4000, 1 + k * 100, 0x18, &[7; 100])));
        }
    }
    frames.sort_by_key(|f| f.0);
    std::fs::write(&file, pcap(frames)).unwrap();
    let a = nowcast(&dir, &["pcap", s(&file)]);
    let b = nowcast(&dir, &["pcap", "--max-flows", "10", s(&file)]);
    assert!(a.ok && b.ok, "{}{}", a.stderr, b.stderr);
    assert_eq!(a.stdout, b.stdout);
    assert!(!a.stdout.contains("Note:"), "{}", a.stdout);
    // One flow fewer than the cap: the flows idle longest make room, and it is said.
    let c = nowcast(&dir, &["pcap", "--max-flows", "9", s(&file)]);
    assert!(c.ok, "{}", c.stderr);
    assert!(c
        .stdout
        .contains("the flow table was full (9 flows at once"));
    assert!(c.stdout.contains("in 10 flows"), "{}", c.stdout);
    // --flows marks the flow reported early: the first, idle longest when the last came.
    let f = nowcast(&dir, &["pcap", "--flows", "--max-flows", "9", s(&file)]);
    assert!(f.ok, "{}", f.stderr);
    // A block per flow, its lines joined: the flow on one line.
    let flows = f.stdout.replace("\n  ", " ");
    let marks: Vec<bool> = flows
        .lines()
        .filter(|l| l.starts_with("flow="))
        .map(|l| l.contains(" evicted=true "))
        .collect();
    assert_eq!(marks.len(), 10);
    assert_eq!(marks.iter().filter(|m| **m).count(), 1, "{}", f.stdout);
    assert!(
        f.stdout.contains("flow=0 a=10.0.0.0:4000") && marks[0],
        "{}",
        f.stdout
    );
    assert!(
        f.stderr.contains("the flow table was full (9 flows"),
        "{}",
        f.stderr
    );
    let z = nowcast(&dir, &["pcap", "--max-flows", "0", s(&file)]);
    assert!(!z.ok && z.stderr.contains("--max-flows"), "{}", z.stderr);
    // --rows: the three flows with the most bytes (the last three: each has more packets
    // than the one before), and the seven left out said.
    let r = nowcast(&dir, &["pcap", "--rows", "3", s(&file)]);
    assert!(r.ok, "{}", r.stderr);
    let rows: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains(":4000 →") && !l.starts_with("flow "))
        .collect();
    assert_eq!(rows.len(), 3, "{}", r.stdout);
    assert!(
        rows.iter()
            .all(|l| l.contains("10.0.0.7:") || l.contains("10.0.0.8:") || l.contains("10.0.0.9:")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.replace("\n  ", " ").contains(
            "7 of 10 flows are not in the table, which holds the 3 with the most bytes (--rows)"
        ),
        "{}",
        r.stdout
    );
    let z = nowcast(&dir, &["pcap", "--rows", "0", s(&file)]);
    assert!(!z.ok && z.stderr.contains("--rows"), "{}", z.stderr);
}

#[test]
fn out_naming_an_input_is_refused_and_the_capture_left_intact() {
    let dir = Dir::new("out");
    let file = dir.path("victim.pcap");
    let bytes = syn_flood(10);
    std::fs::write(&file, &bytes).unwrap();
    std::fs::hard_link(&file, dir.path("alias.pcap")).unwrap();
    std::os::unix::fs::symlink(&file, dir.path("link.pcap")).unwrap();
    std::fs::create_dir(dir.path("sub")).unwrap();
    let dotted = dir.path("sub/../victim.pcap");
    for out in [
        file.clone(),
        dir.path("alias.pcap"),
        dir.path("link.pcap"),
        dotted,
    ] {
        let r = nowcast(&dir, &["pcap", "--json", "--out", s(&out), s(&file)]);
        assert!(!r.ok, "--out {out:?} accepted");
        assert!(
            r.stderr.contains("--out") && r.stderr.contains("victim.pcap"),
            "{}",
            r.stderr
        );
        assert_eq!(std::fs::read(&file).unwrap(), bytes, "--out {out:?}");
    }
    // The second input too, and without --json.
    let other = dir.path("other.pcap");
    std::fs::write(&other, &bytes).unwrap();
    let r = nowcast(&dir, &["pcap", "--out", s(&file), s(&other), s(&file)]);
    assert!(!r.ok);
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    // A file of its own is written.
    let rec = dir.path("records.ndjson");
    let r = nowcast(&dir, &["pcap", "--out", s(&rec), s(&file)]);
    assert!(r.ok, "{}", r.stderr);
    assert!(rec.exists());
}

#[test]
fn every_readable_capture_is_analysed_and_each_unreadable_input_named() {
    let dir = Dir::new("mixed");
    let good = dir.path("good.pcap");
    std::fs::write(&good, syn_flood(25)).unwrap();
    let garbage = dir.path("garbage.bin");
    std::fs::write(&garbage, b"\x00\x01\x02\x03 this is not a capture").unwrap();
    let missing = dir.path("missing.pcap");
    let r = nowcast(&dir, &["pcap", s(&good), s(&garbage), s(&missing)]);
    assert!(!r.ok, "an input was not read: the run fails");
    assert!(
        r.stdout.contains("good.pcap: 25 packets") && r.stdout.contains("in 25 flows"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr
            .contains(&format!("{}: not a capture file", garbage.display())),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains(&format!("{}: open: No such file", missing.display())),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("2 of 3 input files not read"),
        "{}",
        r.stderr
    );
    // The unreadable first: the same.
    let r = nowcast(&dir, &["pcap", "--flows", s(&garbage), s(&good)]);
    assert!(!r.ok);
    assert_eq!(
        r.stdout.lines().filter(|l| l.starts_with("flow=")).count(),
        25
    );
    // Nothing readable: no table, only the reasons.
    let r = nowcast(&dir, &["pcap", s(&garbage)]);
    assert!(!r.ok && r.stdout.is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("not a capture file"), "{}", r.stderr);
}

/// A pcapng block of `ty` with `body` (padded to 4 bytes), little-endian.
fn block(ty: u32, body: &[u8]) -> Vec<u8> {
    let pad = (4 - body.len() % 4) % 4;
    let len = (12 + body.len() + pad) as u32;
    let mut b = Vec::with_capacity(len as usize);
    b.extend_from_slice(&ty.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(body);
    b.resize(b.len() + pad, 0);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

fn epb(us: u64, f: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for v in [
        0u32,
        (us >> 32) as u32,
        us as u32,
        f.len() as u32,
        f.len() as u32,
    ] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(f);
    block(6, &body)
}

fn read(bytes: &[u8]) -> (Vec<u64>, Vec<Problem>) {
    let (mut frames, mut problems) = (Vec::new(), Vec::new());
    read_capture(bytes, |f| frames.push(f.number), |p| problems.push(p)).unwrap();
    (frames, problems)
}

#[test]
fn a_pcapng_block_beyond_the_size_limit_is_skipped_whole_and_said_to_be() {
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes());
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&65535u32.to_le_bytes());
    let head = [block(0x0A0D_0D0A, &shb), block(1, &idb)].concat();
    let syn = frame([10, 0, 0, 1], 4000, 1, SYN, &[]);
    let us = 1_700_000_000_000_000u64;
    let first = epb(us, &syn);
    // A local-use block of 17 MiB, well formed.
    let big = block(0x8000_0001, &vec![0u8; 17 << 20]);
    let at = (head.len() + first.len()) as u64;
    let file = [head.clone(), first.clone(), big.clone(), epb(us + 1, &syn)].concat();
    let (frames, problems) = read(&file);
    assert_eq!(frames, vec![1, 2], "{problems:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert_eq!((p.offset, p.packet), (at, None));
    assert!(
        p.what.contains("type 0x80000001")
            && p.what.contains(&format!("{} bytes", big.len()))
            && p.what.contains("longer than the 16 MiB")
            && p.what.contains("skipped whole")
            && !p.what.contains("corrupt"),
        "{p}"
    );
    // The same block last in the file.
    let (frames, problems) = read(&[head.clone(), first.clone(), big.clone()].concat());
    assert_eq!(frames, vec![1]);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].what.contains("skipped whole"),
        "{}",
        problems[0]
    );
    // Its closing length damaged: that is a corrupt block.
    let mut bad = big;
    let n = bad.len();
    bad[n - 4..].copy_from_slice(&12345u32.to_le_bytes());
    let (frames, problems) = read(&[head, first, bad, epb(us + 1, &syn)].concat());
    assert_eq!(frames, vec![1, 2]);
    assert!(
        problems[0].what.contains("corrupt block"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_clock_that_goes_back_is_read_on_and_said() {
    let dir = Dir::new("clock");
    let file = dir.path("stepped.pcap");
    // 20 segments of data 10 ms apart; the clock is stepped back 50 s before the 11th.
    let t0 = 1_700_000_000_000_000i64;
    let frames = (0..20u32).map(|k| {
        let us = t0 + i64::from(k) * 10_000 - if k >= 10 { 50_000_000 } else { 0 };
        (us, frame([10, 0, 0, 1], 4000, 1 + k * 100, 0x18, &[7; 100]))
    });
    std::fs::write(&file, pcap(frames)).unwrap();
    let r = nowcast(&dir, &["pcap", s(&file)]);
    assert!(r.ok, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("packet 11: the capture's clock goes back 50.0 s (stepped?)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout
            .contains("20 packets, 3080 bytes, pcap, 1 problem (above)"),
        "{}",
        r.stdout
    );
    // The flow's duration: 19 steps of 10 ms less the one across the step (it read -49.8 s).
    assert!(r.stdout.contains("     0.180 s"), "{}", r.stdout);
    assert!(!r.stdout.contains(" -49."), "{}", r.stdout);

    // The same file twice: read as one capture, and said.
    let file = dir.path("even.pcap");
    let frames = (0..20u32).map(|k| {
        let us = t0 + i64::from(k) * 10_000;
        (us, frame([10, 0, 0, 1], 4000, 1 + k * 100, 0x18, &[7; 100]))
    });
    std::fs::write(&file, pcap(frames)).unwrap();
    let r = nowcast(&dir, &["pcap", s(&file), s(&file)]);
    assert!(r.ok, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "its first packet is 0.190 s before the end of the file before it (files out of order, overlapping, or given twice?)"
        ),
        "{}",
        r.stderr
    );

    // A capture's header and nothing after it that reads as a packet: not read, the run
    // fails (it was "0 packets" and success).
    let junk = dir.path("junk.pcap");
    let mut bytes = pcap([]);
    bytes.extend_from_slice(b"no record here, only words");
    std::fs::write(&junk, bytes).unwrap();
    let r = nowcast(&dir, &["pcap", s(&junk)]);
    assert!(!r.ok, "{}", r.stdout);
    assert!(
        r.stderr
            .contains("junk.pcap: pcap, but no packet could be read (1 problem above); not read"),
        "{}",
        r.stderr
    );
    // An empty capture (a header, no packet) is a capture of nothing, and no failure.
    std::fs::write(&junk, pcap([])).unwrap();
    let r = nowcast(&dir, &["pcap", s(&junk)]);
    assert!(r.ok, "{}", r.stderr);
}
