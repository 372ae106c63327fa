//! `nowcast bench`: experiments that reproduce a paper's figures. `timeouts`: Allen, Wolski
//! & Plank's reduction tree (see `nowcast::timeouts`).

use anyhow::Result;
use nowcast::timeouts::model::{Params, Policy, ATTEMPTS};
use nowcast::timeouts::run::{run as run_experiment, Options};
use nowcast::timeouts::stats::{best_static, render, render_goal, Versus};
use nowcast_core::timeout::Rule;
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// The adaptive-timeout experiment: a binary reduction tree on loopback, every send
    /// acknowledged, cancel–reconnect–resend on timeout (5 attempts, then abandoned), a
    /// seeded delay model with heavy-tailed stalls, slow links and a regime change half-way;
    /// static, Mean+kSD, NWS, the improved rule, RFC 6298 and hedging, on the same trace.
    /// Prints Tables 1 and 2 with 95 % confidence intervals.
    Timeouts(TimeoutArgs),
}

#[derive(clap::Args)]
struct TimeoutArgs {
    /// Processes in the tree (8–16 in the paper's spirit).
    #[arg(long, default_value_t = 16)]
    procs: usize,
    /// Sets of reductions (interleaved across policies) and reductions per set.
    #[arg(long, default_value_t = 10)]
    sets: usize,
    #[arg(long, default_value_t = 100)]
    reductions: usize,
    /// Real seconds per paper second (0.01: a 2 s timeout runs as 20 ms).
    #[arg(long, default_value_t = 0.01)]
    scale: f64,
    /// Seed of the delay trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Compute the sends in virtual time instead of running them on loopback.
    #[arg(long = "virtual")]
    virtual_time: bool,
    /// The delay model: lognormal spread of a link's send times, probability that an
    /// attempt stalls, and the stalls' Pareto shape (see `nowcast::timeouts::model::Params`).
    #[arg(long, default_value_t = Params::default().sigma)]
    sigma: f64,
    #[arg(long, default_value_t = Params::default().stall_p)]
    stall_p: f64,
    #[arg(long, default_value_t = Params::default().stall_alpha)]
    stall_alpha: f64,
    /// Payload of each send, bytes.
    #[arg(long, default_value_t = 1024)]
    payload: usize,
    /// The policies to compare, comma-separated, instead of the standard set: `static:S`,
    /// `allen:K`, `nws`, `windowed`, `rfc6298`, `target:MISS` (the improved rule, e.g.
    /// target:0.03), `censored:MISS` (the improved rule with timed-out attempts entered
    /// censored), `hedge:AT:CANCEL:BUDGET` (AT `p95` or a miss rate, CANCEL a miss rate,
    /// BUDGET hedges per send).
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// The dynamic policy the goal line judges (as in --policies; default: the experiment's
    /// candidate, `Policy::CANDIDATE`, chosen on other seeds than the default one).
    #[arg(long)]
    goal: Option<String>,
    /// Write the rows and every set's figures as JSON here.
    #[arg(long)]
    json: Option<String>,
    /// With --virtual: write every send (attempts, the timeouts they ran under, the parts of
    /// their delays) as CSV here.
    #[arg(long)]
    sends_csv: Option<String>,
    /// Write the delay trace (reduction, link, attempt, delay in paper seconds) as CSV here.
    #[arg(long)]
    save_trace: Option<String>,
}

/// One `--policies` item (see [`TimeoutArgs::policies`]).
fn policy(spec: &str) -> Result<Policy> {
    let bad = || {
        usage_err!("--policies: '{spec}' is not static:S, allen:K, nws, windowed, rfc6298, target:MISS, censored:MISS or hedge:AT:CANCEL:BUDGET")
    };
    let num = |v: &str, lo: f64, hi: f64| -> Result<f64> {
        let x: f64 = v.parse().map_err(|_| bad())?;
        if x.is_finite() && x > lo && x <= hi {
            Ok(x)
        } else {
            Err(usage_err!(
                "--policies: '{spec}': {v} must be in ({lo}, {hi}]"
            ))
        }
    };
    let parts: Vec<&str> = spec.trim().split(':').collect();
    Ok(match parts.as_slice() {
        ["static", t] => Policy::Static(num(t, 0.0, 3600.0)?),
        ["allen", k] => Policy::Dynamic(Rule::Allen {
            k: num(k, 0.0, 10.0)?,
        }),
        ["nws"] => Policy::Dynamic(Rule::Nws),
        ["windowed"] => Policy::Dynamic(Rule::Windowed { k: 2.0, window: 20 }),
        ["rfc6298"] => Policy::Dynamic(Rule::Rfc6298 { granularity: 0.0 }),
        ["target", m] => Policy::Dynamic(Rule::Target {
            miss: num(m, 0.0, 0.5)?,
        }),
        ["censored", m] => Policy::Censored(Rule::Target {
            miss: num(m, 0.0, 0.5)?,
        }),
        ["hedge", at, cancel, budget] => Policy::Hedge {
            at: match *at {
                "p95" => None,
                m => Some(Rule::Target {
                    miss: num(m, 0.0, 0.5)?,
                }),
            },
            cancel: Rule::Target {
                miss: num(cancel, 0.0, 0.5)?,
            },
            budget: num(budget, 0.0, 1.0)?,
        },
        _ => return Err(bad()),
    })
}

pub fn run(a: Args) -> Result<()> {
    let What::Timeouts(t) = a.what;
    if !(2..=64).contains(&t.procs) || t.sets == 0 || t.reductions == 0 {
        usage!("--procs must be 2..64, --sets and --reductions at least 1");
    }
    if t.scale.is_nan() || t.scale <= 0.0 || t.scale > 1.0 {
        usage!("--scale {}: must be in (0, 1]", t.scale);
    }
    if t.sends_csv.is_some() && !t.virtual_time {
        usage!("--sends-csv needs --virtual (the loopback run does not record its sends)");
    }
    let params = Params {
        procs: t.procs,
        sigma: t.sigma,
        stall_p: t.stall_p,
        stall_alpha: t.stall_alpha,
        ..Params::default()
    };
    let total = t.sets * t.reductions;
    if let Some(path) = &t.save_trace {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| usage_err!("--save-trace {path}: {e}"))?,
        );
        writeln!(f, "# nowcast bench timeouts trace, seed {}", t.seed)?;
        writeln!(f, "reduction,link,attempt,delay_s")?;
        for r in 0..total {
            for link in 1..t.procs {
                for att in 0..ATTEMPTS {
                    writeln!(
                        f,
                        "{r},{link},{att},{}",
                        params.delay(t.seed, r, total, link, att)
                    )?;
                }
            }
        }
        f.flush()?;
    }
    let goal = match &t.goal {
        Some(g) => policy(g)?,
        None => Policy::CANDIDATE,
    };
    let mut policies: Vec<Policy> = if t.policies.is_empty() {
        Policy::all()
    } else {
        t.policies
            .iter()
            .map(|p| policy(p))
            .collect::<Result<_>>()?
    };
    if !goal.is_static() && !policies.contains(&goal) {
        policies.push(goal);
    }
    let opts = Options {
        params,
        seed: t.seed,
        sets: t.sets,
        per_set: t.reductions,
        scale: t.scale,
        policies,
        virtual_time: t.virtual_time,
        payload: t.payload,
        sends_csv: t.sends_csv.clone(),
    };
    nowcast::warn_line!(
        "nowcast bench timeouts: {} processes, {} sets × {} reductions × {} policies, seed {}, {}",
        t.procs,
        t.sets,
        t.reductions,
        opts.policies.len(),
        t.seed,
        if t.virtual_time {
            "virtual time".to_string()
        } else {
            format!("loopback at scale {}", t.scale)
        }
    );
    let (rows, sets) = run_experiment(&opts)?;
    let mut out = std::io::stdout().lock();
    write!(out, "{}", render(&rows, "s (paper time)"))?;
    let is_static: Vec<bool> = opts.policies.iter().map(Policy::is_static).collect();
    let versus: Vec<Versus> = match best_static(&rows, &is_static) {
        Some(b) => (0..rows.len())
            .filter(|&i| !is_static[i])
            .map(|i| Versus::new(&rows[i], &sets[i], &rows[b], &sets[b]))
            .collect(),
        None => {
            writeln!(
                out,
                "\nEvery static policy abandoned sends: no reference for the goal."
            )?;
            Vec::new()
        }
    };
    let goal_name = goal.name();
    write!(
        out,
        "{}",
        render_goal(&versus, versus.iter().find(|v| v.policy == goal_name))
    )?;
    if let Some(path) = &t.json {
        let v = serde_json::json!({ "seed": t.seed, "scale": t.scale, "virtual": t.virtual_time,
            "procs": t.procs, "rows": rows, "versus": versus, "sets": sets });
        std::fs::write(path, serde_json::to_string_pretty(&v)?)
            .map_err(|e| usage_err!("--json {path}: {e}"))?;
    }
    Ok(())
}
