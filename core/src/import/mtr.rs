//! mtr `--json` reports (mtr 0.9x: `report.mtr` and `report.hubs`, one hub per hop).
//!
//! A report summarises `-c N` probes per hop; it holds neither the probes nor a time. Of it,
//! the product reads the last hop, the destination, whose round trip is the path's: `rtt`
//! (ms) is its `Avg`, `loss` its `Loss%` / 100 (a destination that answered none of the
//! probes has no `rtt`). The intermediate hops are not series: routers answer ICMP at their
//! own pace (rate limits, slow paths), so their figures say little about the path. A file
//! holds one report, or one a line (`mtr --json` run repeatedly, compacted): each is one
//! point, placed a second apart since mtr writes no time.

use super::{Clock, Keyed, Out, SeriesInfo, Sink, Target};
use crate::json::{num, text, Json};
use crate::record::Metric;

pub fn read<J: Json, S: Sink>(doc: &J, out: &mut Out<'_, S>, keyed: &mut Keyed) {
    let Some(report) = doc.get("report") else {
        return;
    };
    let to = text(&report, &["mtr", "dst"], 512);
    let Some(hubs) = report.get("hubs").filter(|h| !h.is_empty()) else {
        return out.error(Some("report.hubs"), "is empty: the report has no hop");
    };
    let last = hubs.len() - 1;
    let Some(hop) = hubs.at(last) else { return };
    let field = |f: &str| format!("report.hubs[{last}].{f}");
    let mut id = |out: &mut Out<'_, S>, metric: Metric| {
        keyed.id(
            out.reg,
            "mtr",
            metric,
            None,
            Target::to(to.clone()),
            None,
            |to| {
                let name = match to {
                    Some(to) => format!("mtr {metric} to {to}"),
                    None => format!("mtr {metric}"),
                };
                SeriesInfo::measured(name, metric, to.clone(), Clock::Count)
            },
        )
    };
    let Some(loss) = num(&hop, &["Loss%"]) else {
        return out.error(Some(&field("Loss%")), "is missing");
    };
    let loss_id = id(out, Metric::Loss);
    out.point(loss_id, None, loss / 100.0, &field("Loss%"));
    if loss < 100.0 {
        match num(&hop, &["Avg"]) {
            Some(avg) => {
                let rtt = id(out, Metric::Rtt);
                out.point(rtt, None, avg, &field("Avg"));
            }
            None => out.error(Some(&field("Avg")), "is missing"),
        }
    }
}
