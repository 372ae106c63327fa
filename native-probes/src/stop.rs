//! Stopping on SIGINT and SIGTERM: a flag that long loops check and a wait that a signal
//! cuts short, so that a period between probes or a server's main thread wakes at once.
//! A second signal ends the process immediately (exit status 130), for a user whose first
//! Ctrl-C is waiting on a probe's timeout; a command may first have it say, in one line,
//! what exiting at once abandons ([`on_second_signal`]).

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The line a second signal prints on standard error before the process exits.
pub type Farewell = Box<dyn Fn() -> String + Send + Sync>;

static FAREWELL: Mutex<Option<Farewell>> = Mutex::new(None);

/// Sets what a second signal says before the process exits (what is abandoned: runs in
/// flight, lines not archived), replacing what was set; `None`: nothing is said.
pub fn on_second_signal(f: Option<Farewell>) {
    *FAREWELL.lock().unwrap_or_else(|p| p.into_inner()) = f;
}

/// The second signal: the farewell line, if one is set, then exit status 130.
fn exit_now() -> ! {
    let said = FAREWELL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|f| f());
    if let Some(line) = said {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    std::process::exit(130);
}

/// A shared stop flag.
#[derive(Clone, Default)]
pub struct Stop(Arc<(Mutex<bool>, Condvar)>);

impl Stop {
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag raised by the first SIGINT or SIGTERM.
    pub fn on_signals() -> std::io::Result<Self> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Self::new();
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let mut seen = 0;
                for _ in signals.forever() {
                    seen += 1;
                    if seen > 1 {
                        exit_now();
                    }
                    flag.trigger();
                }
            })?;
        Ok(stop)
    }

    pub fn trigger(&self) {
        let (m, c) = &*self.0;
        *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
        c.notify_all();
    }

    pub fn is_set(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits up to `d`; true if the flag is (or becomes) raised.
    pub fn wait_timeout(&self, d: Duration) -> bool {
        let (m, c) = &*self.0;
        let until = Instant::now() + d;
        let mut set = m.lock().unwrap_or_else(|p| p.into_inner());
        while !*set {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            set = c
                .wait_timeout(set, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *set
    }

    /// Waits until the flag is raised.
    pub fn wait(&self) {
        let (m, c) = &*self.0;
        let mut set = m.lock().unwrap_or_else(|p| p.into_inner());
        while !*set {
            set = c.wait(set).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigger_cuts_a_wait_short() {
        let stop = Stop::new();
        assert!(!stop.wait_timeout(Duration::from_millis(1)));
        let other = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            other.trigger();
        });
        let start = Instant::now();
        assert!(stop.wait_timeout(Duration::from_secs(10)));
        assert!(start.elapsed() < Duration::from_secs(5));
        stop.wait();
        assert!(stop.is_set());
        t.join().unwrap();
    }
}
