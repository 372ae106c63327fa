//! A running `nowcast campaign` for the campaign tests: its standard error collected as it
//! comes, stopped with SIGTERM or killed when dropped.

use super::BIN;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `nowcast campaign`, its standard error collected; killed on drop.
pub struct Running {
    pub child: std::process::Child,
    pub lines: Arc<Mutex<Vec<String>>>,
    /// The thread that collects the lines: joined once the campaign has exited, so that its
    /// last lines are there to read (a test read the stop summary while the thread had yet
    /// to take it, on a busy machine).
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    pub fn start(cfg: &Path) -> Running {
        let mut child = Command::new(BIN)
            .args(["campaign", cfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (err, l) = (child.stderr.take().unwrap(), lines.clone());
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
        Running {
            child,
            lines,
            reader: Some(reader),
        }
    }

    pub fn all(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The first line containing `part`, waiting up to `limit`.
    pub fn line(&self, part: &str, limit: Duration) -> Option<String> {
        let until = Instant::now() + limit;
        loop {
            if let Some(l) = self.lines.lock().unwrap().iter().find(|l| l.contains(part)) {
                return Some(l.clone());
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM; the exit status's success within `limit`.
    pub fn stop(&mut self, limit: Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Ok(Some(s)) = self.child.try_wait() {
                // Its standard error is closed: the reader ends with every line (bounded,
                // should a tool it ran still hold the pipe).
                while self.reader.as_ref().is_some_and(|r| !r.is_finished())
                    && Instant::now() < until
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return s.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the campaign did not stop within {limit:?}: {}", self.all());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
