//! The campaign's `/metrics` text (Prometheus text exposition format 0.0.4): runs by
//! outcome, runs in flight, how late runs start (the schedule's jitter), and each archive
//! destination's backlog and lag. Served by the same one-route listener as `nowcast serve`'s.
//!
//! Deterministic core: a snapshot in, text out.

use crate::runlog::Outcome;
use std::fmt::Write as _;

/// What the campaign's `/metrics` shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub campaign: String,
    /// Runs logged by outcome, in [`Outcome::ALL`] order.
    pub runs: [u64; 5],
    pub in_flight: u64,
    /// Start delay after the due time over the recent runs: median and 99th percentile, s.
    pub start_delay_p50_s: Option<f64>,
    pub start_delay_p99_s: Option<f64>,
    /// Per archive destination: name, lines waiting, age of the oldest, failures.
    pub archives: Vec<(String, u64, f64, u64)>,
    pub rss_bytes: Option<u64>,
    pub uptime_s: f64,
}

/// The `q`-quantile (0..1) of `values` (nearest rank).
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub fn render(s: &Snapshot) -> String {
    let mut out = String::with_capacity(2048);
    let c = label(&s.campaign);
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{{campaign=\"{c}\"{labels}}} {v}");
        }
    };
    family(
        "nowcast_campaign_runs_total",
        "counter",
        "Slots of the schedule logged since start, by outcome (ok, failed, killed, skipped, missed).",
        Outcome::ALL
            .iter()
            .zip(s.runs)
            .map(|(o, n)| (format!(",outcome=\"{}\"", o.name()), n as f64))
            .collect(),
    );
    family(
        "nowcast_campaign_runs_in_flight",
        "gauge",
        "Runs started and not yet ended.",
        vec![(String::new(), s.in_flight as f64)],
    );
    let mut delays = Vec::new();
    if let Some(v) = s.start_delay_p50_s {
        delays.push((",quantile=\"0.5\"".to_string(), v));
    }
    if let Some(v) = s.start_delay_p99_s {
        delays.push((",quantile=\"0.99\"".to_string(), v));
    }
    family(
        "nowcast_campaign_start_delay_seconds",
        "gauge",
        "How long after its due time a run started, over the last 1000 runs.",
        delays,
    );
    family(
        "nowcast_campaign_archive_backlog",
        "gauge",
        "Records and run log rows waiting in the spool of each archive.",
        s.archives
            .iter()
            .map(|(n, b, _, _)| (format!(",archive=\"{}\"", label(n)), *b as f64))
            .collect(),
    );
    family(
        "nowcast_campaign_archive_lag_seconds",
        "gauge",
        "Age of the oldest line waiting for each archive (0 when none waits).",
        s.archives
            .iter()
            .map(|(n, _, lag, _)| (format!(",archive=\"{}\"", label(n)), *lag))
            .collect(),
    );
    family(
        "nowcast_campaign_archive_failures_total",
        "counter",
        "Failed writes to each archive (each retried with back-off).",
        s.archives
            .iter()
            .map(|(n, _, _, f)| (format!(",archive=\"{}\"", label(n)), *f as f64))
            .collect(),
    );
    family(
        "nowcast_campaign_uptime_seconds",
        "gauge",
        "Seconds since the campaign started.",
        vec![(String::new(), s.uptime_s)],
    );
    if let Some(rss) = s.rss_bytes {
        let _ = writeln!(
            out,
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {rss}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_and_archive_has_a_line() {
        let s = Snapshot {
            campaign: "lab".into(),
            runs: [10, 1, 2, 3, 4],
            in_flight: 2,
            start_delay_p50_s: Some(0.001),
            start_delay_p99_s: Some(0.02),
            archives: vec![
                ("sqlite".into(), 0, 0.0, 0),
                ("clickhouse".into(), 120, 33.5, 4),
            ],
            rss_bytes: Some(1 << 20),
            uptime_s: 5.0,
        };
        let t = render(&s);
        assert!(
            t.contains("nowcast_campaign_runs_total{campaign=\"lab\",outcome=\"killed\"} 2\n"),
            "{t}"
        );
        assert!(t.contains(
            "nowcast_campaign_archive_backlog{campaign=\"lab\",archive=\"clickhouse\"} 120\n"
        ));
        assert!(t.contains(
            "nowcast_campaign_archive_lag_seconds{campaign=\"lab\",archive=\"clickhouse\"} 33.5\n"
        ));
        assert!(t.contains("quantile=\"0.99\"} 0.02\n"));
        assert_eq!(quantile(&[3.0, 1.0, 2.0, 4.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[3.0, 1.0, 2.0, 4.0], 0.99), Some(4.0));
    }
}
