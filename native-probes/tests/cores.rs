//! The deterministic cores stay deterministic: no socket, no clock, no printing in their
//! files (docs and tests included), so that the same code runs in the CLI, the page's WASM
//! and the proxy, and a test can replay any trace exactly. The edges beside them (`tcp/io.rs`,
//! `udp/io.rs`, `periodic.rs`, `clock.rs`, `net.rs`, …) do the I/O.

use std::path::{Path, PathBuf};

/// The core files of this crate, relative to `src/`.
const CORES: [&str; 13] = [
    "serve/limits.rs",
    "serve/watchdog.rs",
    "serve/metrics.rs",
    "tcp/mod.rs",
    "tcp/session.rs",
    "tcp/bandwidth.rs",
    "udp/mod.rs",
    "udp/burst.rs",
    "wire.rs",
    "schedule.rs",
    "series.rs",
    "evaluate.rs",
    "series_input.rs",
];

/// What a core file must not name: sockets, clocks, and standard output.
const FORBIDDEN: [&str; 9] = [
    "std::net",
    "Instant::now",
    "SystemTime::now",
    "println!",
    "print!(",
    "eprintln!",
    "eprint!(",
    "stdout",
    "socket2",
];

fn core_files() -> Vec<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = CORES.iter().map(|f| here.join("src").join(f)).collect();
    // Every file of the shared core crate (its WASM bindings included).
    let core = here.join("../core/src");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&core)
        .expect("core/src")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    entries.sort();
    files.extend(entries);
    files
}

#[test]
fn core_files_open_no_socket_read_no_clock_and_print_nothing() {
    let mut found = Vec::new();
    for file in core_files() {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (n, line) in text.lines().enumerate() {
            for token in FORBIDDEN {
                if line.contains(token) {
                    found.push(format!("{}:{}: {token}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "I/O in a core file:\n{}",
        found.join("\n")
    );
    assert!(
        core_files().len() > CORES.len() + 10,
        "the core crate's files were found"
    );
}
