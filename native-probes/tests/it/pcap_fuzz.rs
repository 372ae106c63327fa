//! Fuzzing of the capture reader and the analysis as bounded property tests, seeded with real
//! captures made by `tests/pcap_peers.rs` (tcpdump in namespaces; the first packets of each,
//! cut with editcap, are kept in `tests/corpus/pcap/`): random byte changes, insertions,
//! deletions and truncations must never panic, every problem must name a byte offset inside
//! the file, and the packets before the first damage must still be read. Failures are kept in
//! `tests/it/pcap_fuzz.proptest-regressions` and replayed first on every run.
//!
//! `NOWCAST_FUZZ_CASES` sets the cases per property (default 256).

use nowcast::pcap::analysis::{Analyzer, Config};
use nowcast::pcap::read::{read_capture, Problem};
use proptest::prelude::*;
use std::path::PathBuf;

fn cases() -> u32 {
    std::env::var("NOWCAST_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/pcap");
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .filter_map(|e| e.ok())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(v.len() >= 3, "the corpus holds the seed captures");
    v
}

/// The frames read (number, length), the problems, and whether the file was a capture.
type Outcome = (Vec<(u64, usize)>, Vec<Problem>, Result<(), String>);

/// Reads and analyses `bytes`.
fn analyse(bytes: &[u8]) -> Outcome {
    let mut an = Analyzer::new(Config {
        keep_trains: true,
        keep_samples: true,
        ..Config::default()
    });
    let mut frames = Vec::new();
    let mut problems = Vec::new();
    let r = read_capture(
        bytes,
        |f| {
            frames.push((f.number, f.data.len()));
            let _ = an.frame(f.number, f.link, f.data, f.orig_len, f.ts_ns);
        },
        |p| problems.push(p),
    );
    an.finish();
    for r in an.take_records() {
        r.validate().expect("records the analysis makes are valid");
    }
    (frames, problems, r.map(|_| ()).map_err(|e| e.to_string()))
}

#[derive(Clone, Debug)]
enum Edit {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Edit::Set(a, b)),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(a, v)| Edit::Insert(a, v)),
        1 => (any::<usize>(), 1usize..256).prop_map(|(a, n)| Edit::Delete(a, n)),
        1 => any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn apply(mut b: Vec<u8>, edits: &[Edit]) -> (Vec<u8>, usize) {
    // The offset of the first change: everything before it is untouched.
    let mut first = b.len();
    for e in edits {
        if b.is_empty() {
            break;
        }
        match e {
            Edit::Set(a, v) => {
                let at = a % b.len();
                b[at] = *v;
                first = first.min(at);
            }
            Edit::Insert(a, v) => {
                let at = a % b.len();
                b.splice(at..at, v.iter().copied());
                first = first.min(at);
            }
            Edit::Delete(a, n) => {
                let at = a % b.len();
                let end = (at + n).min(b.len());
                b.drain(at..end);
                first = first.min(at);
            }
            Edit::Truncate(a) => {
                let at = a % b.len();
                b.truncate(at);
                first = first.min(at);
            }
        }
    }
    (b, first)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn mutated_captures_never_panic_and_keep_what_precedes_the_damage(
        seed in any::<prop::sample::Index>(),
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let seeds = seeds();
        let (name, original) = &seeds[seed.index(seeds.len())];
        let (clean_frames, clean_problems, _) = analyse(original);
        prop_assert!(clean_problems.is_empty(), "{name}: {clean_problems:?}");
        let (bytes, first) = apply(original.clone(), &edits);
        let (frames, problems, result) = analyse(&bytes);
        for p in &problems {
            prop_assert!(p.offset <= bytes.len() as u64, "{name}: {p} beyond {} bytes", bytes.len());
            prop_assert!(!p.what.is_empty());
        }
        if result.is_ok() {
            // Every frame that ends before the first change is read as it was.
            let kept = count_before(original, first).min(frames.len());
            prop_assert_eq!(&frames[..kept], &clean_frames[..kept], "{}: damage at byte {}", name, first);
        } else {
            // Only the file's headers may make it unreadable as a whole (a pcapng section
            // header is as long as its options make it: 136 bytes in one seed, and a damage
            // at byte 64 of it, which the test once took for past the start, cut it short).
            let headers = headers_len(original);
            prop_assert!(
                first < headers,
                "{name}: refused after damage at byte {first} (headers: {headers}): {result:?}"
            );
        }
    }

    #[test]
    fn random_bytes_after_a_valid_header_never_panic(
        seed in any::<prop::sample::Index>(),
        tail in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let seeds = seeds();
        let (_, original) = &seeds[seed.index(seeds.len())];
        // The file header (and for pcapng the first blocks) followed by noise.
        let head = original.len().min(if original[0] == 0x0a { 200 } else { 24 });
        let mut bytes = original[..head].to_vec();
        bytes.extend_from_slice(&tail);
        let (_, problems, _) = analyse(&bytes);
        for p in &problems {
            prop_assert!(p.offset <= bytes.len() as u64);
        }
    }
}

/// How many packets of `file` end before byte `at`: those read from the prefix alone, less
/// the last, which the cut may have truncated.
/// The length of `file`'s headers, before its first packet: pcap's file header, or pcapng's
/// blocks before the first packet block (the section header, interface descriptions).
fn headers_len(file: &[u8]) -> usize {
    if file[..4] != [0x0a, 0x0d, 0x0d, 0x0a] {
        return 24;
    }
    let little = file[8..12] == [0x4d, 0x3c, 0x2b, 0x1a];
    let word = |at: usize| {
        let b: [u8; 4] = file[at..at + 4].try_into().unwrap();
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let mut at = 0;
    // Enhanced, simple and obsolete packet blocks.
    while at + 8 <= file.len() && ![6, 3, 2].contains(&word(at)) {
        at += word(at + 4) as usize;
    }
    at
}

fn count_before(file: &[u8], at: usize) -> usize {
    analyse(&file[..at.min(file.len())])
        .0
        .len()
        .saturating_sub(1)
}

#[test]
fn every_seed_reads_without_problems_and_finds_tcp() {
    for (name, bytes) in seeds() {
        let (frames, problems, result) = analyse(&bytes);
        assert!(result.is_ok(), "{name}: {result:?}");
        assert!(problems.is_empty(), "{name}: {problems:?}");
        assert!(frames.len() >= 50, "{name}: {} frames", frames.len());
    }
}

#[test]
fn every_truncation_of_a_seed_keeps_the_packets_before_it() {
    for (name, bytes) in seeds() {
        let (all, _, _) = analyse(&bytes);
        let step = (bytes.len() / 97).max(1);
        // The file header: a pcap's 24 bytes, a pcapng's first block; a file cut inside it
        // is not a capture.
        let header = if bytes[0] == 0x0a {
            u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize
        } else {
            24
        };
        for cut in (1..bytes.len()).step_by(step) {
            let (frames, problems, result) = analyse(&bytes[..cut]);
            if cut < header {
                assert!(result.is_err(), "{name} cut at {cut}: {frames:?}");
                continue;
            }
            assert!(result.is_ok(), "{name} cut at {cut}: {result:?}");
            assert!(problems.len() <= 1, "{name} cut at {cut}: {problems:?}");
            let n = frames.len().saturating_sub(1);
            assert_eq!(
                frames[..n].to_vec(),
                all[..n].to_vec(),
                "{name} cut at {cut}: the packets before the cut change"
            );
        }
    }
}

/// `nowcast pcap` on a damaged file, run as a user would. The file is written to a folder of
/// its own (tests run in parallel), removed with it afterwards.
fn nowcast_pcap(bytes: &[u8], name: &str) -> std::process::Output {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("nwpf-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nowcast"))
        .args(["pcap", path.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn the_command_names_each_damage_and_still_prints_the_analysis() {
    let seeds = seeds();
    let ng = &seeds
        .iter()
        .find(|(n, _)| n.ends_with(".pcapng"))
        .unwrap()
        .1;
    // A corrupt block in the middle: its length field overwritten.
    let mut bad = ng.clone();
    let mid = ng.len() / 2;
    // Find the start of a block near the middle by walking the framing.
    let mut at = 0usize;
    while at < mid {
        let len = u32::from_le_bytes(ng[at + 4..at + 8].try_into().unwrap()) as usize;
        at += len;
    }
    bad[at + 4..at + 8].copy_from_slice(&0xdead_beefu32.to_le_bytes());
    let out = nowcast_pcap(&bad, "corrupt.pcapng");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("byte {at}")), "{stderr}");
    assert!(stderr.contains("corrupt block"), "{stderr}");
    assert!(stdout.contains("flow from → to"), "{stdout}");
    // A truncated last packet.
    let pcap = &seeds
        .iter()
        .find(|(n, _)| n == "eth-nanosecond.pcap")
        .unwrap()
        .1;
    let out = nowcast_pcap(&pcap[..pcap.len() - 7], "cut.pcap");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success());
    assert!(
        stderr.contains("(packet 200)") && stderr.contains("truncated"),
        "{stderr}"
    );
    // Not counted: the 199 before it are the capture.
    assert!(String::from_utf8_lossy(&out.stdout).contains("199 packets"));
    // Not a capture at all.
    let out = nowcast_pcap(b"GET / HTTP/1.1\r\n\r\n", "notes.txt");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("not a capture file"), "{stderr}");
}
