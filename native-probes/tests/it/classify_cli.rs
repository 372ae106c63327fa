//! `nowcast classify` on signatures the shipped model was not trained for, as a user runs it:
//! a verdict at another length than the model's 16,384 packets is marked as not calibrated,
//! a signature of no packets has no per-packet cost, and every count is singular or plural
//! as it should be.

use std::path::PathBuf;
use std::process::Command;

/// Runs `nowcast classify` on a file holding `lines`; returns (status, stdout, stderr).
fn classify(name: &str, lines: &str) -> (Option<i32>, String, String) {
    let dir = std::env::temp_dir().join(format!("nwcl-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file: PathBuf = dir.join(name);
    std::fs::write(&file, lines).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nowcast"))
        .args(["classify", file.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_verdict_at_a_length_the_model_was_not_trained_on_is_marked() {
    let (code, stdout, stderr) = classify("w.sig", "? 100 5 10-20\n");
    assert_eq!(code, Some(0), "{stderr}");
    let row = stdout.lines().nth(2).unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.ends_with("  cpu?"), "{stdout}");
    assert!(
        stdout.contains(
            "\n? a verdict on a signature of another length than the 16384 packets the model was"
        ),
        "{stdout}"
    );
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "{stdout}");
    assert!(stderr.contains("not calibrated"), "{stderr}");
    // At the model's length: no mark, no note.
    let (_, stdout, stderr) = classify("r.sig", "? 16384 5 10-20\n");
    assert!(!stdout.contains('?'), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn no_packets_no_per_packet_cost_and_counts_in_words() {
    let (code, stdout, stderr) = classify("z.sig", "? 0\n");
    assert_eq!(code, Some(0), "{stderr}");
    let cost = stdout
        .lines()
        .find(|l| l.starts_with("cost: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(!cost.contains("per packet"), "{cost}");
    assert!(
        cost.ends_with(" µs per signature (1 signature, 0 packets)"),
        "{cost}"
    );
    // Out of range is ½ by rule at any length: not marked.
    assert!(stdout.contains("  out of range\n"), "{stdout}");
    assert!(!stdout.contains("range?"), "{stdout}");
    let (_, stdout, _) = classify("two.sig", "? 16384 5 10-20\n? 16384 7\n");
    assert!(
        stdout.contains(" ns per packet (2 signatures, 32768 packets)"),
        "{stdout}"
    );
}

#[test]
fn signatures_are_read_from_standard_input_as_other_commands_read_it() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_nowcast"))
        .args(["classify", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"? 16384 5 10-20\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // `-: No such file or directory` before.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 signature"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
