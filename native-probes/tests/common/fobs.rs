//! A real `nowcast fobs recv` on an ephemeral loopback port, for the FOBS tests: its log
//! lines on a channel, the child killed when dropped.

use super::BIN;
use nowcast::rng::Rng;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The token every test receiver takes.
pub const TOKEN: &str = "00112233445566778899aabbccddeeff";

/// A receiver on 127.0.0.1 and an ephemeral port.
pub struct Receiver {
    child: Child,
    pub port: u16,
    lines: mpsc::Receiver<String>,
}

impl Receiver {
    /// `nowcast fobs recv --dir DIR EXTRA`, once it says it listens (within `limit`).
    pub fn start(dir: &Path, extra: &[&str], limit: Duration) -> Receiver {
        let mut child = Command::new(BIN)
            .args(["fobs", "recv", "--listen", "127.0.0.1", "--port", "0"])
            .args(["--token", TOKEN])
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        for out in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send(l);
                }
            });
        }
        let mut r = Receiver {
            child,
            port: 0,
            lines,
        };
        // "nowcast fobs recv: listening on 127.0.0.1:PORT (tcp and udp), …"
        let first = r.wait_for("listening", limit);
        r.port = first
            .split_whitespace()
            .find_map(|w| w.strip_prefix("127.0.0.1:")?.parse().ok())
            .unwrap_or_else(|| panic!("no port in {first:?}"));
        r
    }

    /// The first line containing `what`, within `limit`.
    pub fn wait_for(&self, what: &str, limit: Duration) -> String {
        let until = Instant::now() + limit;
        let mut seen = Vec::new();
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(what) => return l,
                Ok(l) => seen.push(l),
                Err(_) => panic!("no line with {what:?} within {limit:?}; saw {seen:?}"),
            }
        }
    }
}

impl Receiver {
    /// Every line printed within `d` from now.
    pub fn lines_for(&self, d: Duration) -> Vec<String> {
        let until = Instant::now() + d;
        let mut seen = Vec::new();
        while let Ok(l) = self
            .lines
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            seen.push(l);
        }
        seen
    }
}

impl Receiver {
    /// Stops the receiver as its operator does (SIGINT), and waits for it to exit.
    pub fn interrupt(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid, which has not been waited for.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.child.wait().unwrap()
    }

    /// Kills the receiver at once (SIGKILL: no state saved on the way out).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `nowcast fobs send FILE TARGET --token TOKEN -q EXTRA`, started, its output piped.
pub fn send(target: &str, file: &Path, extra: &[&str]) -> Child {
    Command::new(BIN)
        .args(["fobs", "send"])
        .arg(file)
        .arg(target)
        .args(["--token", TOKEN, "-q"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `dir/name`, made of `bytes` pseudo-random bytes (a seeded generator: the same file each
/// run).
pub fn file_of(dir: &Path, name: &str, bytes: usize) -> PathBuf {
    let p = dir.join(name);
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut data = Vec::with_capacity(bytes + 8);
    while data.len() < bytes {
        data.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    data.truncate(bytes);
    std::fs::write(&p, data).unwrap();
    p
}
