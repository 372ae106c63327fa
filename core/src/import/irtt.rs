//! irtt's JSON (`irtt client -o FILE`, irtt 0.9): one point per round trip, at the client's
//! send time (`timestamps.client.send.wall`, ns since 1970):
//! - `rtt` (ms): `delay.rtt` (ns), for a round trip that came back;
//! - `jitter` (ms): the magnitude of the round trip's IPDV (`ipdv.rtt`, the change in RTT
//!   from the previous round trip, RFC 3393), where irtt gives one;
//! - `loss`: 1 for a round trip lost either way (`lost` other than `"false"`), 0 for one
//!   that came back, so that the forecast of the series is a loss rate.
//!
//! irtt writes a gzipped file when the name ends in `.gz`: that must be unzipped first.

use super::{time_ok, Clock, Keyed, Out, SeriesInfo, Sink, Target};
use crate::json::{num, path, text, Json};
use crate::record::{Metric, Transport};

pub fn read<J: Json, S: Sink>(doc: &J, out: &mut Out<'_, S>, keyed: &mut Keyed) {
    let Some(trips) = doc.get("round_trips") else {
        return out.error(Some("round_trips"), "is missing");
    };
    let to = text(doc, &["config", "remote_address"], 512);
    let mut id = |out: &mut Out<'_, S>, metric: Metric| {
        keyed.id(
            out.reg,
            "irtt",
            metric,
            Some(Transport::Udp),
            Target::to(to.clone()),
            None,
            |to| {
                let name = match to {
                    Some(to) => format!("irtt {metric} to {to}"),
                    None => format!("irtt {metric}"),
                };
                SeriesInfo {
                    transport: Some(Transport::Udp),
                    ..SeriesInfo::measured(name, metric, to.clone(), Clock::Epoch)
                }
            },
        )
    };
    for i in 0..trips.len() {
        let Some(rt) = trips.at(i) else { continue };
        let field = |f: &str| format!("round_trips[{i}].{f}");
        let t = match num(&rt, &["timestamps", "client", "send", "wall"]).map(|ns| ns / 1e6) {
            Some(t) if time_ok(t) => t,
            _ => {
                out.error(
                    Some(&field("timestamps.client.send.wall")),
                    "is missing or out of range",
                );
                continue;
            }
        };
        let lost = match text(&rt, &["lost"], 16).as_deref() {
            Some("false") => false,
            Some("true" | "true_down" | "true_up") => true,
            _ => {
                out.error(
                    Some(&field("lost")),
                    "must be \"false\", \"true\", \"true_down\" or \"true_up\"",
                );
                continue;
            }
        };
        let loss = id(out, Metric::Loss);
        out.point(loss, Some(t), if lost { 1.0 } else { 0.0 }, &field("lost"));
        if lost {
            continue;
        }
        match num(&rt, &["delay", "rtt"]) {
            Some(ns) => {
                let rtt = id(out, Metric::Rtt);
                out.point(rtt, Some(t), ns / 1e6, &field("delay.rtt"));
            }
            None => out.error(Some(&field("delay.rtt")), "is missing"),
        }
        if path(&rt, &["ipdv", "rtt"]).is_some() {
            match num(&rt, &["ipdv", "rtt"]) {
                Some(ns) => {
                    let jitter = id(out, Metric::Jitter);
                    out.point(jitter, Some(t), ns.abs() / 1e6, &field("ipdv.rtt"));
                }
                None => out.error(Some(&field("ipdv.rtt")), "must be a number"),
            }
        }
    }
}
