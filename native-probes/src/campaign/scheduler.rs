//! The campaign's scheduler: which run to start, which to kill and what to log, from the
//! plan, the time and what finished. In quinn-proto's shape: [`Scheduler::poll`] takes the
//! time and returns actions, [`Scheduler::finished`] takes a run's end, and
//! [`Scheduler::next_wakeup`] says when to poll again. No clock, no threads, no sockets:
//! a test drives days of schedule in milliseconds with scripted time, and the same code
//! runs the service.
//!
//! The rules (IEPM-BW §II.A and §III.A):
//! - Each job (a probe on a target) has slots: every period from an anchor, or the firing
//!   times of a cron expression, each due at its nominal time plus a seeded slip.
//! - A due slot starts when there is room: fewer than `max_parallel` runs in flight, the
//!   job's previous run finished, and for an exclusive probe no other exclusive run on the
//!   same target or beyond the link's slots. A slot that cannot start before the job's next
//!   slot is due is logged as missed, with what it waited for; slots that passed while the
//!   campaign was not running are logged as missed, one row for the lot.
//! - A gated run needs a sanity check of its target no older than `gate_max_age_ms`: if the
//!   latest failed, the run is skipped and the skip logged; if there is none recent, a check
//!   runs first.
//! - Every run has a bound computed before it starts; at the bound the scheduler asks for
//!   the run to be killed. A stopping campaign starts nothing, logs its due slots as
//!   missed, and lets the runs in flight finish (or asks to kill them, [`Scheduler::kill_all`]).

use super::plan::{Every, Plan};
use crate::runlog::{GateResult, Outcome, Resume, RunLog};
use crate::when::{human, Ms};
use std::collections::{BTreeMap, BTreeSet};

/// One slot of a job's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub nominal_ms: Ms,
    pub due_ms: Ms,
}

/// A run to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    pub id: u64,
    /// Index into the plan's jobs.
    pub job: usize,
    pub slot: Slot,
    pub started_ms: Ms,
    /// The run is killed if it has not finished by `started_ms + bound_ms`.
    pub bound_ms: Ms,
    /// A sanity check made for a gated run, outside the check's own schedule.
    pub gate_check: bool,
}

/// How a run ended, as the runner saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    Ok,
    Failed(String),
    /// Killed at (or after) its bound; the text says how the kill went.
    Killed(String),
}

/// What the caller should do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Start(RunSpec),
    /// Kill run `id` (its whole process group, for an external tool); then call
    /// [`Scheduler::finished`] with [`Finish::Killed`].
    Kill {
        id: u64,
    },
    /// Archive this row (and, for a run that measured nothing, the records standing for it).
    Log(RunLog),
}

#[derive(Clone, Debug)]
struct Pending {
    slot: Slot,
    /// Why it has not started yet, for the missed row if it never does.
    waiting: Option<String>,
}

#[derive(Clone, Debug, Default)]
struct JobState {
    /// The next slot, not yet due.
    next: Option<Slot>,
    /// A due slot waiting for room or for the sanity check.
    pending: Option<Pending>,
    running: Option<u64>,
    runs: u64,
}

#[derive(Clone, Debug)]
struct Running {
    spec: RunSpec,
    exclusive: bool,
    kill_sent: bool,
}

/// The scheduler of one campaign.
pub struct Scheduler {
    plan: Plan,
    jobs: Vec<JobState>,
    /// (due, job) of every job's next slot.
    upcoming: BTreeSet<(Ms, usize)>,
    /// (due, job) of every pending slot.
    pending: BTreeSet<(Ms, usize)>,
    running: BTreeMap<u64, Running>,
    /// (kill time, run id).
    deadlines: BTreeSet<(Ms, u64)>,
    gates: Vec<Option<GateResult>>,
    next_id: u64,
    stopping: bool,
    /// The first poll after a start logs slots missed while the campaign was not running.
    resumed: bool,
    out: Vec<Action>,
}

fn mix(mut z: u64) -> u64 {
    // splitmix64's finaliser.
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Scheduler {
    /// A scheduler for `plan` started at `now`, continuing from `resume` (empty for a new
    /// campaign).
    pub fn new(plan: Plan, resume: &Resume, now: Ms) -> Self {
        let mut s = Scheduler {
            jobs: vec![JobState::default(); plan.jobs.len()],
            gates: vec![None; plan.targets.len()],
            upcoming: BTreeSet::new(),
            pending: BTreeSet::new(),
            running: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            next_id: resume.next_id,
            stopping: false,
            resumed: true,
            out: Vec::new(),
            plan,
        };
        for j in 0..s.plan.jobs.len() {
            let key = &s.plan.jobs[j].key;
            let history = resume.jobs.get(key).cloned().unwrap_or_default();
            s.jobs[j].runs = history.runs;
            if s.plan.probe(j).gate {
                let t = s.plan.jobs[j].target;
                if let Some(g) = history.gate {
                    if s.gates[t].as_ref().is_none_or(|h| h.at_ms < g.at_ms) {
                        s.gates[t] = Some(g);
                    }
                }
            }
            let next = s.slot_after(j, history.last_nominal_ms, now);
            s.set_next(j, next);
        }
        s
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The slip of `job`'s slot at `nominal`: the same on every restart.
    pub fn slip(&self, job: usize, nominal: Ms) -> Ms {
        let slip = self.plan.probe(job).when.slip_ms;
        if slip <= 0 {
            return 0;
        }
        let h = mix(self.plan.seed ^ fnv(&self.plan.jobs[job].key) ^ mix(nominal as u64));
        (h % slip as u64) as Ms
    }

    /// The first slot of `job` after the slot at `after` (or, with none logged, the first
    /// at or after `now`).
    fn slot_after(&self, job: usize, after: Option<Ms>, now: Ms) -> Option<Slot> {
        let spec = self.plan.probe(job);
        let w = &spec.when;
        if w.max_runs.is_some_and(|n| self.jobs[job].runs >= n) {
            return None;
        }
        let nominal = match (&w.every, after) {
            (Every::Period(p), Some(last)) => match w.start_ms {
                Some(s) if last >= s => s + ((last - s) / p + 1) * p,
                Some(s) => s,
                None => last + p,
            },
            (Every::Period(p), None) => match w.start_ms {
                Some(s) if s >= now => s,
                Some(s) => s + (now - s + p - 1) / p * p,
                // Without a `start`, the grid is the period's multiples since 1970 (UTC): the
                // slots and their slips are the same whenever the campaign starts, and
                // `campaign check` says when it will run (anchored at the moment it started,
                // each call of `check` told other times). The slot under way is the first while
                // its slip has not passed.
                None => {
                    let under_way = now.div_euclid(*p) * p;
                    if under_way + self.slip(job, under_way) >= now {
                        under_way
                    } else {
                        under_way + p
                    }
                }
            },
            (Every::Cron(c), after) => {
                let from = after.unwrap_or(now - 1);
                c.next_after(w.start_ms.map_or(from, |s| from.max(s - 1)))?
            }
        };
        if w.until_ms.is_some_and(|u| nominal > u) {
            return None;
        }
        Some(Slot {
            nominal_ms: nominal,
            due_ms: nominal + self.slip(job, nominal),
        })
    }

    fn set_next(&mut self, job: usize, next: Option<Slot>) {
        if let Some(old) = self.jobs[job].next.take() {
            self.upcoming.remove(&(old.due_ms, job));
        }
        if let Some(n) = next {
            self.upcoming.insert((n.due_ms, job));
        }
        self.jobs[job].next = next;
    }

    /// Logs a slot that did not run (missed or skipped).
    fn log(
        &mut self,
        job: usize,
        slot: Slot,
        ended: Ms,
        outcome: Outcome,
        reason: Option<String>,
        slots: u64,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let j = &self.plan.jobs[job];
        self.out.push(Action::Log(RunLog {
            id,
            campaign: self.plan.name.clone(),
            job: j.key.clone(),
            target: self.plan.targets[j.target].name.clone(),
            probe: self.plan.probes[j.probe].name.clone(),
            nominal_ms: slot.nominal_ms,
            due_ms: slot.due_ms,
            started_ms: None,
            ended_ms: ended,
            outcome,
            reason,
            slots,
            gate_check: false,
        }));
        id
    }

    /// Moves every due slot to pending (logging what it displaces), starts what can start,
    /// asks to kill what overran; returns the actions in order.
    pub fn poll(&mut self, now: Ms) -> Vec<Action> {
        self.kills(now);
        if !self.stopping {
            self.due(now);
            self.starts(now);
        }
        self.resumed = false;
        std::mem::take(&mut self.out)
    }

    fn kills(&mut self, now: Ms) {
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(r) = self.running.get_mut(&id) {
                if !r.kill_sent {
                    r.kill_sent = true;
                    self.out.push(Action::Kill { id });
                }
            }
        }
    }

    fn due(&mut self, now: Ms) {
        while let Some(&(due, job)) = self.upcoming.first() {
            if due > now {
                break;
            }
            self.upcoming.pop_first();
            let first = self.jobs[job].next.take().expect("an upcoming slot");
            // The latest due slot; those before it are missed.
            let mut last = first;
            let mut passed = 0u64;
            let mut first_passed: Option<Slot> = None;
            let mut last_passed: Option<Slot> = None;
            if let Every::Period(p) = self.plan.probe(job).when.every {
                // Jump close to now, then step (the slip never exceeds half a period).
                let jump = (now - last.nominal_ms) / p - 1;
                if jump > 0 {
                    let before = last.nominal_ms + (jump - 2) * p;
                    if let (Some(prev), Some(s)) = (
                        self.slot_after(job, Some(before), now),
                        self.slot_after(job, Some(before + p), now),
                    ) {
                        first_passed = Some(first);
                        last_passed = Some(prev);
                        passed += ((s.nominal_ms - first.nominal_ms) / p) as u64;
                        last = s;
                    }
                }
            }
            let mut steps = 0;
            while let Some(s) = self.slot_after(job, Some(last.nominal_ms), now) {
                if s.due_ms > now || steps > 500_000 {
                    break;
                }
                first_passed.get_or_insert(last);
                last_passed = Some(last);
                passed += 1;
                last = s;
                steps += 1;
            }
            if let Some(old) = self.jobs[job].pending.take() {
                self.pending.remove(&(old.slot.due_ms, job));
                let why = old.waiting.unwrap_or_else(|| "no room to start".into());
                self.log(
                    job,
                    old.slot,
                    now,
                    Outcome::Missed,
                    Some(format!("not started before its next slot was due: {why}")),
                    1,
                );
            }
            if passed > 0 {
                let from = first_passed.expect("set with passed").nominal_ms;
                let why = if self.resumed {
                    "the campaign was not running"
                } else {
                    "the campaign was not polled in time (host overloaded or clock jump)"
                };
                let missed = last_passed.expect("set with passed");
                let reason = format!(
                    "{why}: {passed} slot{} from {} to before {}",
                    if passed == 1 { "" } else { "s" },
                    crate::when::datetime(from),
                    crate::when::datetime(last.nominal_ms)
                );
                self.log(job, missed, now, Outcome::Missed, Some(reason), passed);
            }
            self.jobs[job].pending = Some(Pending {
                slot: last,
                waiting: None,
            });
            self.pending.insert((last.due_ms, job));
            let next = self.slot_after(job, Some(last.nominal_ms), now);
            self.set_next(job, next);
        }
    }

    fn starts(&mut self, now: Ms) {
        let order: Vec<(Ms, usize)> = self.pending.iter().copied().collect();
        for (due, job) in order {
            if !self.pending.contains(&(due, job)) {
                continue; // started as a sanity check for another job
            }
            match self.admit(job, now) {
                Ok(()) => {
                    self.pending.remove(&(due, job));
                    let p = self.jobs[job].pending.take().expect("pending");
                    self.start(job, p.slot, now, false);
                }
                Err(Wait::Room(why)) => {
                    if let Some(p) = self.jobs[job].pending.as_mut() {
                        p.waiting = Some(why);
                    }
                    if self.running.len() >= self.plan.max_parallel {
                        break;
                    }
                }
                Err(Wait::Skip(why)) => {
                    self.pending.remove(&(due, job));
                    let p = self.jobs[job].pending.take().expect("pending");
                    self.log(job, p.slot, now, Outcome::Skipped, Some(why), 1);
                }
            }
        }
    }

    /// Whether `job` may start now; else why not, or why it is skipped. May start its
    /// target's sanity check.
    fn admit(&mut self, job: usize, now: Ms) -> Result<(), Wait> {
        self.room(job)?;
        let spec = self.plan.probe(job);
        if !spec.gated || spec.gate {
            return Ok(());
        }
        let Some(gate) = self.plan.gate_of(job) else {
            return Ok(());
        };
        let target = self.plan.jobs[job].target;
        let max_age = self.plan.gate_max_age_ms;
        if let Some(g) = self.gates[target]
            .as_ref()
            .filter(|g| now - g.at_ms <= max_age)
        {
            return if g.ok {
                Ok(())
            } else {
                Err(Wait::Skip(format!(
                    "the sanity check {} failed {} ago: {}",
                    self.plan.jobs[gate].key,
                    human(now - g.at_ms),
                    g.reason.as_deref().unwrap_or("no reason given")
                )))
            };
        }
        if let Some(id) = self.jobs[gate].running {
            return Err(Wait::Room(format!(
                "waiting for the sanity check (run {id})"
            )));
        }
        self.room(gate)?;
        // The check's own pending slot if it has one, else a check outside its schedule.
        let slot = match self.jobs[gate].pending.take() {
            Some(p) => {
                self.pending.remove(&(p.slot.due_ms, gate));
                (p.slot, false)
            }
            None => (
                Slot {
                    nominal_ms: now,
                    due_ms: now,
                },
                true,
            ),
        };
        let id = self.start(gate, slot.0, now, slot.1);
        Err(Wait::Room(format!(
            "waiting for the sanity check (run {id})"
        )))
    }

    /// Whether there is room for `job` to start.
    fn room(&self, job: usize) -> Result<(), Wait> {
        if let Some(id) = self.jobs[job].running {
            return Err(Wait::Room(format!(
                "its previous run {id} was still in flight"
            )));
        }
        if self.running.len() >= self.plan.max_parallel {
            return Err(Wait::Room(format!(
                "{} runs were in flight (max_parallel)",
                self.running.len()
            )));
        }
        if self.plan.probe(job).exclusive {
            let target = self.plan.jobs[job].target;
            let mut on_link = 0;
            for r in self.running.values().filter(|r| r.exclusive) {
                on_link += 1;
                if self.plan.jobs[r.spec.job].target == target {
                    return Err(Wait::Room(format!(
                        "the target was busy with exclusive run {} ({})",
                        r.spec.id, self.plan.jobs[r.spec.job].key
                    )));
                }
                if on_link >= self.plan.link_slots {
                    return Err(Wait::Room(format!(
                        "the link was busy with exclusive run {} ({})",
                        r.spec.id, self.plan.jobs[r.spec.job].key
                    )));
                }
            }
        }
        Ok(())
    }

    fn start(&mut self, job: usize, slot: Slot, now: Ms, gate_check: bool) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let spec = self.plan.probe(job);
        let run = RunSpec {
            id,
            job,
            slot,
            started_ms: now,
            bound_ms: spec.bound_ms,
            gate_check,
        };
        self.deadlines.insert((now + spec.bound_ms, id));
        self.running.insert(
            id,
            Running {
                spec: run.clone(),
                exclusive: spec.exclusive,
                kill_sent: false,
            },
        );
        let state = &mut self.jobs[job];
        state.running = Some(id);
        if !gate_check {
            state.runs += 1;
            if spec.when.max_runs.is_some_and(|n| state.runs >= n) {
                self.set_next(job, None);
            }
        }
        self.out.push(Action::Start(run));
        id
    }

    /// Run `id` ended at `now`. A run that is not in flight (already killed and logged) is
    /// ignored.
    pub fn finished(&mut self, id: u64, now: Ms, finish: Finish) {
        let Some(r) = self.running.remove(&id) else {
            return;
        };
        self.deadlines
            .remove(&(r.spec.started_ms + r.spec.bound_ms, id));
        let job = r.spec.job;
        self.jobs[job].running = None;
        let (outcome, reason) = match finish {
            Finish::Ok => (Outcome::Ok, None),
            Finish::Failed(why) => (Outcome::Failed, Some(why)),
            Finish::Killed(why) => (Outcome::Killed, Some(why)),
        };
        if self.plan.probe(job).gate {
            let t = self.plan.jobs[job].target;
            self.gates[t] = Some(GateResult {
                ok: outcome == Outcome::Ok,
                at_ms: now,
                reason: reason.clone(),
            });
        }
        let spec = r.spec;
        let row = RunLog {
            id: spec.id,
            campaign: self.plan.name.clone(),
            job: self.plan.jobs[job].key.clone(),
            target: self.plan.target(job).name.clone(),
            probe: self.plan.probe(job).name.clone(),
            nominal_ms: spec.slot.nominal_ms,
            due_ms: spec.slot.due_ms,
            started_ms: Some(spec.started_ms),
            ended_ms: now,
            outcome,
            reason,
            slots: 1,
            gate_check: spec.gate_check,
        };
        self.out.push(Action::Log(row));
    }

    /// Starts nothing more: due slots are logged as missed; runs in flight go on.
    pub fn stop(&mut self, now: Ms) {
        self.stopping = true;
        let pending: Vec<(Ms, usize)> = std::mem::take(&mut self.pending).into_iter().collect();
        for (_, job) in pending {
            if let Some(p) = self.jobs[job].pending.take() {
                self.log(
                    job,
                    p.slot,
                    now,
                    Outcome::Missed,
                    Some("the campaign stopped before it could start".into()),
                    1,
                );
            }
        }
        self.upcoming.clear();
    }

    /// Asks to kill every run in flight (a stopping campaign whose grace ran out).
    pub fn kill_all(&mut self) -> Vec<Action> {
        for (id, r) in self.running.iter_mut() {
            if !r.kill_sent {
                r.kill_sent = true;
                self.out.push(Action::Kill { id: *id });
            }
        }
        std::mem::take(&mut self.out)
    }

    /// When to poll next at the latest (a run's end may call for it sooner).
    pub fn next_wakeup(&self) -> Option<Ms> {
        let due = (!self.stopping)
            .then(|| self.upcoming.first().map(|d| d.0))
            .flatten();
        let kill = self
            .deadlines
            .iter()
            .find(|(_, id)| self.running.get(id).is_some_and(|r| !r.kill_sent))
            .map(|d| d.0);
        match (due, kill) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs in flight.
    pub fn in_flight(&self) -> usize {
        self.running.len()
    }

    /// The spec of a run in flight.
    pub fn run(&self, id: u64) -> Option<&RunSpec> {
        self.running.get(&id).map(|r| &r.spec)
    }

    /// Each job's next slot (for `status`).
    pub fn next_slots(&self) -> Vec<(usize, Option<Slot>)> {
        self.jobs
            .iter()
            .enumerate()
            .map(|(j, s)| (j, s.pending.as_ref().map(|p| p.slot).or(s.next)))
            .collect()
    }
}

enum Wait {
    Room(String),
    Skip(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::cron::Cron;
    use crate::campaign::plan::{
        Direction, Iperf3Params, Kind, ProbeSpec, Target, TcpParams, When,
    };
    use crate::when::{DAY, HOUR, MINUTE, SECOND};
    use std::collections::{BTreeMap, HashMap};

    const T0: Ms = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    fn target(i: usize) -> Target {
        Target {
            name: format!("t{i}"),
            host: format!("127.0.0.{}", i + 1),
            port: 8060,
            udp_port: 8060,
            iperf3_port: 5201,
            fobs_port: 8070,
            fobs_token: None,
            url: None,
            groups: vec![],
            tags: BTreeMap::new(),
        }
    }

    fn every(period: Ms, slip: Ms) -> When {
        When {
            every: Every::Period(period),
            slip_ms: slip,
            start_ms: None,
            until_ms: None,
            max_runs: None,
        }
    }

    fn rtt(when: When) -> ProbeSpec {
        ProbeSpec {
            name: "rtt".into(),
            kind: Kind::Tcp(TcpParams {
                size: None,
                direction: Direction::Up,
                sndbuf: None,
                rcvbuf: None,
            }),
            when,
            bound_ms: 10 * SECOND,
            exclusive: false,
            gate: true,
            gated: false,
        }
    }

    fn iperf(name: &str, when: When) -> ProbeSpec {
        ProbeSpec {
            name: name.into(),
            kind: Kind::Iperf3(Iperf3Params {
                duration_s: 10,
                streams: 1,
                window: None,
                reverse: false,
                port: None,
                program: "iperf3".into(),
            }),
            when,
            bound_ms: 20 * SECOND,
            exclusive: true,
            gate: false,
            gated: true,
        }
    }

    fn plan(targets: usize, probes: Vec<ProbeSpec>, seed: u64) -> Plan {
        Plan {
            name: "test".into(),
            seed,
            max_parallel: 16,
            link_slots: 1,
            gate_max_age_ms: 10 * MINUTE,
            targets: (0..targets).map(target).collect(),
            probes,
            jobs: vec![],
            gate_jobs: vec![],
        }
        .with_jobs(|_, _| true)
    }

    /// What a simulated run does: how long it takes and how it ends, from its job and start.
    type World = dyn Fn(&str, Ms) -> (Ms, Finish);

    /// Drives `s` from `from` to `to` with scripted time: runs end when `world` says, kills
    /// end a run at once. Returns every action with its time.
    fn simulate(s: &mut Scheduler, from: Ms, to: Ms, world: &World) -> Vec<(Ms, Action)> {
        let mut now = from;
        let mut ends: BTreeMap<(Ms, u64), Finish> = BTreeMap::new();
        let mut out = Vec::new();
        let mut guard = 0;
        while now <= to {
            guard += 1;
            assert!(guard < 10_000_000, "the simulation does not advance");
            while let Some((&(at, id), _)) = ends.first_key_value() {
                if at > now {
                    break;
                }
                let f = ends.remove(&(at, id)).expect("first");
                s.finished(id, at, f);
            }
            for a in s.poll(now) {
                match &a {
                    Action::Start(r) => {
                        let key = s.plan().jobs[r.job].key.clone();
                        let (d, f) = world(&key, now);
                        ends.insert((now + d, r.id), f);
                    }
                    Action::Kill { id } => {
                        ends.retain(|(_, i), _| i != id);
                        ends.insert((now + 1, *id), Finish::Killed("killed".into()));
                    }
                    Action::Log(_) => {}
                }
                out.push((now, a));
            }
            let next_end = ends.first_key_value().map(|(k, _)| k.0);
            let next = match (s.next_wakeup(), next_end) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => break,
                },
            };
            now = next.max(now + 1);
        }
        out
    }

    fn logs(actions: &[(Ms, Action)]) -> Vec<RunLog> {
        actions
            .iter()
            .filter_map(|(_, a)| match a {
                Action::Log(l) => Some(l.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_period_without_start_keeps_the_same_slots_whenever_the_campaign_starts() {
        // Anchored at the start, each `campaign check` (and a never-run campaign's `status`)
        // told other first slots for the same file, seed 42.
        let mk = || plan(3, vec![rtt(every(HOUR, 10 * MINUTE))], 42);
        let firsts = |now: Ms| -> Vec<Option<Slot>> {
            let s = Scheduler::new(mk(), &Resume::default(), now);
            s.next_slots().into_iter().map(|(_, slot)| slot).collect()
        };
        // Every slot is on the hour, its due within the slip, and the same from any start
        // before it is due.
        let early = firsts(T0 + 1);
        for slot in early.iter().map(|s| s.expect("a slot")) {
            assert_eq!(slot.nominal_ms.rem_euclid(HOUR), 0, "{slot:?}");
            assert!(slot.due_ms > T0 && slot.due_ms < slot.nominal_ms + 10 * MINUTE);
        }
        assert_eq!(firsts(T0 + 1), early, "the same start, the same slots");
        for (a, b) in firsts(T0 + 30 * SECOND).iter().zip(&early) {
            let (a, b) = (a.unwrap(), b.unwrap());
            // The same slot while its slip is ahead, else the next hour's.
            if b.due_ms >= T0 + 30 * SECOND {
                assert_eq!(a, b);
            } else {
                assert_eq!(a.nominal_ms, T0 + HOUR);
            }
        }
        let later = firsts(T0 + 20 * MINUTE);
        assert!(
            later.iter().all(|s| s.unwrap().nominal_ms == T0 + HOUR),
            "{later:?}"
        );
    }

    #[test]
    fn three_days_of_schedule_hold_every_rule() {
        // Three targets: a sanity check every minute, two exclusive transfers every 10
        // minutes. Target t2's check fails on the second day; runs take most of their bound.
        let p = plan(
            3,
            vec![
                rtt(every(MINUTE, 20 * SECOND)),
                iperf("a", every(10 * MINUTE, 2 * MINUTE)),
                iperf("b", every(10 * MINUTE, 2 * MINUTE)),
            ],
            7,
        );
        let mut s = Scheduler::new(p, &Resume::default(), T0);
        let world = |job: &str, at: Ms| -> (Ms, Finish) {
            if job == "t2/rtt" && (T0 + DAY..T0 + 2 * DAY).contains(&at) {
                (3 * SECOND, Finish::Failed("connection refused".into()))
            } else if job.ends_with("/rtt") {
                (50, Finish::Ok)
            } else {
                (12 * SECOND, Finish::Ok)
            }
        };
        let actions = simulate(&mut s, T0, T0 + 3 * DAY, &world);
        let rows = logs(&actions);
        // Exclusive runs never overlap: replay starts and ends.
        let mut busy: Option<u64> = None;
        let mut exclusive_ids = std::collections::HashSet::new();
        for (_, a) in &actions {
            match a {
                Action::Start(r) if s.plan().probe(r.job).exclusive => {
                    assert_eq!(
                        busy, None,
                        "run {} started while {busy:?} held the link",
                        r.id
                    );
                    busy = Some(r.id);
                    exclusive_ids.insert(r.id);
                }
                Action::Log(l) if exclusive_ids.contains(&l.id) => {
                    assert_eq!(busy, Some(l.id));
                    busy = None;
                }
                _ => {}
            }
        }
        // Every slot is accounted for: per job, the slots logged cover the schedule.
        let mut slots: HashMap<&str, u64> = HashMap::new();
        for r in rows.iter().filter(|r| !r.gate_check) {
            *slots.entry(r.job.as_str()).or_default() += r.slots;
        }
        assert_eq!(slots["t0/rtt"], 3 * 1440, "one slot a minute, none lost");
        assert!((431..=432).contains(&slots["t1/a"]), "{}", slots["t1/a"]);
        // t2's transfers are skipped on the failing day, with the reason, and only then.
        let skipped: Vec<&RunLog> = rows
            .iter()
            .filter(|r| r.outcome == Outcome::Skipped)
            .collect();
        assert!(skipped
            .iter()
            .all(|r| r.target == "t2"
                && (T0 + DAY..T0 + 2 * DAY + 10 * MINUTE).contains(&r.ended_ms)));
        assert!((280..=290).contains(&skipped.len()), "{}", skipped.len());
        assert!(
            skipped[0]
                .reason
                .as_deref()
                .unwrap()
                .contains("sanity check t2/rtt failed"),
            "{:?}",
            skipped[0].reason
        );
        // Six 12 s transfers per 10 minutes fit the link: none missed, and none starts late
        // by more than the transfers queued before it.
        assert_eq!(
            rows.iter().filter(|r| r.outcome == Outcome::Missed).count(),
            0
        );
        let worst = rows
            .iter()
            .filter_map(|r| r.started_ms.map(|s| s - r.due_ms))
            .max()
            .unwrap();
        assert!(worst <= 6 * 12 * SECOND, "{worst}");
        // The slips spread the checks over their 20 s.
        let delays: Vec<Ms> = rows
            .iter()
            .filter(|r| r.job == "t0/rtt")
            .take(100)
            .map(|r| r.due_ms - r.nominal_ms)
            .collect();
        assert!(delays.iter().any(|d| *d > 10 * SECOND) && delays.iter().any(|d| *d < 10 * SECOND));
        assert!(delays.iter().all(|d| (0..20 * SECOND).contains(d)));
    }

    #[test]
    fn an_overrun_is_killed_at_its_bound_and_logged() {
        let p = plan(1, vec![iperf("x", every(HOUR, 0))], 1);
        let mut s = Scheduler::new(p, &Resume::default(), T0);
        let actions = simulate(&mut s, T0, T0 + 2 * HOUR - 1, &|_, _| (HOUR, Finish::Ok));
        let kills: Vec<Ms> = actions
            .iter()
            .filter(|(_, a)| matches!(a, Action::Kill { .. }))
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(kills, vec![T0 + 20 * SECOND, T0 + HOUR + 20 * SECOND]);
        let rows = logs(&actions);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.outcome == Outcome::Killed
            && r.ended_ms - r.started_ms.unwrap() == 20 * SECOND + 1));
        let recs = s.plan().records_for_run(&rows[0], 0, Some(20 * SECOND));
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].status, nowcast_core::record::Status::Timeout);
        recs[0].validate().unwrap();
        // Killed by a stop whose grace ran out: no bound reached, no timeout.
        let recs = s.plan().records_for_run(&rows[0], 0, None);
        assert_eq!(
            (recs[0].status, recs[0].timeout_ms),
            (nowcast_core::record::Status::Error, None)
        );
        recs[0].validate().unwrap();
    }

    #[test]
    fn a_restart_logs_the_slots_it_missed_and_continues() {
        let mk = || plan(1, vec![rtt(every(MINUTE, 0))], 3);
        let mut s = Scheduler::new(mk(), &Resume::default(), T0);
        let before = logs(&simulate(&mut s, T0, T0 + HOUR - 1, &|_, _| {
            (100, Finish::Ok)
        }));
        assert_eq!(before.len(), 60);
        // Down for three hours and a bit; restart from the rows.
        let resume = Resume::from_rows(&before);
        assert_eq!(resume.next_id, 60);
        let back = T0 + 4 * HOUR + 30 * SECOND;
        let mut s = Scheduler::new(mk(), &resume, back);
        let after = logs(&simulate(&mut s, back, back + 10 * MINUTE, &|_, _| {
            (100, Finish::Ok)
        }));
        let missed = &after[0];
        assert_eq!((missed.outcome, missed.slots), (Outcome::Missed, 180));
        assert!(
            missed
                .reason
                .as_deref()
                .unwrap()
                .starts_with("the campaign was not running: 180 slots"),
            "{:?}",
            missed.reason
        );
        assert_eq!(missed.nominal_ms, T0 + 4 * HOUR - MINUTE);
        // The slot of 4:00 runs late (it is the latest due), then the grid goes on.
        assert_eq!(
            (after[1].outcome, after[1].nominal_ms, after[1].started_ms),
            (Outcome::Ok, T0 + 4 * HOUR, Some(back))
        );
        assert_eq!(after[2].nominal_ms, T0 + 4 * HOUR + MINUTE);
        assert!(after.iter().all(|r| r.id >= 60));
        // Slots are never doubled: nominal times strictly increase.
        let all: Vec<Ms> = before.iter().chain(&after).map(|r| r.nominal_ms).collect();
        assert!(all.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn max_runs_count_across_restarts_and_until_ends_a_job() {
        let mut w = every(MINUTE, 0);
        w.max_runs = Some(5);
        let mk = || plan(1, vec![rtt(w.clone())], 3);
        let mut s = Scheduler::new(mk(), &Resume::default(), T0);
        let first = logs(&simulate(&mut s, T0, T0 + 3 * MINUTE - 1, &|_, _| {
            (10, Finish::Ok)
        }));
        assert_eq!(first.len(), 3);
        let mut s = Scheduler::new(mk(), &Resume::from_rows(&first), T0 + 3 * MINUTE);
        let rest = logs(&simulate(&mut s, T0 + 3 * MINUTE, T0 + HOUR, &|_, _| {
            (10, Finish::Ok)
        }));
        assert_eq!(rest.len(), 2, "{rest:?}");
        assert_eq!(s.next_wakeup(), None);
        let mut u = every(MINUTE, 0);
        u.until_ms = Some(T0 + 10 * MINUTE);
        let mut s = Scheduler::new(plan(1, vec![rtt(u)], 3), &Resume::default(), T0);
        assert_eq!(
            logs(&simulate(&mut s, T0, T0 + HOUR, &|_, _| (10, Finish::Ok))).len(),
            11
        );
    }

    #[test]
    fn a_busy_link_makes_slots_missed_with_the_reason() {
        // Two transfers every minute on one link, each 50 s: one of them cannot fit.
        let mut a = iperf("a", every(MINUTE, 0));
        let mut b = iperf("b", every(MINUTE, 0));
        a.bound_ms = 55 * SECOND;
        b.bound_ms = 55 * SECOND;
        a.gated = false;
        b.gated = false;
        let mut s = Scheduler::new(plan(1, vec![a, b], 1), &Resume::default(), T0);
        let rows = logs(&simulate(&mut s, T0, T0 + 10 * MINUTE, &|_, _| {
            (50 * SECOND, Finish::Ok)
        }));
        let missed: Vec<&RunLog> = rows
            .iter()
            .filter(|r| r.outcome == Outcome::Missed)
            .collect();
        let ok = rows.iter().filter(|r| r.outcome == Outcome::Ok).count();
        assert!(
            ok >= 10 && !missed.is_empty(),
            "ok {ok} missed {}",
            missed.len()
        );
        assert!(
            missed[0]
                .reason
                .as_deref()
                .unwrap()
                .contains("busy with exclusive run"),
            "{:?}",
            missed[0].reason
        );
        // Slots 0..=10 of both jobs: each logged once, in flight, or still waiting.
        let logged: u64 = rows.iter().map(|r| r.slots).sum();
        assert!(
            (20..=22).contains(&(logged + s.in_flight() as u64)),
            "{logged}"
        );
    }

    #[test]
    fn stopping_logs_what_is_due_and_lets_runs_finish() {
        let p = plan(
            2,
            vec![rtt(every(MINUTE, 0)), iperf("x", every(MINUTE, 0))],
            1,
        );
        let mut s = Scheduler::new(p, &Resume::default(), T0);
        let acts = s.poll(T0);
        // Both checks start; the transfers wait for them.
        assert_eq!(
            acts.iter()
                .filter(|a| matches!(a, Action::Start(_)))
                .count(),
            2
        );
        s.stop(T0 + 1);
        let rows: Vec<RunLog> = s
            .poll(T0 + 1)
            .into_iter()
            .filter_map(|a| {
                if let Action::Log(l) = a {
                    Some(l)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.outcome == Outcome::Missed
            && r.reason.as_deref() == Some("the campaign stopped before it could start")));
        assert_eq!(s.in_flight(), 2);
        assert_eq!(s.kill_all().len(), 2);
        s.finished(0, T0 + 2, Finish::Killed("stopped".into()));
        s.finished(1, T0 + 2, Finish::Ok);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(
            s.poll(T0 + HOUR).len(),
            2,
            "the two runs' rows, and nothing new"
        );
    }

    #[test]
    fn slips_come_from_the_seed_and_cron_slots_follow_the_expression() {
        let mk = |seed| {
            let mut w = every(HOUR, 20 * MINUTE);
            w.start_ms = Some(T0);
            Scheduler::new(plan(4, vec![rtt(w)], seed), &Resume::default(), T0)
        };
        let dues = |s: &Scheduler| {
            s.next_slots()
                .iter()
                .map(|(_, sl)| sl.unwrap().due_ms)
                .collect::<Vec<_>>()
        };
        assert_eq!(dues(&mk(1)), dues(&mk(1)));
        assert_ne!(dues(&mk(1)), dues(&mk(2)));
        let c = When {
            every: Every::Cron(Cron::parse("0 */6 * * *").unwrap()),
            slip_ms: 0,
            start_ms: None,
            until_ms: None,
            max_runs: None,
        };
        let mut s = Scheduler::new(plan(1, vec![rtt(c)], 1), &Resume::default(), T0 + 1);
        let rows = logs(&simulate(&mut s, T0 + 1, T0 + DAY + MINUTE, &|_, _| {
            (10, Finish::Ok)
        }));
        let hours: Vec<Ms> = rows.iter().map(|r| (r.nominal_ms - T0) / HOUR).collect();
        assert_eq!(hours, vec![6, 12, 18, 24]);
    }
}
