//! Fuzzing of the reader of measurement files (core/src/import), the decoder every imported
//! file passes through on the page and in `nowcast forecast`. Seeds are the files the real
//! tools wrote (tests/import/), the page's samples and the schema's examples; cases mutate
//! their bytes (flips, insertions, deletions, truncations, duplicated lines), or are random
//! bytes and random lines of the shapes the reader knows.
//!
//! Whatever a file holds, the reader never panics, every value and time it gives is finite
//! and within the forecaster's range (so nothing imported can poison the page's saved state),
//! errors name a line that exists, and the errors kept are bounded.
//!
//! `NOWCAST_FUZZ_CASES` sets the number of cases per property (npm test: the default;
//! `npm run bench`: a long run).

use nowcast_core::import::{read_text, Imported, Options, Problem, Reader, Sink};
use nowcast_core::json::SerdeJson;
use proptest::prelude::*;
use std::path::PathBuf;

/// The largest magnitude the forecaster bank accepts.
const RANGE: f64 = 1e100;

fn cases() -> u32 {
    std::env::var("NOWCAST_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

fn seeds() -> Vec<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in [
        root.join("tests/import"),
        root.join("../public/samples"),
        root.join("../public/schema/examples"),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x != "sh"))
            .collect();
        files.sort();
        for f in files {
            let mut bytes = std::fs::read(&f).unwrap();
            // Long seeds are cut: mutations of their first part exercise the same code.
            bytes.truncate(16 * 1024);
            out.push(bytes);
        }
    }
    assert!(out.len() >= 15, "seed files: {}", out.len());
    out
}

#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    DuplicateLine(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let shapes = prop_oneof![
        any::<Vec<u8>>(),
        Just(b"1e400".to_vec()),
        Just(b"-1e101".to_vec()),
        Just(b"NaN".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b",,,,".to_vec()),
        Just(b"{\"".to_vec()),
        Just(b"]}".to_vec()),
        Just(vec![0xff, 0xfe]),
        Just(b"9007199254740993".to_vec()),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), shapes).prop_map(|(i, b)| Edit::Insert(i, b)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Delete(i, n)),
        any::<usize>().prop_map(Edit::Truncate),
        any::<usize>().prop_map(Edit::DuplicateLine),
    ]
}

fn apply(mut b: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = b.len().max(1);
        match e {
            Edit::Flip(i, x) if !b.is_empty() => {
                let i = i % b.len();
                b[i] ^= x;
            }
            Edit::Flip(..) => {}
            Edit::Insert(i, bytes) => {
                let at = i % (b.len() + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            Edit::Delete(i, len) => {
                let at = i % n;
                let end = (at + len).min(b.len());
                if at < end {
                    b.drain(at..end);
                }
            }
            Edit::Truncate(i) => b.truncate(i % n),
            Edit::DuplicateLine(i) => {
                let lines: Vec<&[u8]> = b.split(|&c| c == b'\n').collect();
                let l = lines[i % lines.len()].to_vec();
                b.extend_from_slice(b"\n");
                b.extend_from_slice(&l);
            }
        }
    }
    b
}

/// The page's reading: the whole text, every series.
fn check_text(bytes: &[u8]) -> Imported {
    let text = String::from_utf8_lossy(bytes);
    let lines = text.split('\n').count() as u64;
    let r = read_text(&text, SerdeJson);
    for (info, times, values) in &r.series {
        assert_eq!(times.len(), values.len(), "{}", info.name);
        for (&t, &v) in times.iter().zip(values) {
            assert!(t.is_finite(), "{}: time {t}", info.name);
            assert!(
                v.is_finite() && v.abs() <= RANGE,
                "{}: value {v}",
                info.name
            );
        }
    }
    assert!(r.errors.len() <= Imported::MAX_ERRORS);
    assert!(r.error_count >= r.errors.len() as u64);
    for e in &r.errors {
        assert!(
            (1..=lines).contains(&e.line),
            "line {} of {lines}: {e}",
            e.line
        );
        assert!(e.text.chars().count() <= 200, "{e}");
    }
    r
}

/// The command's reading: raw byte lines, one series chosen (the first found).
fn check_lines(bytes: &[u8]) {
    #[derive(Default)]
    struct Out {
        values: u64,
        problems: u64,
    }
    impl Sink for Out {
        fn point(&mut self, _: usize, t: f64, v: f64) {
            assert!(
                t.is_finite() && v.is_finite() && v.abs() <= RANGE,
                "{t} {v}"
            );
            self.values += 1;
        }
        fn problem(&mut self, p: Problem) {
            if let Problem::Line(e) = &p {
                assert!(e.line >= 1);
            }
            self.problems += 1;
        }
    }
    let mut reader = Reader::new(SerdeJson, Options::default());
    let mut out = Out::default();
    for (i, line) in bytes.split(|&c| c == b'\n').enumerate() {
        if reader.stopped() {
            break;
        }
        reader.line(i as u64 + 1, line, &mut out);
    }
    reader.finish(&mut out);
    let counted: u64 = reader.counts().iter().sum();
    assert!(
        counted <= out.values,
        "{counted} counted, {} given",
        out.values
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn mutated_tool_files_never_panic_or_give_values_out_of_range(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let seeds = seeds();
        let bytes = apply(seeds[seed.index(seeds.len())].clone(), &edits);
        check_text(&bytes);
        check_lines(&bytes);
    }

    #[test]
    fn random_bytes_and_lines_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        lines in prop::collection::vec(
            prop_oneof![
                "[-+0-9eE.,\\t ]{0,40}",
                "\\{\"[a-z_]{1,12}\":[-0-9.e]{1,10}(,\"[a-z_]{1,12}\":\"[a-z/]{0,8}\")?\\}",
                "(64 bytes from [0-9.]{7,15}: icmp_seq=[0-9]{1,4} ttl=[0-9]{1,3} time=[-0-9.e]{1,8} ms)",
                "[a-z_ ,\"]{0,30}",
            ],
            0..40,
        ),
    ) {
        check_text(&bytes);
        check_lines(&bytes);
        let text = lines.join("\n");
        check_text(text.as_bytes());
        check_lines(text.as_bytes());
    }
}

#[test]
fn every_seed_reads_whole_and_in_range() {
    let mut series = 0;
    for seed in seeds() {
        series += check_text(&seed).series.len();
        check_lines(&seed);
    }
    assert!(series >= 15, "series found in the seeds: {series}");
}
