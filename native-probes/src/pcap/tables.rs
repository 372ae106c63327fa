//! The tables `nowcast pcap` prints for people: the summary, the live view, `--flows` (a
//! block of `key=value` fields per flow, for people and scripts), `--trains` (a table per
//! direction) and `--samples` (a line each). Every line fits in [`WIDTH`] columns.

use super::analysis::{
    Analyzer, DirectionReport, FlowReport, LiveRow, RttSample, Skips, TrainReport, TransferReport,
};
use crate::format::{columns, words, wrap, WIDTH};
use std::io::{self, Write};
use std::time::Duration;

/// The flows of a summary beyond its rows.
pub(super) struct Totals {
    /// Flows reported.
    pub(super) flows: u64,
    /// Flows left out of the table (past `run`'s row limit).
    pub(super) left_out: u64,
    /// The table's most rows (`--rows`).
    pub(super) rows: usize,
    /// What the full flow table left out (`evicted_note` in `run`).
    pub(super) evicted: Option<String>,
}

fn ms(s: f64) -> String {
    crate::output::number(s * 1e3)
}

fn opt(v: Option<f64>) -> String {
    v.map(crate::output::number).unwrap_or_else(|| "-".into())
}

/// The frames that gave no TCP segment, by reason, the counts that are not zero only.
fn skip_parts(s: &Skips) -> Vec<String> {
    let other_ip = s.not_tcp.saturating_sub(s.udp + s.icmp);
    let mut parts: Vec<String> = [
        (s.udp, "UDP"),
        (s.icmp, "ICMP"),
        (other_ip, "other IP protocols"),
        (s.not_ip, "not IP"),
        (s.unknown_link, "on an unknown link type"),
        (s.truncated, "with headers cut by the snap length"),
        (s.malformed, "with malformed headers"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if s.fragments > 0 {
        parts.push(crate::format::count(s.fragments, "IP fragment"));
    }
    if s.clock_steps > 0 {
        parts.push(format!(
            "{} across a step of the capture's clock",
            crate::format::count(s.clock_steps, "RTT sample")
        ));
    }
    parts
}

fn skips_line(s: &Skips) -> String {
    let parts = skip_parts(s);
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// What a capture without TCP held instead, for every output that would otherwise be empty
/// (`no TCP flows in 5 packets (5 UDP)`).
pub(super) fn no_flows(an: &Analyzer) -> String {
    if an.packets == 0 {
        return "no TCP flows: no packets were read".into();
    }
    let parts = skip_parts(&an.skips);
    let what = crate::format::count(an.packets, "packet");
    if parts.is_empty() {
        format!("no TCP flows in {what}")
    } else {
        format!("no TCP flows in {what} ({})", parts.join(", "))
    }
}

/// Why `--trains` printed none: nothing to analyse, no direction Wren looked at, or what its
/// runs of packets lacked.
pub(super) fn no_trains(an: &Analyzer, min_train: usize) -> String {
    if an.tcp_packets == 0 {
        return format!("no Wren trains: {}", no_flows(an));
    }
    let flows = crate::format::count(an.flows_seen(), "flow");
    let w = an.wren_totals();
    if w.directions == 0 {
        return format!(
            "no Wren trains: no direction of the {flows} sent data from the capture point (Wren \
             times packets where they leave their sender; --wren-any-side analyses every \
             direction that sent data)"
        );
    }
    let s = w.skipped;
    let left: Vec<String> = [
        (
            s.short_runs,
            "runs of evenly spaced packets shorter than a train",
        ),
        (s.retransmissions, "retransmissions"),
        (s.super_segments, "TSO/GSO super-segments"),
        (s.zero_gaps, "packets at the same instant as the one before"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    format!(
        "no Wren trains in the {} Wren analysed (of {flows}): a train is at least {min_train} \
         data packets in a row, evenly spaced (--wren-min-train, --wren-alpha){}",
        crate::format::count(w.directions, "direction"),
        if left.is_empty() {
            String::new()
        } else {
            format!("; it found {}", left.join(", "))
        }
    )
}

/// A prose line wrapped between words, its continuation indented by two.
fn prose(text: &str) -> Vec<String> {
    wrap("", &words(text), " ", 2)
}

/// A table for people: a heading and rows of cells, each column as wide as its widest cell,
/// two spaces apart (one between the flow and its addresses), the first column left-aligned
/// and the second (`from → to`, the only wide one) left-aligned and given what room the
/// others leave in [`WIDTH`]. A row whose addresses do not fit has them on a line of their
/// own, its figures on the next. Each row may carry lines below it, indented under the
/// addresses and wrapped (`(cells, clauses)`).
fn grid(o: &mut dyn Write, head: &[&str], rows: &[(Vec<String>, Vec<String>)]) -> io::Result<()> {
    let mut widths: Vec<usize> = head.iter().map(|h| columns(h)).collect();
    for (cells, _) in rows {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(columns(c));
        }
    }
    let others: usize = widths.iter().skip(2).map(|w| w + 2).sum::<usize>() + widths[0] + 1;
    widths[1] = widths[1].min(WIDTH.saturating_sub(others).max(columns(head[1])));
    let indent = widths[0] + 1;
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w.saturating_sub(columns(c)));
            match i {
                0 => s.push_str(&format!("{c}{pad}")),
                1 => s.push_str(&format!(" {c}{pad}")),
                _ => s.push_str(&format!("  {pad}{c}")),
            }
        }
        s.trim_end().to_string()
    };
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    writeln!(o, "{}", line(&head))?;
    for (cells, clauses) in rows {
        if columns(&cells[1]) > widths[1] {
            // The addresses alone, broken after the arrow if even that is too wide (two long
            // IPv6 addresses), then the figures.
            let pair = match cells[1].split_once(" → ") {
                Some((from, to)) if indent + columns(&cells[1]) > WIDTH => {
                    vec![format!("{from} →"), to.to_string()]
                }
                _ => vec![cells[1].clone()],
            };
            for (i, p) in pair.iter().enumerate() {
                let first = if i == 0 { cells[0].as_str() } else { "" };
                writeln!(o, "{first:<w$} {p}", w = widths[0])?;
            }
            let mut rest = cells.clone();
            rest[0] = String::new();
            rest[1] = String::new();
            writeln!(o, "{}", line(&rest))?;
        } else {
            writeln!(o, "{}", line(cells))?;
        }
        if !clauses.is_empty() {
            for l in wrap(&" ".repeat(indent), clauses, "; ", indent) {
                writeln!(o, "{l}")?;
            }
        }
    }
    Ok(())
}

/// What Wren made of a direction: its last lower bound and the forecast of the next, or why
/// there is none.
fn wren_clause(d: &DirectionReport) -> Option<String> {
    match (&d.wren, d.wren_off) {
        (Some(w), _) => Some(match w.last_bound_mbps {
            Some(b) => format!(
                "avail bw ≥ {} Mbit/s, next {} ({} of {})",
                crate::output::number(b),
                opt(w.forecast.as_ref().map(|f| f.value)),
                crate::format::count(w.lower_bounds, "bound"),
                crate::format::count(w.trains, "train")
            ),
            None => format!(
                "avail bw: no lower bound from {}",
                crate::format::count(w.trains, "train")
            ),
        }),
        (None, Some(why)) => Some(format!("no avail bw: {why}")),
        (None, None) => None,
    }
}

/// A direction's row of the summary: the figures most asked for, then the rest as clauses
/// for the lines below it.
fn direction_row(id: u64, d: &DirectionReport) -> (Vec<String>, Vec<String>) {
    let cells = vec![
        id.to_string(),
        format!("{} → {}", d.from, d.to),
        d.packets.to_string(),
        d.frame_bytes.to_string(),
        opt(d.throughput_mbps),
        d.retransmissions.to_string(),
        d.ack_rtt
            .map(|q| ms(q.median))
            .unwrap_or_else(|| "-".into()),
    ];
    let mut clauses = vec![format!("{:.3} s", d.duration_s())];
    if d.out_of_order > 0 {
        clauses.push(format!("{} out of order", d.out_of_order));
    }
    if let Some(q) = &d.ack_rtt {
        clauses.push(format!(
            "RTT ms min/med/p90/max {}/{}/{}/{} ({})",
            ms(q.min),
            ms(q.median),
            ms(q.p90),
            ms(q.max),
            crate::format::count(q.n, "sample")
        ));
    }
    if let Some(q) = &d.ts_rtt {
        clauses.push(format!(
            "by TCP timestamps med {} ({})",
            ms(q.median),
            crate::format::count(q.n, "sample")
        ));
    }
    clauses.extend(wren_clause(d));
    (cells, clauses)
}

/// The summary table's heading: what each figure is (`frame bytes` count whole frames, as
/// tshark's conv,tcp does; goodput is new payload over the direction's duration).
const SUMMARY_HEAD: [&str; 7] = [
    "flow",
    "from → to",
    "packets",
    "frame bytes",
    "goodput Mbit/s",
    "retx",
    "RTT ms",
];

/// What Wren made of a direction's trains and why the others gave no bound, the counts that
/// are not zero only.
fn wren_note(id: u64, d: &DirectionReport) -> Option<Vec<String>> {
    let w = d.wren.as_ref()?;
    let (s, v) = (w.skipped, w.verdicts);
    if w.trains + s.super_segments + s.retransmissions + s.zero_gaps + s.given_up == 0 {
        return None;
    }
    let nonzero = |items: &[(u64, &str)]| -> Vec<String> {
        items
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect()
    };
    let head = [
        format!("flow {id} {} → {}:", d.from, d.to),
        format!(
            "Wren: {}, {}",
            crate::format::count(w.trains, "train"),
            crate::format::count(w.lower_bounds, "lower bound")
        ),
    ];
    let mut lines = wrap("", &head, " ", 2);
    let parts = [
        (
            "no bound from",
            nonzero(&[
                (
                    v.increasing,
                    "increasing (ISR above the available bandwidth)",
                ),
                (v.rates_differ, "whose ACK rate differs from the ISR"),
                (
                    v.too_few_acks,
                    "with fewer than two explicit ACKs (delayed or stretch ACKs)",
                ),
                (v.acks_at_one_instant, "with their ACKs at one instant"),
                (v.unacknowledged, "never acknowledged"),
            ]),
        ),
        (
            "packets left out of trains:",
            nonzero(&[
                (
                    s.super_segments,
                    "TSO/GSO super-segments (not single packets on the wire)",
                ),
                (
                    s.retransmissions,
                    "retransmissions (their ACKs are ambiguous)",
                ),
                (s.zero_gaps, "at the same instant as the one before"),
            ]),
        ),
    ];
    for (what, items) in parts {
        if !items.is_empty() {
            lines.extend(wrap(&format!("  {what} "), &items, ", ", 4));
        }
    }
    if s.given_up > 0 {
        lines.push(format!(
            "  {} dropped waiting for ACKs",
            crate::format::count(s.given_up, "train")
        ));
    }
    Some(lines)
}

pub(super) fn summary(
    o: &mut dyn Write,
    title: &str,
    headline: &[String],
    an: &Analyzer,
    flows: &[FlowReport],
    total: &Totals,
    transfers: &[TransferReport],
) -> io::Result<()> {
    let mut lines = prose(title);
    for h in headline {
        // `FILE: what was read`: the name, then what was read whole on the next line if the
        // two do not fit on one.
        lines.extend(match h.split_once(": ") {
            Some((name, what)) => wrap("", &[format!("{name}:"), what.to_string()], " ", 2),
            None => prose(h),
        });
    }
    if total.flows == 0 {
        // No table to head: what the capture held instead.
        lines.extend(prose(&no_flows(an)));
        for l in lines {
            writeln!(o, "{l}")?;
        }
        return Ok(());
    }
    lines.extend(prose(&format!(
        "{}, {} in {}; skipped: {}",
        crate::format::count(an.packets, "frame"),
        crate::format::count(an.tcp_packets, "TCP segment"),
        crate::format::count(total.flows, "flow"),
        skips_line(&an.skips)
    )));
    if let Some(n) = &total.evicted {
        lines.extend(prose(&format!("Note: {n}")));
    }
    if total.left_out > 0 {
        lines.extend(prose(&format!(
            "Note: {} of {} flows {} not in the table, which holds the {} with the most bytes (--rows); --flows or --json give every flow",
            total.left_out,
            total.flows,
            if total.left_out == 1 { "is" } else { "are" },
            total.rows
        )));
    }
    lines.push(String::new());
    for l in lines.drain(..) {
        writeln!(o, "{l}")?;
    }
    let rows: Vec<(Vec<String>, Vec<String>)> = flows
        .iter()
        .flat_map(|f| {
            f.directions
                .iter()
                .filter(|d| d.packets > 0)
                .map(|d| direction_row(f.id, d))
        })
        .collect();
    grid(o, &SUMMARY_HEAD, &rows)?;
    drop(rows);
    let notes: Vec<String> = flows
        .iter()
        .flat_map(|f| f.directions.iter().filter_map(|d| wren_note(f.id, d)))
        .flatten()
        .collect();
    if !notes.is_empty() {
        lines.push(String::new());
        lines.extend(notes);
    }
    for l in lines {
        writeln!(o, "{l}")?;
    }
    transfers_table(o, transfers)
}

/// The IEPM-BW transfers: one line each (two with long addresses).
fn transfer_lines(transfers: &[TransferReport]) -> Vec<String> {
    let mut lines = vec![
        String::new(),
        "IEPM-BW transfers (flows between two hosts starting within 5 s of each other), Mbit/s by"
            .into(),
        "method 1 (Σ bytes / time), 2 (bytes / mean time), 3 (bytes / max time), of every payload"
            .into(),
        "byte as a flow record counts it (retransmissions too, unlike the flows' goodput above)"
            .into(),
    ];
    for t in transfers {
        let clauses = [
            format!(
                "{} → {}: {}",
                t.from,
                t.to,
                crate::format::count(t.streams as u64, "stream")
            ),
            format!("{} payload bytes", t.bytes),
            format!(
                "Mbit/s {} / {} / {}",
                crate::output::number(t.mbps[0]),
                crate::output::number(t.mbps[1]),
                crate::output::number(t.mbps[2])
            ),
        ];
        lines.extend(wrap("", &clauses, ", ", 2));
    }
    lines
}

pub(super) fn transfers_table(o: &mut dyn Write, transfers: &[TransferReport]) -> io::Result<()> {
    if transfers.is_empty() {
        return Ok(());
    }
    for l in transfer_lines(transfers) {
        writeln!(o, "{l}")?;
    }
    Ok(())
}

/// The live view of the open flows that carried data; `last`: each direction's new bytes at
/// the previous view, for the goodput over the last second. The heading counts the flows
/// that sent new bytes since that view among them ("2 flows sending data" stood over flows
/// whose goodput had been 0.000 since their transfers ended).
pub(super) fn live_table(
    o: &mut dyn Write,
    elapsed: Duration,
    rows: &[LiveRow],
    last: &mut std::collections::HashMap<(u64, String), u64>,
) -> io::Result<()> {
    let mut open = std::collections::HashSet::new();
    let mut sending = std::collections::HashSet::new();
    let cells: Vec<(Vec<String>, Vec<String>)> = rows
        .iter()
        .map(|r| {
            let key = (r.id, r.from.to_string());
            let before = last.insert(key, r.new_bytes).unwrap_or(0);
            let new = r.new_bytes - before.min(r.new_bytes);
            open.insert(r.id);
            if new > 0 {
                sending.insert(r.id);
            }
            let rate = new as f64 * 8.0 / 1e6;
            let cells = vec![
                r.id.to_string(),
                format!("{} → {}", r.from, r.to),
                crate::output::number(rate),
                r.ack_rtt_median_s.map(ms).unwrap_or_else(|| "-".into()),
                r.retransmissions.to_string(),
                // The last bound and its forecast; a dash alone while there is neither.
                match (r.last_bound_mbps, r.forecast_mbps) {
                    (None, None) => "-".into(),
                    (b, f) => format!("{} →{}", opt(b), opt(f)),
                },
            ];
            (cells, Vec::new())
        })
        .collect();
    // A row per direction: the flows are counted once.
    let (open, sending) = (open.len() as u64, sending.len() as u64);
    let counted = if sending == open {
        crate::format::count(open, "flow")
    } else {
        format!("{sending} of {}", crate::format::count(open, "flow"))
    };
    writeln!(
        o,
        "-- {:.0} s: {counted} sending data",
        elapsed.as_secs_f64()
    )?;
    if !cells.is_empty() {
        let head = [
            "flow",
            "from → to",
            "goodput Mbit/s",
            "RTT ms",
            "retx",
            "avail ≥ Mbit/s",
        ];
        grid(o, &head, &cells)?;
    }
    o.flush()
}

/// Nanoseconds since 1970 as exact seconds with nine decimals (an f64 would round them).
fn seconds(ns: i64) -> String {
    format!(
        "{}.{:09}",
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000)
    )
}

/// A flow for `--flows`: `key=value` fields, the flow's on its first line (which starts
/// `flow=`), then each direction's (`ab.` from `a` to `b`, `ba.` back) on lines indented by two
/// (four where a line wraps), every line within [`WIDTH`]; joining the indented lines to the
/// first gives the flow on one line. RTTs in ms (`_ms`, to the ns), durations and times in s.
pub fn flow_block(f: &FlowReport) -> Vec<String> {
    let head = [
        format!("flow={}", f.id),
        format!("a={}", f.a),
        format!("b={}", f.b),
        format!("start={}", seconds(f.start_ns)),
        format!("end={}", seconds(f.last_ns)),
        format!("handshake={}", f.handshake),
        format!("closed={}", f.closed),
        format!("evicted={}", f.evicted),
    ];
    let mut lines = wrap("", &head, " ", 2);
    let fixed = |v: Option<f64>, places: usize| {
        v.map(|v| format!("{v:.places$}"))
            .unwrap_or_else(|| "-".into())
    };
    let rtt_ms = |v: Option<f64>| fixed(v.map(|s| s * 1e3), 6);
    for (tag, d) in ["ab", "ba"].iter().zip(&f.directions) {
        let (ack, ts) = (d.ack_rtt.as_ref(), d.ts_rtt.as_ref());
        let w = d.wren.as_ref();
        // A line each (wrapped if need be): volume, retransmissions, data→ACK RTT,
        // timestamp RTT and Wren.
        let groups = [
            vec![
                ("packets", d.packets.to_string()),
                ("bytes", d.frame_bytes.to_string()),
                ("payload", d.payload_bytes.to_string()),
                ("new", d.new_bytes.to_string()),
                ("duration", format!("{:.9}", d.duration_s())),
                ("mbps", fixed(d.throughput_mbps, 6)),
            ],
            vec![
                ("retx", d.retransmissions.to_string()),
                ("fast", d.fast_retransmissions.to_string()),
                ("spurious", d.spurious_retransmissions.to_string()),
                ("ooo", d.out_of_order.to_string()),
                ("loss", fixed(d.loss, 6)),
                ("super", d.super_segments.to_string()),
            ],
            vec![
                ("ack_rtt.n", ack.map_or(0, |x| x.n).to_string()),
                ("ack_rtt.min_ms", rtt_ms(ack.map(|x| x.min))),
                ("ack_rtt.median_ms", rtt_ms(ack.map(|x| x.median))),
                ("ack_rtt.p90_ms", rtt_ms(ack.map(|x| x.p90))),
                ("ack_rtt.max_ms", rtt_ms(ack.map(|x| x.max))),
            ],
            vec![
                ("ts_rtt.n", ts.map_or(0, |x| x.n).to_string()),
                ("ts_rtt.median_ms", rtt_ms(ts.map(|x| x.median))),
                ("bounds", w.map_or(0, |w| w.lower_bounds).to_string()),
                ("last_bound", fixed(w.and_then(|w| w.last_bound_mbps), 3)),
                (
                    "next_bound",
                    fixed(w.and_then(|w| w.forecast.as_ref()).map(|f| f.value), 3),
                ),
            ],
        ];
        for g in groups {
            let fields: Vec<String> = g.iter().map(|(k, v)| format!("{tag}.{k}={v}")).collect();
            lines.extend(wrap("  ", &fields, " ", 4));
        }
    }
    lines
}

/// The columns of `--trains`: times from the flow's first packet, rates over the packets
/// after the first (Wren §3.2), the verdict as the records name it.
const TRAIN_HEAD: [&str; 7] = [
    "start s",
    "span ms",
    "packets",
    "acked",
    "ISR Mbit/s",
    "ACK Mbit/s",
    "verdict",
];
/// Room for a day's offsets in s and a 400 Gbit/s rate, so that the columns stay put as the
/// trains come.
const TRAIN_WIDTHS: [usize; 6] = [12, 9, 7, 5, 10, 10];

fn train_row(cells: &[String; 7]) -> String {
    let mut s = String::new();
    for (c, w) in cells[..6].iter().zip(TRAIN_WIDTHS) {
        s.push_str("  ");
        s.push_str(&" ".repeat(w.saturating_sub(columns(c))));
        s.push_str(c);
    }
    format!("{s}  {}", cells[6])
}

/// A Wren train for `--trains`, as a row of a table with a heading for its direction; the
/// heading (and a blank line before it, but for the first) comes when the direction differs
/// from `previous`'s, the previous train printed.
pub fn train_lines(t: &TrainReport, previous: Option<&TrainReport>) -> Vec<String> {
    let tr = &t.train;
    let mut lines = Vec::new();
    let same = previous.is_some_and(|p| p.flow == t.flow && p.from == t.from);
    if !same {
        if previous.is_some() {
            lines.push(String::new());
        }
        let head = [
            format!("flow {} {} →", t.flow, t.from),
            format!("{}:", t.to),
            format!(
                "Wren trains, from its first packet at {} s",
                seconds(t.flow_start_ns)
            ),
        ];
        lines.extend(wrap("", &head, " ", 2));
        lines.push(train_row(&TRAIN_HEAD.map(String::from)));
    }
    let verdict = serde_json::to_value(tr.verdict)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    lines.push(train_row(&[
        format!("{:.6}", tr.start),
        format!("{:.3}", (tr.end - tr.start) * 1e3),
        tr.packets.to_string(),
        tr.acked.to_string(),
        format!("{:.3}", tr.isr_bps / 1e6),
        tr.ack_rate_bps
            .map(|r| format!("{:.3}", r / 1e6))
            .unwrap_or_else(|| "-".into()),
        verdict,
    ]));
    lines
}

/// One line per RTT sample: the flow and direction it times (as `--flows` names them), the
/// packet that completed it, the method, the RTT in ms (to the ns).
pub fn sample_line(s: &RttSample) -> String {
    format!(
        "sample flow={} dir={} packet={} method={} rtt_ms={:.6}",
        s.flow,
        ["ab", "ba"][s.direction],
        s.packet,
        if s.timestamps { "ts" } else { "ack" },
        s.rtt_s * 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::analysis::Config;
    use crate::pcap::analysis::{Verdicts, WrenReport};
    use crate::pcap::decode::{Addr, Endpoint};
    use crate::pcap::samples::Summary;
    use nowcast_core::record::{RecordForecast, Selector};
    use nowcast_core::wren::Skipped;

    fn v4(last: u8, port: u16) -> Endpoint {
        Endpoint {
            addr: Addr::v4([192, 168, 100, last]),
            port,
        }
    }

    fn v6(last: u8, port: u16) -> Endpoint {
        let mut a = [0xfd; 16];
        a[15] = last;
        Endpoint {
            addr: Addr::v6(a),
            port,
        }
    }

    fn rtt(n: u64) -> Summary {
        Summary {
            n,
            min: 0.000_012_3,
            median: 0.012_345,
            p90: 0.123_45,
            max: 3.044,
        }
    }

    fn direction(from: Endpoint, to: Endpoint, data: bool) -> DirectionReport {
        DirectionReport {
            from,
            to,
            packets: 6_535,
            frame_bytes: 371_450_316,
            payload_bytes: 371_000_000,
            new_bytes: 370_000_000,
            first_ns: 1_000_000_000,
            last_ns: 2_001_000_000,
            throughput_mbps: data.then_some(2_960.1),
            retransmissions: 12,
            fast_retransmissions: 1,
            spurious_retransmissions: 2,
            out_of_order: 3,
            data_packets: 6_000,
            loss: Some(0.01),
            ack_rtt: Some(rtt(1_027)),
            ts_rtt: Some(rtt(999)),
            super_segments: 12,
            wren: data.then(|| WrenReport {
                trains: 5_000,
                lower_bounds: 1_234,
                verdicts: Verdicts {
                    increasing: 10,
                    rates_differ: 11,
                    too_few_acks: 12,
                    acks_at_one_instant: 13,
                    unacknowledged: 14,
                },
                last_bound_mbps: Some(859.7),
                forecast: Some(RecordForecast {
                    value: 12_345.6,
                    method: "last_value".into(),
                    selector: Selector::Mse,
                    error: 1.0,
                }),
                skipped: Skipped {
                    super_segments: 12,
                    retransmissions: 3,
                    zero_gaps: 4,
                    short_runs: 5,
                    given_up: 6,
                },
            }),
            wren_off: (!data).then_some(
                "the capture is at the receiver (a guess: its handshake alone, on a short path)",
            ),
        }
    }

    fn flow(id: u64, a: Endpoint, b: Endpoint) -> FlowReport {
        FlowReport {
            id,
            a,
            b,
            start_ns: 0,
            last_ns: 1,
            handshake: true,
            closed: true,
            evicted: false,
            directions: [direction(a, b, true), direction(b, a, false)],
        }
    }

    /// A flow of a day at 40 Gbit/s with many retransmissions: the widest figures.
    fn huge(mut f: FlowReport) -> FlowReport {
        for d in &mut f.directions {
            d.packets = 6_535_123_456;
            d.frame_bytes = 371_450_316_123_456;
            d.last_ns = 87_401_001_000_000;
            d.throughput_mbps = d.throughput_mbps.map(|_| 39_999.9);
            d.retransmissions = 123_456_789;
            d.out_of_order = 77_777_777;
            d.ack_rtt = Some(rtt(1_027_000_000));
        }
        f
    }

    /// The summary of `flows` as printed.
    fn printed(flows: &[FlowReport], transfers: &[TransferReport]) -> String {
        let an = Analyzer::new(Config::default());
        let total = Totals {
            flows: 200_000,
            left_out: 199_000,
            rows: 50,
            evicted: Some("the flow table was full (100000 flows at once, --max-flows): 5 flows were reported before they closed or went idle (the ones idle longest, to make room); a packet of one of them afterwards started a new flow".into()),
        };
        let headline = ["/a/long/path/to/a/capture/made/on/the/border/router/with/tcpdump/trace-2026-12-06.pcap.gz: 19187 packets, 727102016 bytes, pcap (ns, gzip)".to_string()];
        let mut o = Vec::new();
        summary(
            &mut o,
            "nowcast pcap trace.pcapng",
            &headline,
            &an,
            flows,
            &total,
            transfers,
        )
        .unwrap();
        String::from_utf8(o).unwrap()
    }

    fn assert_narrow(text: &str) {
        for l in text.lines() {
            assert!(columns(l) <= WIDTH, "{} columns: {l}\n{text}", columns(l));
            assert_eq!(l, l.trim_end(), "trailing spaces: {l:?}");
        }
    }

    #[test]
    fn every_line_of_the_summary_fits_in_100_columns() {
        // The widest figures and addresses: every line still fits.
        let flows = [
            flow(0, v4(1, 55110), v4(2, 5201)),
            huge(flow(1_000_000, v4(255, 65535), v4(254, 65534))),
            flow(2, v6(1, 443), v6(2, 65535)),
        ];
        assert_narrow(&printed(&flows, &[]));
        // A day's capture of an ordinary host.
        let flows = [
            flow(0, v4(1, 55110), v4(2, 5201)),
            flow(2, v6(1, 443), v6(2, 65535)),
        ];
        let transfers = [
            TransferReport {
                from: v4(1, 0).addr,
                to: v4(2, 0).addr,
                start_ns: 0,
                streams: 1,
                bytes: 371_019_453.0,
                mbps: [2964.1, 2962.2, 2959.3],
            },
            TransferReport {
                from: v6(1, 0).addr,
                to: v6(2, 0).addr,
                start_ns: 0,
                streams: 128,
                bytes: 371_019_453_123.0,
                mbps: [29_640.1, 29_620.2, 29_590.3],
            },
        ];
        let text = printed(&flows, &transfers);
        assert_narrow(&text);
        // Each figure under a heading that says what it is.
        let head = text
            .lines()
            .find(|l| l.starts_with("flow from → to"))
            .unwrap_or_else(|| panic!("{text}"));
        for h in ["packets", "frame bytes", "goodput Mbit/s", "retx", "RTT ms"] {
            assert!(head.contains(h), "{head}");
        }
        // A v4 flow: its row has the figures, its clauses the lines below.
        let row = text
            .lines()
            .find(|l| l.starts_with("0    192.168.100.1:55110 → 192.168.100.2:5201"))
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            row.split_whitespace().skip(4).collect::<Vec<_>>(),
            ["6535", "371450316", "2960", "12", "12.35"],
            "{text}"
        );
        for part in [
            "1.001 s; 3 out of order; RTT ms min/med/p90/max 0.012/12.35/123.5/3044 (1027 samples);",
            "avail bw ≥ 859.7 Mbit/s, next 12346 (1234 bounds of 5000 trains)",
            "no avail bw: the capture is at the receiver (a guess: its handshake alone, on a short path)",
            "12 TSO/GSO super-segments (not single packets on the wire)",
            "  6 trains dropped waiting for ACKs",
            "Note: the flow table was full (100000 flows at once, --max-flows)",
            "Note: 199000 of 200000 flows are not in the table",
            "trace-2026-12-06.pcap.gz:\n  19187 packets, 727102016 bytes, pcap (ns, gzip)\n",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        // Two IPv6 addresses: on a line of their own, then the figures.
        let v6 = "[fdfd:fdfd:fdfd:fdfd:fdfd:fdfd:fdfd:fd01]:443";
        assert!(
            text.contains(&format!(
                "\n2    {v6} → [fdfd:fdfd:fdfd:fdfd:fdfd:fdfd:fdfd:fd02]:65535\n "
            )),
            "{text}"
        );
        assert!(text.contains("192.168.100.1 → 192.168.100.2: 1 stream, 371019453 payload bytes, Mbit/s 2964 / 2962 / 2959"), "{text}");
        assert!(
            text.contains(": 128 streams,\n  371019453123 payload bytes"),
            "{text}"
        );
    }

    fn live_lines(
        elapsed: Duration,
        rows: &[LiveRow],
        last: &mut std::collections::HashMap<(u64, String), u64>,
    ) -> Vec<String> {
        let mut o = Vec::new();
        live_table(&mut o, elapsed, rows, last).unwrap();
        String::from_utf8(o)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn the_live_view_fits_in_100_columns_and_counts_in_words() {
        let row = |id, from, to| LiveRow {
            id,
            from,
            to,
            new_bytes: 125_000_000,
            packets: 1,
            ack_rtt_median_s: Some(0.000_123),
            ts_rtt_median_s: Some(1.234),
            retransmissions: 99_999,
            last_bound_mbps: Some(12_345.6),
            forecast_mbps: Some(12_345.6),
        };
        let mut last = Default::default();
        let one = live_lines(
            Duration::from_secs(3),
            &[row(7, v4(1, 55110), v4(2, 5201))],
            &mut last,
        );
        assert_eq!(one[0], "-- 3 s: 1 flow sending data");
        assert_eq!(
            one[2].split_whitespace().collect::<Vec<_>>(),
            [
                "7",
                "192.168.100.1:55110",
                "→",
                "192.168.100.2:5201",
                "1000",
                "0.123",
                "99999",
                "12346",
                "→12346"
            ]
        );
        let many = live_lines(
            Duration::from_secs(4),
            &[
                row(7, v4(1, 55110), v4(2, 5201)),
                row(8, v4(255, 65535), v4(254, 65534)),
                row(9, v6(1, 443), v6(2, 65535)),
            ],
            &mut last,
        );
        // Flow 7 sent nothing since the view before: open, not sending.
        assert_eq!(many[0], "-- 4 s: 2 of 3 flows sending data");
        let both = [
            row(7, v4(1, 55110), v4(2, 5201)),
            row(7, v4(2, 5201), v4(1, 55110)),
        ];
        let both = live_lines(Duration::from_secs(5), &both, &mut last);
        assert_eq!(
            both[0], "-- 5 s: 1 flow sending data",
            "a row per direction"
        );
        assert_narrow(&many.join("\n"));
        assert!(
            many[3].ends_with("1000   0.123  99999    12346 →12346"),
            "{many:?}"
        );
    }

    #[test]
    fn a_flow_block_fits_in_100_columns_with_every_field_and_rtts_in_ms() {
        for f in [
            flow(0, v4(1, 55110), v4(2, 5201)),
            huge(flow(1_000_000, v4(255, 65535), v4(254, 65534))),
            huge(flow(2, v6(1, 443), v6(2, 65535))),
        ] {
            let lines = flow_block(&f);
            assert!(
                lines[0].starts_with(&format!("flow={} a=", f.id)),
                "{lines:?}"
            );
            assert!(lines[1..].iter().all(|l| l.starts_with("  ")), "{lines:?}");
            assert_narrow(&lines.join("\n"));
            // Joined, the fields of one line, each once.
            let fields: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
            for tag in ["ab", "ba"] {
                for k in ["packets", "retx", "ack_rtt.median_ms", "ts_rtt.median_ms"] {
                    let key = format!("{tag}.{k}=");
                    assert_eq!(
                        fields.iter().filter(|w| w.starts_with(&key)).count(),
                        1,
                        "{key}: {lines:?}"
                    );
                }
            }
            assert!(
                fields.contains(&"ab.ack_rtt.median_ms=12.345000"),
                "{lines:?}"
            );
            assert!(fields.contains(&"ab.ack_rtt.min_ms=0.012300"), "{lines:?}");
            assert!(
                fields.contains(&"ab.ack_rtt.max_ms=3044.000000"),
                "{lines:?}"
            );
        }
    }

    fn train(flow: u64, from: Endpoint, to: Endpoint) -> TrainReport {
        TrainReport {
            flow,
            from,
            to,
            flow_start_ns: 1_795_542_081_519_281_587,
            train: nowcast_core::wren::Train {
                start: 86_399.011_979,
                end: 86_399.014_879,
                packets: 100,
                bits: 1e6,
                isr_bps: 399_999.999e6,
                ack_rate_bps: None,
                acked: 100,
                rtts: Vec::new(),
                verdict: nowcast_core::wren::Verdict::AcksAtOneInstant,
            },
        }
    }

    #[test]
    fn trains_are_a_table_per_direction_within_100_columns() {
        let a = train(1_000_000, v6(1, 443), v6(2, 65535));
        let b = train(1_000_000, v6(2, 65535), v6(1, 443));
        let mut text = Vec::new();
        text.extend(train_lines(&a, None));
        text.extend(train_lines(&a, Some(&a)));
        text.extend(train_lines(&b, Some(&a)));
        let text = text.join("\n");
        assert_narrow(&text);
        assert_eq!(text.matches("start s    span ms").count(), 2, "{text}");
        assert_eq!(text.matches("\n\nflow 1000000 ").count(), 1, "{text}");
        assert!(
            text.contains("86399.011979      2.900      100    100  399999.999           -  acks_at_one_instant"),
            "{text}"
        );
        assert!(
            text.contains("first packet at 1795542081.519281587 s"),
            "{text}"
        );
    }

    #[test]
    fn a_capture_without_tcp_says_what_it_held_in_words() {
        let mut an = Analyzer::new(Config::default());
        assert_eq!(no_flows(&an), "no TCP flows: no packets were read");
        an.packets = 7;
        an.skips.not_tcp = 6;
        an.skips.udp = 5;
        an.skips.fragments = 1;
        assert_eq!(
            no_flows(&an),
            "no TCP flows in 7 packets (5 UDP, 1 other IP protocols, 1 IP fragment)"
        );
        assert_eq!(
            no_trains(&an, 7),
            "no Wren trains: no TCP flows in 7 packets (5 UDP, 1 other IP protocols, 1 IP fragment)"
        );
        an.packets = 1;
        an.skips = Skips {
            udp: 1,
            not_tcp: 1,
            ..Skips::default()
        };
        assert_eq!(no_flows(&an), "no TCP flows in 1 packet (1 UDP)");
    }

    #[test]
    fn wrapping_keeps_clauses_whole_and_breaks_long_ones_between_words() {
        let clauses: Vec<String> = ["a".repeat(60), "b".repeat(60), "c ".repeat(80)]
            .into_iter()
            .collect();
        let lines = wrap("  ", &clauses, "; ", 4);
        assert_eq!(lines[0], format!("  {};", "a".repeat(60)));
        // The third is too long for a line: it starts where the second ends.
        assert!(lines[1].starts_with(&format!("    {}; c c", "b".repeat(60))));
        assert!(lines[2..].iter().all(|l| l.starts_with("    c c")));
        assert!(lines
            .iter()
            .all(|l| columns(l) <= WIDTH && !l.ends_with(' ')));
    }
}
