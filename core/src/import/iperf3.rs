//! iperf3 `-J` output, TCP and UDP (iperf 3.x's JSON: `start`, `intervals`, `end`).
//!
//! - Bandwidth: one point per interval (`sum`, and `sum_bidir_reverse` for `--bidir`), in
//!   Mbit/s, at the test's start (`start.timestamp.timesecs`) plus the interval's end. The
//!   direction is the client's: an interval the client sent is `bandwidth_up`, one it
//!   received (`-R`, or the reverse half of `--bidir`) `bandwidth_down`. Omitted intervals
//!   (`-O`) are left out.
//! - UDP: jitter (ms) and loss (`lost_percent` / 100) are known where packets are received.
//!   The client's intervals carry them when it received (`-R`); otherwise the server's
//!   intervals do when iperf3 was given `--get-server-output` and the server ran with `-J`
//!   (`server_output_json`), else only the test's summary (`end.sum_received`), one point.
//! - `error` (iperf3 could not run the test) is reported as the document's error.

use super::{time_ok, Clock, Keyed, Out, SeriesInfo, Sink, Target};
use crate::json::{num, path, text, Json};
use crate::record::{Metric, Transport};

struct Test {
    t0_s: f64,
    to: Option<String>,
    transport: Transport,
}

impl Test {
    fn id<S: Sink>(
        &self,
        out: &mut Out<'_, S>,
        keyed: &mut Keyed,
        metric: Metric,
    ) -> Option<usize> {
        let transport = self.transport;
        keyed.id(
            out.reg,
            "iperf3",
            metric,
            Some(transport),
            Target::to(self.to.clone()),
            None,
            |to| {
                let name = match to {
                    Some(to) => format!("iperf3 {metric} to {to}"),
                    None => format!("iperf3 {metric}"),
                };
                SeriesInfo {
                    transport: Some(transport),
                    ..SeriesInfo::measured(name, metric, to.clone(), Clock::Epoch)
                }
            },
        )
    }

    /// The time of an interval that ended `end` seconds into the test, or its error.
    fn at<S: Sink>(&self, end: f64, out: &mut Out<'_, S>, field: &str) -> Option<f64> {
        let t = (self.t0_s + end) * 1000.0;
        if time_ok(t) {
            Some(t)
        } else {
            out.error(Some(field), "the interval's time is out of range");
            None
        }
    }

    /// Jitter and loss of an interval of received packets.
    fn receiver<J: Json, S: Sink>(
        &self,
        sum: &J,
        t: f64,
        field: &str,
        out: &mut Out<'_, S>,
        keyed: &mut Keyed,
    ) -> bool {
        let mut any = false;
        if let Some(j) = num(sum, &["jitter_ms"]) {
            let id = self.id(out, keyed, Metric::Jitter);
            out.point(id, Some(t), j, &format!("{field}.jitter_ms"));
            any = true;
        }
        let loss = num(sum, &["lost_percent"]).map(|p| p / 100.0).or_else(|| {
            let packets = num(sum, &["packets"]).filter(|p| *p > 0.0)?;
            Some(num(sum, &["lost_packets"])? / packets)
        });
        if let Some(l) = loss {
            let id = self.id(out, keyed, Metric::Loss);
            out.point(id, Some(t), l, &format!("{field}.lost_percent"));
            any = true;
        }
        any
    }
}

pub fn read<J: Json, S: Sink>(doc: &J, out: &mut Out<'_, S>, keyed: &mut Keyed) {
    if let Some(e) = text(doc, &["error"], 1000) {
        out.error(Some("error"), format!("iperf3 reported an error: {e}"));
    }
    let intervals = match doc.get("intervals") {
        Some(i) if !i.is_empty() => i,
        _ if doc.get("error").is_some() => return,
        _ => return out.error(Some("intervals"), "is missing or empty"),
    };
    let Some(t0_s) = num(doc, &["start", "timestamp", "timesecs"]) else {
        return out.error(Some("start.timestamp.timesecs"), "is missing");
    };
    let host = text(doc, &["start", "connecting_to", "host"], 512);
    let port = num(doc, &["start", "connecting_to", "port"]);
    let udp = text(doc, &["start", "test_start", "protocol"], 8).as_deref() == Some("UDP");
    let reverse = num(doc, &["start", "test_start", "reverse"]) == Some(1.0);
    let test = Test {
        t0_s,
        to: host.map(|h| match port {
            Some(p) => format!("{h}:{p}"),
            None => h,
        }),
        transport: if udp { Transport::Udp } else { Transport::Tcp },
    };
    let mut received = false;
    for i in 0..intervals.len() {
        let Some(iv) = intervals.at(i) else { continue };
        for (key, sent_by_default) in [("sum", !reverse), ("sum_bidir_reverse", reverse)] {
            let field = format!("intervals[{i}].{key}");
            let Some(sum) = iv.get(key) else {
                if key == "sum" {
                    out.error(Some(&field), "is missing");
                }
                continue;
            };
            if sum.get("omitted").and_then(|o| o.boolean()) == Some(true) {
                continue;
            }
            let (Some(end), Some(bps)) = (num(&sum, &["end"]), num(&sum, &["bits_per_second"]))
            else {
                out.error(Some(&field), "needs end and bits_per_second");
                continue;
            };
            let Some(t) = test.at(end, out, &field) else {
                continue;
            };
            let sender = sum
                .get("sender")
                .and_then(|s| s.boolean())
                .unwrap_or(sent_by_default);
            let metric = if sender {
                Metric::BandwidthUp
            } else {
                Metric::BandwidthDown
            };
            let id = test.id(out, keyed, metric);
            out.point(id, Some(t), bps / 1e6, &format!("{field}.bits_per_second"));
            if udp && !sender {
                received |= test.receiver(&sum, t, &field, out, keyed);
            }
        }
    }
    if udp && !received {
        // Sent by the client: what the server received, per interval or for the whole test.
        let server = path(doc, &["server_output_json", "intervals"]);
        let server_intervals = server.as_ref().map_or(0, |s| s.len());
        for i in 0..server_intervals {
            let field = format!("server_output_json.intervals[{i}].sum");
            let Some(sum) = server
                .as_ref()
                .and_then(|s| s.at(i))
                .and_then(|iv| iv.get("sum"))
            else {
                continue;
            };
            if sum.get("omitted").and_then(|o| o.boolean()) == Some(true) {
                continue;
            }
            let Some(end) = num(&sum, &["end"]) else {
                out.error(Some(&field), "needs end");
                continue;
            };
            if let Some(t) = test.at(end, out, &field) {
                received |= test.receiver(&sum, t, &field, out, keyed);
            }
        }
        if !received {
            for key in ["sum_received", "sum"] {
                let Some(sum) = path(doc, &["end", key]) else {
                    continue;
                };
                if sum.get("jitter_ms").is_none() {
                    continue;
                }
                let field = format!("end.{key}");
                if let Some(t) = num(&sum, &["end"]).and_then(|end| test.at(end, out, &field)) {
                    test.receiver(&sum, t, &field, out, keyed);
                }
                break;
            }
        }
    }
}
