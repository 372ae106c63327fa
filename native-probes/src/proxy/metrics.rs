//! The proxy's `/metrics` page (Prometheus text exposition format 0.0.4): per replica the
//! forecasts in use, their errors and sample age, choices by reason, the adaptive timeout,
//! failures and ejections; for the proxy the exploration share, the retry budget and the
//! edge's own counters. Deterministic: a policy and the edge's counts in, text out.

use super::policy::{Failure, Health, Policy, Reason, Source};
use crate::pcap::analysis::WrenTotals;
use std::fmt::Write as _;

/// What the edge counts itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Edge {
    pub requests: u64,
    pub in_flight: u64,
    pub connections_open: u64,
    /// Requests refused before reaching a replica (malformed, no service, too large).
    pub rejected: u64,
    /// Requests answered 502/504 after every attempt failed.
    pub failed: u64,
    pub retries_refused: u64,
    pub client_timeouts: u64,
    /// Client connections cut for taking none of a response for the send timeout.
    pub slow_readers: u64,
    /// Connections closed at accept because their client had its cap open already.
    pub refused_per_client: u64,
    /// Clients (IPv4 addresses, IPv6 /64s) with a connection open.
    pub clients_open: u64,
    pub uptime_s: f64,
    pub bandwidth_source: &'static str,
    /// The live capture's counts, when Wren runs.
    pub capture: Option<CaptureCounts>,
}

/// What the live capture for Wren counted (`proxy::capture`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaptureCounts {
    /// Packets the filter let through and the analyser read.
    pub packets: u64,
    /// Wren's lower bounds on the paths to the replicas.
    pub bounds: u64,
    /// Lower bounds dropped because the proxy had not taken the earlier ones yet.
    pub queue_dropped: u64,
    /// Packets the kernel dropped because the analyser did not read them in time.
    pub kernel_dropped: u64,
    /// What Wren made of the uploads: why there are no lower bounds, when there are none.
    pub wren: WrenTotals,
}

/// A counter with one label, one line per value.
fn labelled(o: &mut String, name: &str, help: &str, label: &str, rows: &[(&str, u64)]) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
    for (value, n) in rows {
        let _ = writeln!(o, "{name}{{{label}=\"{value}\"}} {n}");
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The page, for the time `now_ms`.
pub fn render(p: &Policy, e: &Edge, now_ms: f64) -> String {
    let mut o = String::new();
    let head = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    let reps: Vec<(String, super::policy::View)> = (0..p.replica_count())
        .map(|r| {
            let size = p.config().default_size;
            (escape(&p.spec(r).name), p.view(r, size, now_ms))
        })
        .collect();
    let gauge = |o: &mut String, name: &str, f: &dyn Fn(&super::policy::View) -> Option<f64>| {
        for (n, v) in &reps {
            if let Some(x) = f(v).filter(|x| x.is_finite()) {
                let _ = writeln!(o, "{name}{{replica=\"{n}\"}} {x}");
            }
        }
    };
    head(
        &mut o,
        "nowcast_proxy_bandwidth_forecast_mbits",
        "gauge",
        "Forecast available bandwidth to the replica in use, Mbit/s.",
    );
    for (n, v) in &reps {
        if let (Some(b), Some(s)) = (v.bandwidth, v.bandwidth_source) {
            let _ = writeln!(
                o,
                "nowcast_proxy_bandwidth_forecast_mbits{{replica=\"{n}\",source=\"{}\"}} {}",
                s.name(),
                b.value
            );
        }
    }
    head(
        &mut o,
        "nowcast_proxy_bandwidth_sample_age_seconds",
        "gauge",
        "Age of the newest bandwidth sample to the replica, by source.",
    );
    for (r, (n, _)) in reps.iter().enumerate() {
        for s in Source::ALL {
            if let Some(a) = p.bandwidth_age_ms(r, s, now_ms) {
                let _ = writeln!(
                    o,
                    "nowcast_proxy_bandwidth_sample_age_seconds{{replica=\"{n}\",source=\"{}\"}} {}",
                    s.name(),
                    a / 1e3
                );
            }
        }
    }
    head(
        &mut o,
        "nowcast_proxy_bandwidth_samples_total",
        "counter",
        "Bandwidth samples to the replica, by source.",
    );
    for (r, (n, _)) in reps.iter().enumerate() {
        for s in Source::ALL {
            let _ = writeln!(
                o,
                "nowcast_proxy_bandwidth_samples_total{{replica=\"{n}\",source=\"{}\"}} {}",
                s.name(),
                p.counters(r).bandwidth_samples[s as usize]
            );
        }
    }
    head(
        &mut o,
        "nowcast_proxy_bandwidth_error_mbits",
        "gauge",
        "Root mean square error of the bandwidth forecasts, Mbit/s.",
    );
    gauge(&mut o, "nowcast_proxy_bandwidth_error_mbits", &|v| {
        v.bandwidth.map(|b| b.error)
    });
    head(
        &mut o,
        "nowcast_proxy_rtt_forecast_ms",
        "gauge",
        "Forecast RTT to the replica, ms.",
    );
    gauge(&mut o, "nowcast_proxy_rtt_forecast_ms", &|v| {
        v.rtt.map(|b| b.value)
    });
    head(
        &mut o,
        "nowcast_proxy_rtt_error_ms",
        "gauge",
        "Root mean square error of the RTT forecasts, ms.",
    );
    gauge(&mut o, "nowcast_proxy_rtt_error_ms", &|v| {
        v.rtt.map(|b| b.error)
    });
    head(
        &mut o,
        "nowcast_proxy_completion_forecast_ms",
        "gauge",
        "Forecast completion time of a request of the default size, ms.",
    );
    gauge(&mut o, "nowcast_proxy_completion_forecast_ms", &|v| {
        v.time_ms
    });
    head(
        &mut o,
        "nowcast_proxy_sample_age_seconds",
        "gauge",
        "Age of the replica's newest sample.",
    );
    gauge(&mut o, "nowcast_proxy_sample_age_seconds", &|v| {
        v.sample_age_ms.map(|a| a / 1e3)
    });
    head(
        &mut o,
        "nowcast_proxy_timeout_seconds",
        "gauge",
        "The replica's adaptive request timeout.",
    );
    gauge(&mut o, "nowcast_proxy_timeout_seconds", &|v| {
        Some(v.timeout_ms / 1e3)
    });
    head(
        &mut o,
        "nowcast_proxy_in_flight",
        "gauge",
        "Requests and probes in flight to the replica.",
    );
    gauge(&mut o, "nowcast_proxy_in_flight", &|v| {
        Some(v.inflight as f64)
    });
    head(
        &mut o,
        "nowcast_proxy_up",
        "gauge",
        "1 when the replica takes traffic, 0 when ejected or on trial.",
    );
    gauge(&mut o, "nowcast_proxy_up", &|v| {
        Some(if v.health == Health::Up { 1.0 } else { 0.0 })
    });
    head(
        &mut o,
        "nowcast_proxy_choices_total",
        "counter",
        "Requests sent to the replica, by reason.",
    );
    for (r, (n, _)) in reps.iter().enumerate() {
        let c = p.counters(r);
        for reason in Reason::ALL {
            let k = c.chosen[reason as usize];
            if k > 0 {
                let _ = writeln!(
                    o,
                    "nowcast_proxy_choices_total{{replica=\"{n}\",reason=\"{}\"}} {k}",
                    reason.name()
                );
            }
        }
    }
    head(
        &mut o,
        "nowcast_proxy_errors_total",
        "counter",
        "Failed attempts to the replica, by kind.",
    );
    for (r, (n, _)) in reps.iter().enumerate() {
        let c = p.counters(r);
        for f in Failure::ALL {
            let _ = writeln!(
                o,
                "nowcast_proxy_errors_total{{replica=\"{n}\",kind=\"{}\"}} {}",
                f.name(),
                c.failures[f as usize]
            );
        }
    }
    let per = |o: &mut String, name: &str, help: &str, f: &dyn Fn(usize) -> u64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
        for (r, (n, _)) in reps.iter().enumerate() {
            let _ = writeln!(o, "{name}{{replica=\"{n}\"}} {}", f(r));
        }
    };
    per(
        &mut o,
        "nowcast_proxy_completed_total",
        "Attempts the replica completed.",
        &|r| p.counters(r).completed,
    );
    per(
        &mut o,
        "nowcast_proxy_probes_total",
        "Active probes of the replica.",
        &|r| p.counters(r).probes,
    );
    per(
        &mut o,
        "nowcast_proxy_ejections_total",
        "Times the replica was ejected.",
        &|r| p.counters(r).ejections,
    );
    per(
        &mut o,
        "nowcast_proxy_bytes_up_total",
        "Request body bytes sent to the replica.",
        &|r| p.counters(r).bytes_up,
    );
    per(
        &mut o,
        "nowcast_proxy_bytes_down_total",
        "Response body bytes received from the replica.",
        &|r| p.counters(r).bytes_down,
    );
    let one = |o: &mut String, name: &str, kind: &str, help: &str, v: f64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    };
    one(
        &mut o,
        "nowcast_proxy_exploration_share",
        "gauge",
        "Share of forecast decisions that went to an alternate.",
        p.exploration_share(),
    );
    one(
        &mut o,
        "nowcast_proxy_retry_tokens",
        "gauge",
        "Tokens left in the retry budget.",
        p.budget.tokens(),
    );
    one(
        &mut o,
        "nowcast_proxy_retries_total",
        "counter",
        "Retries the budget allowed.",
        p.budget.retries as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_retries_refused_total",
        "counter",
        "Retries the budget refused.",
        p.budget.refused as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_requests_total",
        "counter",
        "Requests received.",
        e.requests as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_requests_in_flight",
        "gauge",
        "Client requests waiting for their response's head (bodies on their way are not \
         counted).",
        e.in_flight as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_connections_open",
        "gauge",
        "Client connections open.",
        e.connections_open as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_clients_open",
        "gauge",
        "Clients (IPv4 addresses, IPv6 /64 prefixes) with a connection open.",
        e.clients_open as f64,
    );
    let _ = writeln!(
        o,
        "# HELP nowcast_proxy_connections_refused_total Client connections closed at accept, by \
         reason (per_client: the client had --max-connections-per-client open).\n\
         # TYPE nowcast_proxy_connections_refused_total counter\n\
         nowcast_proxy_connections_refused_total{{reason=\"per_client\"}} {}",
        e.refused_per_client
    );
    one(
        &mut o,
        "nowcast_proxy_rejected_total",
        "counter",
        "Requests answered by the proxy itself with an error (no service, bad request).",
        e.rejected as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_failed_total",
        "counter",
        "Requests answered 502 or 504 after every attempt failed.",
        e.failed as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_client_timeouts_total",
        "counter",
        "Client connections closed for moving nothing for the idle limit, or for taking none \
         of a response for the send timeout.",
        e.client_timeouts as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_slow_readers_total",
        "counter",
        "Client connections cut for taking none of a response for the send timeout.",
        e.slow_readers as f64,
    );
    one(
        &mut o,
        "nowcast_proxy_uptime_seconds",
        "gauge",
        "Seconds since the proxy started.",
        e.uptime_s,
    );
    if let Some(c) = &e.capture {
        for (name, kind, help, v) in [
            (
                "nowcast_proxy_capture_packets_total",
                "counter",
                "Packets of the upstream connections the live capture analysed.",
                c.packets,
            ),
            (
                "nowcast_proxy_capture_bounds_total",
                "counter",
                "Wren's lower bounds on the paths to the replicas.",
                c.bounds,
            ),
            (
                "nowcast_proxy_capture_queue_dropped_total",
                "counter",
                "Lower bounds dropped because the proxy had not taken the earlier ones.",
                c.queue_dropped,
            ),
            (
                "nowcast_proxy_capture_kernel_dropped_total",
                "counter",
                "Packets the kernel dropped before the capture read them.",
                c.kernel_dropped,
            ),
            (
                "nowcast_proxy_capture_wren_directions_total",
                "counter",
                "Upload directions of upstream connections Wren analysed.",
                c.wren.directions,
            ),
            (
                "nowcast_proxy_capture_short_runs_total",
                "counter",
                "Runs of 3 to 6 evenly spaced uploaded packets: too short for a Wren train.",
                c.wren.skipped.short_runs,
            ),
        ] {
            one(&mut o, name, kind, help, v as f64);
        }
        let (v, s) = (&c.wren.verdicts, &c.wren.skipped);
        labelled(
            &mut o,
            "nowcast_proxy_capture_trains_total",
            "Wren's trains of evenly spaced uploads, by verdict: lower_bound, or why not \
             (increasing: the RTTs rose; rates_differ: the ACKs came back at another rate; \
             too_few_acks, acks_at_one_instant, unacknowledged: no ACK rate; given_up: not \
             evaluated, too many trains waited for their ACKs).",
            "verdict",
            &[
                ("lower_bound", c.wren.lower_bounds),
                ("increasing", v.increasing),
                ("rates_differ", v.rates_differ),
                ("too_few_acks", v.too_few_acks),
                ("acks_at_one_instant", v.acks_at_one_instant),
                ("unacknowledged", v.unacknowledged),
                ("given_up", s.given_up),
            ],
        );
        labelled(
            &mut o,
            "nowcast_proxy_capture_packets_outside_trains_total",
            "Uploaded packets that end a Wren train, by reason (super_segment: TSO/GSO sent \
             several packets' worth at once; retransmission; zero_gap: captured at the same \
             instant as the one before).",
            "reason",
            &[
                ("super_segment", s.super_segments),
                ("retransmission", s.retransmissions),
                ("zero_gap", s.zero_gaps),
            ],
        );
    }
    let _ = writeln!(
        o,
        "# HELP nowcast_proxy_info The bandwidth source in use and the rule.\n\
         # TYPE nowcast_proxy_info gauge\n\
         nowcast_proxy_info{{bandwidth_source=\"{}\",balance=\"{}\"}} 1",
        e.bandwidth_source,
        p.config().balance.name()
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::analysis::Verdicts;
    use crate::proxy::policy::{Config, Done, ReplicaSpec, ServiceSpec};

    #[test]
    fn the_page_names_every_replica_with_its_forecasts_and_counts() {
        let mut p = Policy::new(
            Config::default(),
            vec![
                ReplicaSpec {
                    name: "a\"x".into(),
                    url: "http://a".into(),
                },
                ReplicaSpec {
                    name: "b".into(),
                    url: "http://b".into(),
                },
            ],
            vec![ServiceSpec {
                prefix: "/".into(),
                replicas: vec![0, 1],
                settings: None,
            }],
        )
        .unwrap();
        let d = p.choose(0, Some(1000), None, 0.0, [0.5, 0.5]);
        p.finish(&Done {
            replica: d.replica,
            now_ms: 10.0,
            probe: false,
            bytes_up: 1000,
            bytes_down: 10,
            total_ms: 3.0,
            wait_ms: Some(1.0),
            rtt_ms: Some(0.5),
            base_rtt_ms: None,
            bandwidth: Some((80.0, Source::TcpInfo)),
            failure: None,
        });
        p.bandwidth_sample(1, Source::Wren, 500.0, 70.0, 15_000);
        let e = Edge {
            bandwidth_source: "wren",
            refused_per_client: 3,
            clients_open: 2,
            capture: Some(CaptureCounts {
                packets: 12,
                bounds: 1,
                queue_dropped: 0,
                kernel_dropped: 0,
                wren: WrenTotals {
                    directions: 1,
                    trains: 3,
                    lower_bounds: 1,
                    verdicts: Verdicts {
                        increasing: 2,
                        ..Verdicts::default()
                    },
                    ..WrenTotals::default()
                },
            }),
            ..Edge::default()
        };
        let text = render(&p, &e, 1_010.0);
        assert!(text
            .contains("nowcast_proxy_bandwidth_forecast_mbits{replica=\"b\",source=\"wren\"} 70"));
        assert!(text.contains(
            "nowcast_proxy_bandwidth_sample_age_seconds{replica=\"b\",source=\"wren\"} 0.51"
        ));
        assert!(text.contains(
            "nowcast_proxy_bandwidth_samples_total{replica=\"a\\\"x\",source=\"tcp_info\"} 1"
        ));
        assert!(text.contains("nowcast_proxy_capture_packets_total 12"));
        assert!(text.contains("nowcast_proxy_capture_trains_total{verdict=\"increasing\"} 2"));
        assert!(text.contains("nowcast_proxy_capture_trains_total{verdict=\"lower_bound\"} 1"));
        assert!(text.contains(
            "nowcast_proxy_capture_packets_outside_trains_total{reason=\"super_segment\"} 0"
        ));
        assert!(text.contains("nowcast_proxy_capture_wren_directions_total 1"));
        assert!(text.contains("nowcast_proxy_connections_refused_total{reason=\"per_client\"} 3"));
        assert!(text.contains("nowcast_proxy_clients_open 2"));
        assert!(text.contains("nowcast_proxy_info{bandwidth_source=\"wren\""));
        assert!(text.contains(
            "nowcast_proxy_bandwidth_forecast_mbits{replica=\"a\\\"x\",source=\"tcp_info\"} 80"
        ));
        assert!(text.contains("nowcast_proxy_sample_age_seconds{replica=\"a\\\"x\"} 1"));
        assert!(text
            .contains("nowcast_proxy_choices_total{replica=\"a\\\"x\",reason=\"unmeasured\"} 1"));
        assert!(text.contains("nowcast_proxy_timeout_seconds{replica=\"b\"} 30"));
        assert!(text.contains("nowcast_proxy_errors_total{replica=\"b\",kind=\"timeout\"} 0"));
        // Every sample line is a name, optional labels and a number.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let v = line.rsplit(' ').next().unwrap();
            assert!(v.parse::<f64>().is_ok(), "{line}");
        }
    }
}
