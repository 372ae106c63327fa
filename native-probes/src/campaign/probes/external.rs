//! Running an external measurement tool: in a process group of its own, its output read
//! to a cap, and a [`Cancel`] through which the runner kills the whole group — every
//! process the tool started (IEPM-BW §III.A.3: probes that hang must be killed, and the
//! code that kills them must itself be timed out). The kill is bounded: SIGTERM, then
//! SIGKILL after [`KILL_GRACE`], and the runner does not wait longer than that for the
//! tool's end.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a tool has to end after SIGTERM before SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_millis(1_000);

/// Output kept at most, per stream.
const MAX_OUTPUT: u64 = 4 << 20;

/// A run's handle for the runner: whether it was killed, and the process group to kill.
#[derive(Debug, Default)]
pub struct Cancel {
    group: Mutex<Option<i32>>,
    killed: AtomicBool,
}

impl Cancel {
    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Kills the run: SIGTERM to its process group, SIGKILL after the grace if the group
    /// is still there. Returns within [`KILL_GRACE`] and a little; says what it did.
    pub fn kill(&self) -> String {
        self.killed.store(true, Ordering::Release);
        let Some(pg) = *self.group.lock().unwrap_or_else(|p| p.into_inner()) else {
            // A probe of nowcast's own (tcp, udp, http, fobs) runs on a thread of this
            // process: there is nothing to signal, so the run is abandoned instead.
            return "the probe runs inside nowcast, so there was no process to kill; the run \
                    was abandoned and what it measures when it ends is discarded"
                .into();
        };
        let alive = || unsafe { libc::kill(-pg, 0) } == 0;
        // SAFETY: signalling a process group this process created.
        unsafe { libc::kill(-pg, libc::SIGTERM) };
        let until = Instant::now() + KILL_GRACE;
        while alive() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive() {
            // SAFETY: as above.
            unsafe { libc::kill(-pg, libc::SIGKILL) };
            return format!(
                "process group {pg} killed (SIGTERM, then SIGKILL after {} ms)",
                KILL_GRACE.as_millis()
            );
        }
        format!("process group {pg} ended on SIGTERM")
    }
}

/// What a tool gave.
#[derive(Debug)]
pub struct ToolOutput {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
}

fn read_capped(mut r: impl Read) -> String {
    let mut buf = Vec::new();
    let _ = r.by_ref().take(MAX_OUTPUT).read_to_end(&mut buf);
    // Drain the rest so that the tool never blocks on a full pipe.
    let _ = std::io::copy(&mut r, &mut std::io::sink());
    String::from_utf8_lossy(&buf).into_owned()
}

/// Runs `program args` in its own process group until it ends or is killed through
/// `cancel`. The tool is killed with the campaign too, however the campaign ends (a SIGKILL
/// leaves no iperf3 or ping running on): the kernel sends it SIGKILL when the thread that
/// started it, which waits for it here, is gone.
pub fn run(program: &str, args: &[String], cancel: &Cancel) -> Result<ToolOutput, String> {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: between fork and exec, only async-signal-safe calls: prctl, getppid, kill.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The campaign may have died before the request took effect.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| format!("{program}: {e}"))?;
    *cancel.group.lock().unwrap_or_else(|p| p.into_inner()) = Some(child.id() as i32);
    if cancel.killed() {
        cancel.kill();
    }
    let stderr = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || read_capped(stderr));
    let stdout = read_capped(child.stdout.take().expect("piped"));
    let status = child.wait().map_err(|e| format!("{program}: wait: {e}"))?;
    let stderr = err_reader.join().unwrap_or_default();
    Ok(ToolOutput {
        stdout,
        stderr,
        success: status.success(),
    })
}
