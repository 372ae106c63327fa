//! The thin loop that runs a campaign: it asks the [`Scheduler`] what to do, starts each run
//! on a thread of its own, kills what overran, writes records and the run log to the
//! [`Archive`], serves `/metrics`, and on SIGTERM stops starting runs, waits for those in
//! flight (at most the shutdown grace), then kills and records the rest.
//!
//! A campaign runs once per archive at a time ([`CampaignLock`]): a second copy would
//! measure every target twice and its run log rows would collide with the first's.

use super::config::Campaign;
use super::metrics::{self, Snapshot};
use super::probes::{self, external::Cancel};
use super::scheduler::{Action, Finish, RunSpec, Scheduler};
use crate::archive::{spool, sqlite::Sqlite, Archive, ArchiveConfig};
use crate::runlog::{Outcome, Resume, RunLog};
use crate::series::SeriesSet;
use crate::stop::Stop;
use crate::when::{human, Ms};
use anyhow::{Context, Result};
use nowcast_core::record::{Record, Status};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn now_ms() -> Ms {
    crate::clock::wall_ms() as Ms
}

/// How long a stopping campaign lets the archive take what waits in its spool; the rest
/// waits there for the next start, and is said.
const ARCHIVE_DRAIN: Duration = Duration::from_secs(5);

/// A run's end, from its thread (or from its killer).
struct Done {
    id: u64,
    finish: Finish,
    records: Vec<Record>,
    set: Option<SeriesSet>,
}

struct Flight {
    cancel: Arc<Cancel>,
    /// `job run id`, for the line a second signal prints.
    name: String,
}

/// The lock file of campaign `name` on the SQLite file `sqlite`: beside it,
/// `FILE.NAME.lock` (a name unsafe in a file name, or too long, by its hash). Two paths to
/// one archive give one lock file (the folder is made canonical).
pub fn lock_path(sqlite: &Path, name: &str) -> PathBuf {
    let dir = match sqlite.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let file = sqlite
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let name = if plain && file.len() + name.len() < 200 {
        name.to_string()
    } else {
        // FNV-1a: the same on every run and machine.
        let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        format!("campaign-{h:016x}")
    };
    let file: String = file.chars().take(100).collect();
    dir.join(format!("{file}.{name}.lock"))
}

/// Held while a campaign runs: an exclusive `flock` on its lock file ([`lock_path`]), which
/// holds its pid. The kernel releases it when the process ends, however it ends (a crash,
/// SIGKILL), so a lock file left behind takes nothing; a clean end removes it.
pub struct CampaignLock {
    path: PathBuf,
    _file: File,
}

impl CampaignLock {
    /// Takes the lock of campaign `name` on `sqlite`, or says which process holds it.
    pub fn take(sqlite: &Path, name: &str) -> Result<CampaignLock> {
        let path = lock_path(sqlite, name);
        for attempt in 0.. {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| format!("{}: create the campaign's lock", path.display()))?;
            if !spool::try_lock(&file).with_context(|| format!("{}: lock", path.display()))? {
                // `campaign status` looks at the lock for a moment: not a campaign.
                if attempt < 10 {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                let pid = holder_pid(&path);
                anyhow::bail!(
                    "campaign '{name}' is already running on the archive {} ({}; its lock is {}): \
                     stop it first (SIGTERM), or give this campaign another name",
                    sqlite.display(),
                    pid.map_or("its pid is not known".into(), |p| format!("pid {p}")),
                    path.display()
                );
            }
            // Removed by the run that held it as it ended: a new file is made.
            if !spool::still_named(&file, &path) {
                continue;
            }
            let mut f = &file;
            f.set_len(0)
                .and_then(|()| writeln!(f, "{}", std::process::id()))
                .with_context(|| format!("{}: write", path.display()))?;
            return Ok(CampaignLock { path, _file: file });
        }
        unreachable!("the loop returns")
    }
}

impl Drop for CampaignLock {
    fn drop(&mut self) {
        // Removed while it is held: a process that opened it meanwhile and then takes it
        // sees that it is no longer named, and makes a new one.
        let _ = fs::remove_file(&self.path);
    }
}

fn holder_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether campaign `name` runs on `sqlite` now (a process holds its lock): `None` when it
/// does not, else the pid it wrote (if readable). Nothing is made: no lock file, no lock.
pub fn holder(sqlite: &Path, name: &str) -> Option<Option<u32>> {
    let path = lock_path(sqlite, name);
    let file = File::open(&path).ok()?;
    match spool::try_lock(&file) {
        // Taken, so nobody held it; released as the file closes.
        Ok(true) => None,
        Ok(false) => Some(holder_pid(&path)),
        Err(_) => None,
    }
}

/// What a second signal abandons, kept up to date by the loop for the line it prints.
#[derive(Default)]
struct Abandon {
    /// The runs in flight, `job run id`.
    runs: Vec<String>,
    /// Per destination, lines in its spool (on disk, for the next start) and held in memory.
    archives: Vec<(&'static str, u64, u64)>,
    spool: PathBuf,
}

impl Abandon {
    fn said(&self) -> String {
        let mut out = String::from("second signal: exiting now");
        if !self.runs.is_empty() {
            out.push_str(&format!(
                "; not recorded: {} in flight ({})",
                crate::format::count(self.runs.len() as u64, "run"),
                self.runs.join(", ")
            ));
        }
        let spooled: Vec<&(&str, u64, u64)> = self.archives.iter().filter(|a| a.1 > 0).collect();
        let lines = |n: u64| crate::format::count(n, "line");
        match spooled[..] {
            [] if self.runs.is_empty() => out.push_str("; everything is in the archive"),
            [] => out.push_str("; everything else is in the archive"),
            [a] if self.archives.len() == 1 => out.push_str(&format!(
                "; {} wait{} in the spool {} for the next start",
                lines(a.1),
                if a.1 == 1 { "s" } else { "" },
                self.spool.display()
            )),
            _ => out.push_str(&format!(
                "; {} wait in the spool {} for the next start",
                spooled
                    .iter()
                    .map(|a| format!("{} for {}", lines(a.1), a.0))
                    .collect::<Vec<_>>()
                    .join(" and "),
                self.spool.display()
            )),
        }
        let held: u64 = self.archives.iter().map(|a| a.2).sum();
        if held > 0 {
            out.push_str(&format!(
                "; {} held in memory (the spool could not be written) are lost",
                crate::format::count(held, "line")
            ));
        }
        out
    }
}

/// Clears the line a second signal prints when the run ends.
struct Farewell;

impl Drop for Farewell {
    fn drop(&mut self) {
        crate::stop::on_second_signal(None);
    }
}

/// What a finished campaign did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Slots by outcome, in [`Outcome::ALL`] order.
    pub runs: [u64; 5],
}

/// Writes the closed spool of the SQLite destination into the file, so that the run log
/// there is complete before the schedule is resumed from it.
pub fn catch_up(cfg: &ArchiveConfig) -> Result<()> {
    let dir = cfg.spool.join("sqlite");
    spool::Spool::open(&dir, false)?;
    let segs = spool::segments(&dir)?;
    if segs.is_empty() {
        return Ok(());
    }
    let mut db = Sqlite::open(&cfg.sqlite)?;
    for s in segs {
        // Another process sharing the spool may be shipping it: left to it.
        let Some(mut claim) = spool::claim(&s)? else {
            continue;
        };
        let seg = claim.read()?;
        db.write(
            &seg.records,
            &seg.runs,
            Some(&spool::batch_name(&s)),
            now_ms(),
        )?;
        claim.done()?;
    }
    Ok(())
}

/// Where the campaign takes up its schedule, from the run log in its SQLite file.
pub fn resume(c: &Campaign) -> Result<Resume> {
    if !c.archive.sqlite.exists() {
        return Ok(Resume::default());
    }
    let mut db = Sqlite::open(&c.archive.sqlite)?;
    db.resume(&c.plan.name, &c.plan.resume_jobs())
}

/// The finish of a run from its records: ok if any measured, else the first reason. A FOBS
/// transfer's congestion events are measured along the way and do not make a failed
/// transfer a success.
fn judge(records: &[Record]) -> Finish {
    if records
        .iter()
        .any(|r| r.status == Status::Ok && r.congestion.is_none())
    {
        return Finish::Ok;
    }
    match records.first() {
        None => Finish::Failed("the probe gave no record".into()),
        Some(r) => Finish::Failed(match (&r.error, r.status) {
            (Some(e), _) => e.clone(),
            (None, Status::Timeout) => format!(
                "{} timed out after {} ms",
                r.metric.name(),
                crate::format::significant(r.timeout_ms.unwrap_or(0.0))
            ),
            _ => "no measurement".into(),
        }),
    }
}

/// Runs `c` until `stop`; `say` gets a line for each run that did not go well and for the
/// start and end.
pub fn run(c: &Campaign, stop: &Stop, say: &mut dyn Write) -> Result<Summary> {
    // Nothing is made in a folder that does not exist; then the lock, so that a copy
    // already running is named before anything else is tried.
    c.archive.check_folders()?;
    let _lock = CampaignLock::take(&c.archive.sqlite, &c.plan.name)?;
    // The metrics port next: a port already taken is the operator's mistake to hear of at
    // once, before the archive is opened and the spool left by the last run is written.
    let metrics_listener = c
        .metrics
        .map(|at| std::net::TcpListener::bind(at).with_context(|| format!("{at}: bind metrics")))
        .transpose()?;
    catch_up(&c.archive).context("writing the spool left by the last run into the archive")?;
    let resume = resume(c).context("reading the run log to resume the schedule")?;
    let mut archive = Archive::start(&c.archive)?;
    let started = Instant::now();
    let mut sched = Scheduler::new(c.plan.clone(), &resume, now_ms());
    let plan = c.plan.clone();
    let job_index: HashMap<String, usize> = plan
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.key.clone(), i))
        .collect();
    let _ = writeln!(
        say,
        "nowcast campaign {}: {}, {}, {}; archive {}{}{}",
        plan.name,
        crate::format::count(plan.targets.len() as u64, "target"),
        crate::format::count(plan.probes.len() as u64, "probe"),
        crate::format::count(plan.jobs.len() as u64, "job"),
        c.archive.sqlite.display(),
        c.archive
            .clickhouse
            .as_ref()
            .map(|ch| format!(" and ClickHouse {}", ch.url))
            .unwrap_or_default(),
        if resume.jobs.is_empty() {
            String::new()
        } else {
            format!(
                "; resumed {} from the run log",
                crate::format::count(resume.jobs.len() as u64, "job")
            )
        }
    );
    let snapshot = Arc::new(Mutex::new(Snapshot {
        campaign: plan.name.clone(),
        ..Snapshot::default()
    }));
    let metrics_stop = Stop::new();
    let metrics_thread = match metrics_listener {
        Some(listener) => {
            let _ = writeln!(say, "metrics at http://{}/metrics", listener.local_addr()?);
            let (snap, st) = (snapshot.clone(), metrics_stop.clone());
            let l2 = listener.try_clone()?;
            let t = std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || {
                    crate::serve::metrics_loop(&l2, &st, &|| {
                        let mut s = snap.lock().unwrap_or_else(|p| p.into_inner()).clone();
                        s.rss_bytes = crate::serve::resident_bytes();
                        metrics::render(&s)
                    })
                })?;
            Some((t, listener))
        }
        None => None,
    };
    // A second signal exits at once: it says what that abandons.
    let abandon = Arc::new(Mutex::new(Abandon {
        spool: c.archive.spool.clone(),
        ..Abandon::default()
    }));
    let _farewell = Farewell;
    {
        let abandon = abandon.clone();
        crate::stop::on_second_signal(Some(Box::new(move || {
            abandon.lock().unwrap_or_else(|p| p.into_inner()).said()
        })));
    }
    let (tx, rx) = mpsc::channel::<Done>();
    let mut flights: HashMap<u64, Flight> = HashMap::new();
    // Runs killed because the grace ran out (not at their bound): their rows and records
    // say so.
    let mut stopped_kills: HashSet<u64> = HashSet::new();
    let mut sets: HashMap<usize, SeriesSet> = HashMap::new();
    let mut summary = Summary::default();
    let mut delays: VecDeque<f64> = VecDeque::with_capacity(1000);
    let mut stopping: Option<Instant> = None;
    let mut killed_all = false;
    // What was last said of each archive's trouble (a spool that cannot be written, a
    // destination that refuses writes), so that a change is said once, and its end too.
    let mut troubles: HashMap<&'static str, String> = HashMap::new();
    loop {
        let now = now_ms();
        if stop.is_set() && stopping.is_none() {
            stopping = Some(Instant::now());
            let _ = writeln!(
                say,
                "stopping: {} in flight get{} up to {} to finish",
                crate::format::count(sched.in_flight() as u64, "run"),
                if sched.in_flight() == 1 { "s" } else { "" },
                human(c.shutdown_grace.as_millis() as Ms)
            );
            sched.stop(now);
        }
        let mut actions = sched.poll(now);
        if let Some(t) = stopping {
            if t.elapsed() >= c.shutdown_grace && !killed_all {
                killed_all = true;
                let kills = sched.kill_all();
                for k in &kills {
                    if let Action::Kill { id } = k {
                        stopped_kills.insert(*id);
                    }
                }
                actions.extend(kills);
            }
        }
        for a in actions {
            match a {
                Action::Start(spec) => {
                    delays.push_back((spec.started_ms - spec.slot.due_ms) as f64 / 1e3);
                    if delays.len() > 1000 {
                        delays.pop_front();
                    }
                    let cancel = Arc::new(Cancel::default());
                    flights.insert(
                        spec.id,
                        Flight {
                            cancel: cancel.clone(),
                            name: format!("{} run {}", plan.jobs[spec.job].key, spec.id),
                        },
                    );
                    let set = sets.remove(&spec.job);
                    start(&plan, spec, set, cancel, tx.clone())?;
                }
                Action::Kill { id } => {
                    if let Some(f) = flights.get(&id) {
                        let (cancel, tx) = (f.cancel.clone(), tx.clone());
                        let why = if stopped_kills.contains(&id) {
                            format!(
                                "stopped: the campaign was stopped and the run outlasted the \
                                 shutdown grace of {}",
                                exact(c.shutdown_grace.as_millis() as Ms)
                            )
                        } else {
                            let bound = sched.run(id).map_or(0, |r| r.bound_ms);
                            format!("overran its bound of {}", exact(bound))
                        };
                        std::thread::Builder::new()
                            .name("kill".into())
                            .spawn(move || {
                                let how = cancel.kill();
                                let _ = tx.send(Done {
                                    id,
                                    finish: Finish::Killed(format!("{why}: {how}")),
                                    records: Vec::new(),
                                    set: None,
                                });
                            })?;
                    }
                }
                Action::Log(row) => {
                    let job = job_index.get(&row.job).copied();
                    // A run killed at its bound timed out; one killed by the stop did not.
                    let stopped = stopped_kills.remove(&row.id);
                    let records = match job {
                        Some(j) => plan.records_for_run(
                            &row,
                            j,
                            (!stopped).then(|| plan.probe(j).bound_ms),
                        ),
                        None => Vec::new(),
                    };
                    archive.write(&records, std::slice::from_ref(&row))?;
                    let o = Outcome::ALL
                        .iter()
                        .position(|o| *o == row.outcome)
                        .unwrap_or(1);
                    summary.runs[o] += row.slots;
                    if row.outcome != Outcome::Ok {
                        let _ = writeln!(say, "{}", describe(&row));
                    }
                }
            }
        }
        {
            let mut s = snapshot.lock().unwrap_or_else(|p| p.into_inner());
            s.runs = summary.runs;
            s.in_flight = sched.in_flight() as u64;
            let d: Vec<f64> = delays.iter().copied().collect();
            s.start_delay_p50_s = metrics::quantile(&d, 0.5);
            s.start_delay_p99_s = metrics::quantile(&d, 0.99);
            s.archives = archive
                .status()
                .into_iter()
                .map(|a| (a.name.to_string(), a.backlog, a.lag_s, a.failures))
                .collect();
            s.uptime_s = started.elapsed().as_secs_f64();
        }
        {
            let mut a = abandon.lock().unwrap_or_else(|p| p.into_inner());
            let mut runs: Vec<(u64, &str)> = flights
                .iter()
                .map(|(id, f)| (*id, f.name.as_str()))
                .collect();
            runs.sort_unstable();
            a.runs = runs.into_iter().map(|(_, n)| n.to_string()).collect();
            a.archives = archive
                .status()
                .into_iter()
                .map(|d| (d.name, d.backlog.saturating_sub(d.held), d.held))
                .collect();
        }
        for (name, trouble) in archive.trouble() {
            // The message up to its reason: a new kind of trouble is said again.
            let kind = |m: &str| m.split(" (").next().unwrap_or_default().to_string();
            match (trouble, troubles.get(name)) {
                (Some(now), Some(was)) if kind(&now) == kind(was) => {}
                (Some(now), _) => {
                    let _ = writeln!(say, "archive {name}: {now}");
                    troubles.insert(name, now);
                }
                (None, Some(_)) => {
                    let left = archive
                        .status()
                        .into_iter()
                        .find(|a| a.name == name)
                        .map_or(0, |a| a.backlog);
                    let _ = writeln!(
                        say,
                        "archive {name}: written again, nothing lost ({} waiting)",
                        crate::format::count(left, "line")
                    );
                    troubles.remove(name);
                }
                (None, None) => {}
            }
        }
        if stopping.is_some() && sched.in_flight() == 0 {
            break;
        }
        // Wait for a run's end, the next due slot or kill, or a signal.
        let wake = sched
            .next_wakeup()
            .map_or(1_000, |t| (t - now_ms()).clamp(0, 1_000));
        let wait = if stopping.is_some() {
            wake.min(100)
        } else {
            wake
        };
        match rx.recv_timeout(Duration::from_millis(wait as u64)) {
            Ok(done) => {
                let mut next = Some(done);
                while let Some(d) = next {
                    if flights.remove(&d.id).is_some() {
                        if let (Some(set), Some(spec)) = (d.set, sched.run(d.id)) {
                            sets.insert(spec.job, set);
                        }
                        if !d.records.is_empty() {
                            archive.write(&d.records, &[])?;
                        }
                        sched.finished(d.id, now_ms(), d.finish);
                    }
                    next = rx.try_recv().ok();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => unreachable!("the loop holds a sender"),
        }
    }
    metrics_stop.trigger();
    if let Some((t, l)) = metrics_thread {
        crate::serve::wake(&l);
        let _ = t.join();
    }
    // What still waits for a destination (one that is down, or the last runs' rows) gets a
    // bounded time of its own after the grace, said so that the wait is not a silent one.
    let waiting: Vec<String> = archive
        .status()
        .into_iter()
        .filter(|d| d.backlog > 0)
        .map(|d| format!("{}: {}", d.name, crate::format::count(d.backlog, "line")))
        .collect();
    if !waiting.is_empty() {
        let _ = writeln!(
            say,
            "stopping: the archive gets up to {} to write what waits in its spool ({})",
            human(ARCHIVE_DRAIN.as_millis() as Ms),
            waiting.join(", ")
        );
    }
    {
        let mut a = abandon.lock().unwrap_or_else(|p| p.into_inner());
        a.runs.clear();
    }
    let left = archive.close(ARCHIVE_DRAIN);
    if let Some(said) = archive.left_behind(&left) {
        let _ = writeln!(say, "archive {said}");
    }
    let _ = writeln!(
        say,
        "stopped: {}",
        Outcome::ALL
            .iter()
            .zip(summary.runs)
            .map(|(o, n)| format!("{} {n}", o.name()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(summary)
}

/// A bound as people read it, to the millisecond: `human` alone would say "3s" of 3050 ms,
/// hiding by how much a run that ended a little after 3 s overran.
fn exact(ms: Ms) -> String {
    if ms % 1_000 == 0 {
        human(ms)
    } else {
        format!("{ms} ms")
    }
}

fn describe(row: &RunLog) -> String {
    format!(
        "{} {} run {}{}: {}",
        crate::when::datetime(row.ended_ms),
        row.job,
        row.id,
        if row.slots > 1 {
            format!(" ({} slots)", row.slots)
        } else {
            String::new()
        },
        match &row.reason {
            Some(r) => format!("{} ({r})", row.outcome.name()),
            None => row.outcome.name().to_string(),
        }
    )
}

/// Starts run `spec` on a thread of its own.
fn start(
    plan: &super::plan::Plan,
    spec: RunSpec,
    set: Option<SeriesSet>,
    cancel: Arc<Cancel>,
    tx: mpsc::Sender<Done>,
) -> Result<()> {
    let p = plan.probe(spec.job).clone();
    let target = plan.target(spec.job).clone();
    let period = match &p.when.every {
        super::plan::Every::Period(ms) => Some(*ms as f64),
        super::plan::Every::Cron(_) => None,
    };
    // The job's series are made at its first run; later runs bring them back.
    let mut set =
        set.unwrap_or_else(|| probes::series(&p.kind, &target, period, plan.source(spec.job)));
    std::thread::Builder::new()
        .name(format!("run-{}", spec.id))
        .stack_size(512 * 1024)
        .spawn(move || {
            let records = probes::run(&p.kind, &target, spec.bound_ms, &mut set, spec.id, &cancel);
            // A killed run is reported by its killer, with how the kill went.
            if !cancel.killed() {
                let _ = tx.send(Done {
                    id: spec.id,
                    finish: judge(&records),
                    records,
                    set: Some(set),
                });
            }
        })
        .context("starting a run's thread")?;
    Ok(())
}
