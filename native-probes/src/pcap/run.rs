//! The loop of `nowcast pcap`: frames from the files or the live capture into the
//! [`Analyzer`], records into the [`RecordSink`] as they come, and the tables for people
//! (the summary by default, `--flows` one line per flow, `--trains` one line per Wren train,
//! `--samples` one line per RTT sample). Edge: it reads files, the clock and the interface,
//! and writes.

use super::analysis::{
    Analyzer, Config, DirectionReport, FlowReport, LiveRow, RttSample, Skips, TrainReport,
    TransferReport,
};
use super::read::{self, live::Live, Problem};
use super::samples::Summary;
use crate::output::{Experiment, Heading, RecordSink};
use crate::stop::Stop;
use anyhow::{anyhow, bail, Result};
use nowcast_core::record::{Metric, Record};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to print for people.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Show {
    pub flows: bool,
    pub trains: bool,
    pub samples: bool,
    /// Records only (NDJSON on standard output); the texts asked for go to standard error.
    pub json: bool,
}

/// Where frames come from.
pub enum Input {
    Files(Vec<PathBuf>),
    Live {
        iface: String,
        filter: Option<String>,
        duration: Option<Duration>,
        snaplen: i32,
    },
}

/// Packets with damaged headers named one by one before they are only counted.
const DAMAGED_SHOWN: u64 = 10;

/// The flows of the summary table, bounded like the flow table ([`Config::max_flows`]): past
/// that many, the ones with the fewest bytes are dropped and counted, so that a capture of a
/// million flows does not hold a million reports for a table nobody reads to its end.
struct Rows {
    /// Each with its place in the order flows finished, the table's order.
    kept: Vec<(u64, FlowReport)>,
    cap: usize,
    seen: u64,
    /// The table is printed; without it the flows finished are dropped as they come.
    wanted: bool,
}

impl Rows {
    fn new(cap: usize, wanted: bool) -> Self {
        Self {
            kept: Vec::new(),
            cap: cap.max(1),
            seen: 0,
            wanted,
        }
    }

    /// The flows `an` finished since the last call.
    fn take(&mut self, an: &mut Analyzer) {
        let flows = an.take_finished();
        if !self.wanted {
            return;
        }
        for f in flows {
            self.kept.push((self.seen, f));
            self.seen += 1;
        }
        // Trimmed an eighth past the cap, so that the selection is paid once per batch.
        if self.kept.len() > self.cap + self.cap / 8 {
            self.trim();
        }
    }

    /// Keeps the `cap` flows with the most bytes (the older flow on a tie, so that which
    /// rows are kept does not depend on when the trims happened).
    fn trim(&mut self) {
        if self.kept.len() > self.cap {
            let bytes = |f: &FlowReport| f.directions.iter().map(|d| d.frame_bytes).sum::<u64>();
            self.kept
                .select_nth_unstable_by(self.cap, |(i, a), (j, b)| {
                    bytes(b).cmp(&bytes(a)).then(i.cmp(j))
                });
            self.kept.truncate(self.cap);
        }
    }

    /// The rows in the order their flows finished, and how many flows were left out.
    fn finish(mut self) -> (Vec<FlowReport>, u64) {
        self.trim();
        self.kept.sort_unstable_by_key(|(i, _)| *i);
        let left_out = self.seen - self.kept.len() as u64;
        (self.kept.into_iter().map(|(_, f)| f).collect(), left_out)
    }
}

/// The end of the input: the flows still open are reported a batch at a time, each batch's
/// records and rows taken before the next (a full table's reports all at once would double
/// its memory), then the IEPM-BW transfers.
fn close_flows(
    an: &mut Analyzer,
    out: &mut Out<'_>,
    rows: &mut Rows,
) -> io::Result<Vec<TransferReport>> {
    while an.finish_open(4096) > 0 {
        out.drain(an)?;
        rows.take(an);
    }
    let transfers = an.finish();
    out.drain(an)?;
    rows.take(an);
    Ok(transfers)
}

/// What the full flow table left out, if it did.
fn evicted_note(an: &Analyzer, max_flows: usize) -> Option<String> {
    (an.evicted > 0).then(|| {
        format!(
            "the flow table was full ({max_flows} flows at once, --max-flows): {} flows were reported before they closed or went idle (the ones idle longest, to make room); a packet of one of them afterwards started a new flow",
            an.evicted
        )
    })
}

const METRICS: [Metric; 4] = [
    Metric::Throughput,
    Metric::Rtt,
    Metric::Loss,
    Metric::AvailBwLowerBound,
];

struct Out<'a> {
    sink: &'a mut dyn RecordSink,
    text: Box<dyn Write + 'a>,
    show: Show,
    batches: u64,
    problems: u64,
}

impl Out<'_> {
    fn records(&mut self, records: Vec<Record>) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let e = Experiment {
            index: self.batches,
            timestamp_ms: records[0].timestamp_ms,
            records: &records,
            next: vec![None; METRICS.len()],
            extra: Vec::new(),
            notes: Vec::new(),
        };
        self.batches += 1;
        self.sink.experiment(&e)
    }

    fn drain(&mut self, an: &mut Analyzer) -> io::Result<()> {
        let records = an.take_records();
        self.records(records)?;
        if self.show.flows {
            for f in an.take_finished() {
                writeln!(self.text, "{}", flow_line(&f))?;
            }
        }
        if self.show.trains {
            for t in an.take_trains() {
                writeln!(self.text, "{}", train_line(&t))?;
            }
        }
        if self.show.samples {
            for s in an.take_samples() {
                writeln!(self.text, "{}", sample_line(&s))?;
            }
        }
        Ok(())
    }
}

/// Runs the analysis of `input` with `cfg`, records to `sink`, text to standard output (or
/// standard error with `--json`), problems to standard error.
pub fn run(input: Input, cfg: Config, show: Show, sink: &mut dyn RecordSink) -> Result<()> {
    let live = matches!(input, Input::Live { .. });
    // The summary table is printed (and its flows kept) unless another text was asked for;
    // with --json, a file's summary is left out (the records carry it).
    let table = !show.flows && !show.trains && !show.samples && (live || !show.json);
    let max_flows = cfg.max_flows.max(1);
    let mut rows = Rows::new(max_flows, table);
    let cfg = Config {
        keep_trains: show.trains,
        keep_samples: show.samples,
        ..cfg
    };
    let mut an = Analyzer::new(cfg);
    let text: Box<dyn Write> = if show.json {
        Box::new(io::stderr())
    } else {
        Box::new(io::BufWriter::new(io::stdout()))
    };
    let mut out = Out {
        sink,
        text,
        show,
        batches: 0,
        problems: 0,
    };
    let title = match &input {
        Input::Files(p) => format!(
            "nowcast pcap {}",
            p.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Input::Live { iface, .. } => format!("nowcast pcap --live {iface}"),
    };
    out.sink.begin(&Heading {
        title: title.clone(),
        metrics: METRICS.to_vec(),
        extra: Vec::new(),
    })?;
    let mut headline = Vec::new();
    // Why the run fails after its output, if it does.
    let mut failure: Option<String> = None;
    match input {
        Input::Files(paths) => {
            // Inputs that could not be read (or not to their end): named as they come, the
            // others analysed all the same, and the run fails at the end.
            let mut unread: Vec<String> = Vec::new();
            for path in &paths {
                let name = path.display().to_string();
                // `-`: standard input (`zcat trace.pcap.gz | nowcast pcap -`, `tcpdump -w -`).
                let opened: io::Result<Box<dyn Read>> = if name == "-" {
                    Ok(Box::new(io::stdin().lock()))
                } else {
                    File::open(path).map(|f| Box::new(f) as Box<dyn Read>)
                };
                let f = match opened {
                    Ok(f) => f,
                    Err(e) => {
                        eprintln!("nowcast pcap: {name}: open: {e}; not read");
                        headline.push(format!("{name}: not read (open: {e})"));
                        unread.push(name);
                        continue;
                    }
                };
                let mut err: Option<io::Error> = None;
                let mut problems = 0u64;
                let mut damaged = 0u64;
                let mut last_packet = 0u64;
                let result = read::read_capture(
                    f,
                    |fr| {
                        last_packet = fr.number;
                        if let Err(skip) =
                            an.frame(fr.number, fr.link, fr.data, fr.orig_len, fr.ts_ns)
                        {
                            // Headers cut short or malformed: the first few by number, then
                            // a count (a capture with a tiny snap length has one per packet).
                            if skip.is_problem() {
                                damaged += 1;
                                if damaged <= DAMAGED_SHOWN {
                                    eprintln!("nowcast pcap: {name}: packet {}: {skip}", fr.number);
                                }
                            }
                        }
                        if an.tcp_packets % 4096 == 0 {
                            if let Err(e) = out.drain(&mut an) {
                                err.get_or_insert(e);
                            }
                            rows.take(&mut an);
                        }
                    },
                    |p: Problem| {
                        problems += 1;
                        eprintln!("nowcast pcap: {name}: {p}");
                    },
                );
                if damaged > DAMAGED_SHOWN {
                    eprintln!(
                        "nowcast pcap: {name}: {} more packets with damaged or cut headers",
                        damaged - DAMAGED_SHOWN
                    );
                }
                out.problems += problems + damaged;
                if let Some(e) = err {
                    return Err(e.into());
                }
                let (format, stats) = match result {
                    Ok(r) => r,
                    Err(e) => {
                        // Not a capture, or a read that failed part way (the packets before
                        // it are analysed).
                        let what = if last_packet > 0 {
                            format!("read failed after packet {last_packet}: {e}; the packets before it are analysed")
                        } else {
                            format!("{e}; not read")
                        };
                        eprintln!("nowcast pcap: {name}: {what}");
                        headline.push(format!("{name}: {what}"));
                        unread.push(name);
                        continue;
                    }
                };
                headline.push(format!(
                    "{name}: {}, {}, {format}{}",
                    crate::format::count(stats.packets, "packet"),
                    crate::format::count(stats.bytes, "byte"),
                    if stats.problems > 0 {
                        format!(
                            ", {} (above)",
                            crate::format::count(stats.problems, "problem")
                        )
                    } else {
                        String::new()
                    }
                ));
            }
            if unread.len() == paths.len() {
                bail!("{}", unread_error(&unread, paths.len()));
            }
            let transfers = close_flows(&mut an, &mut out, &mut rows)?;
            if show.flows {
                transfers_table(&mut out.text, &transfers)?;
            }
            if table {
                let s = (title.as_str(), &headline[..], &transfers[..]);
                summary_of(&mut out.text, s, &an, rows, max_flows)?;
            } else if let Some(n) = evicted_note(&an, max_flows) {
                eprintln!("nowcast pcap: {n}");
            }
            if !unread.is_empty() {
                failure = Some(unread_error(&unread, paths.len()));
            }
        }
        Input::Live {
            iface,
            filter,
            duration,
            snaplen,
        } => {
            let stop = Stop::on_signals().map_err(|e| anyhow!("signal handlers: {e}"))?;
            let mut cap = Live::open(&iface, filter.as_deref(), snaplen).map_err(|e| anyhow!(e))?;
            let started = Instant::now();
            let cpu0 = cpu_seconds();
            let mut next_tick = started + Duration::from_secs(1);
            let mut last_bytes: std::collections::HashMap<(u64, String), u64> = Default::default();
            while !stop.is_set() && duration.is_none_or(|d| started.elapsed() < d) {
                if let Some(fr) = cap.next_frame().map_err(|e| anyhow!(e))? {
                    let _ = an.frame(fr.number, fr.link, fr.data, fr.orig_len, fr.ts_ns);
                }
                if Instant::now() >= next_tick {
                    next_tick += Duration::from_secs(1);
                    out.drain(&mut an)?;
                    rows.take(&mut an);
                    if !show.json && !show.flows && !show.trains && !show.samples {
                        live_table(
                            &mut out.text,
                            started.elapsed(),
                            &an.live_rows(),
                            &mut last_bytes,
                        )?;
                    }
                }
            }
            let transfers = close_flows(&mut an, &mut out, &mut rows)?;
            let st = cap.stats();
            let cpu = cpu_seconds() - cpu0;
            let wall = started.elapsed().as_secs_f64();
            headline.push(format!(
                "{iface}: libpcap received {}, dropped {} (buffer full), {} by the interface; analyser CPU {:.2} s over {:.1} s ({:.0} %)",
                st.received,
                st.dropped,
                st.if_dropped,
                cpu,
                wall,
                100.0 * cpu / wall.max(1e-9)
            ));
            if table {
                let s = (title.as_str(), &headline[..], &transfers[..]);
                summary_of(&mut out.text, s, &an, rows, max_flows)?;
            } else {
                for h in &headline {
                    writeln!(out.text, "{h}")?;
                }
                if let Some(n) = evicted_note(&an, max_flows) {
                    eprintln!("nowcast pcap: {n}");
                }
            }
        }
    }
    out.text.flush()?;
    out.sink.finish(&[])?;
    match failure {
        Some(f) => bail!("{f}"),
        None => Ok(()),
    }
}

/// The error of a run that left inputs unread (each was named with its reason as it came).
fn unread_error(unread: &[String], inputs: usize) -> String {
    format!(
        "{} of {inputs} input files not read (named above): {}",
        unread.len(),
        unread.join(", ")
    )
}

/// The summary of the flows kept for the table (`texts`: the title, the headline and the
/// transfers), with what was left out.
fn summary_of(
    o: &mut dyn Write,
    texts: (&str, &[String], &[TransferReport]),
    an: &Analyzer,
    rows: Rows,
    max_flows: usize,
) -> io::Result<()> {
    let (title, headline, transfers) = texts;
    let (flows, left_out) = rows.finish();
    let total = Totals {
        flows: flows.len() as u64 + left_out,
        left_out,
        max_flows,
        evicted: evicted_note(an, max_flows),
    };
    summary(o, title, headline, an, &flows, &total, transfers)
}

/// The flows of a summary beyond its rows.
struct Totals {
    /// Flows reported.
    flows: u64,
    /// Flows left out of the table ([`Rows`]).
    left_out: u64,
    max_flows: usize,
    /// What the full flow table left out ([`evicted_note`]).
    evicted: Option<String>,
}

/// CPU time (user + system) of this process so far, seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given and reads nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn ms(s: f64) -> String {
    crate::output::number(s * 1e3)
}

fn quantiles(q: &Option<Summary>) -> String {
    match q {
        None => "-".into(),
        Some(q) => format!(
            "{}/{}/{}/{} ({})",
            ms(q.min),
            ms(q.median),
            ms(q.p90),
            ms(q.max),
            q.n
        ),
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(crate::output::number).unwrap_or_else(|| "-".into())
}

fn skips_line(s: &Skips) -> String {
    let mut parts = Vec::new();
    for (n, what) in [
        (s.not_ip, "not IP"),
        (s.not_tcp, "not TCP"),
        (s.fragments, "IP fragments"),
        (s.unknown_link, "unknown link type"),
        (s.truncated, "headers cut by the snap length"),
        (s.malformed, "malformed headers"),
        (
            s.clock_steps,
            "RTT samples across a step of the capture's clock",
        ),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn wren_cell(d: &DirectionReport) -> String {
    match (&d.wren, d.wren_off) {
        (Some(w), _) => format!(
            "{} →{} ({} of {} trains)",
            opt(w.last_bound_mbps),
            opt(w.forecast.as_ref().map(|f| f.value)),
            w.lower_bounds,
            w.trains
        ),
        (None, Some(why)) => format!("- ({why})"),
        (None, None) => "-".into(),
    }
}

fn summary(
    o: &mut dyn Write,
    title: &str,
    headline: &[String],
    an: &Analyzer,
    flows: &[FlowReport],
    total: &Totals,
    transfers: &[TransferReport],
) -> io::Result<()> {
    writeln!(o, "{title}")?;
    for h in headline {
        writeln!(o, "{h}")?;
    }
    writeln!(
        o,
        "{} frames, {} TCP segments in {} flows; skipped: {}",
        an.packets,
        an.tcp_packets,
        total.flows,
        skips_line(&an.skips)
    )?;
    if let Some(n) = &total.evicted {
        writeln!(o, "Note: {n}")?;
    }
    if total.left_out > 0 {
        writeln!(
            o,
            "Note: {} of {} flows are not in the table, which holds the {} with the most bytes (--max-flows); --flows or --json give every flow",
            total.left_out, total.flows, total.max_flows
        )?;
    }
    writeln!(o)?;
    writeln!(
        o,
        "{:<4} {:<46} {:>8} {:>12} {:>8} {:>9} {:>6} {:>5}  {:<34} {:<22} avail bw lower bound Mbit/s (last →next)",
        "flow", "from → to", "packets", "bytes", "time s", "Mbit/s", "retx", "ooo", "RTT data→ACK ms min/med/p90/max (n)", "RTT timestamps ms med"
    )?;
    for f in flows {
        for d in &f.directions {
            if d.packets == 0 {
                continue;
            }
            writeln!(
                o,
                "{:<4} {:<46} {:>8} {:>12} {:>8.3} {:>9} {:>6} {:>5}  {:<34} {:<22} {}",
                f.id,
                format!("{} → {}", d.from, d.to),
                d.packets,
                d.frame_bytes,
                d.duration_s(),
                opt(d.throughput_mbps),
                d.retransmissions,
                d.out_of_order,
                quantiles(&d.ack_rtt),
                d.ts_rtt.map(|q| ms(q.median)).unwrap_or_else(|| "-".into()),
                wren_cell(d)
            )?;
        }
    }
    let mut notes = Vec::new();
    for f in flows {
        for d in &f.directions {
            if let Some(w) = &d.wren {
                let (s, v) = (w.skipped, w.verdicts);
                if w.trains + s.super_segments + s.retransmissions + s.zero_gaps + s.given_up == 0 {
                    continue;
                }
                notes.push(format!(
                    "flow {} {} → {}: Wren: {} trains, {} lower bounds; no bound from {} increasing (ISR above the available bandwidth), {} whose ACK rate differs from the ISR, {} with fewer than two explicit ACKs (delayed or stretch ACKs), {} with their ACKs at one instant, {} never acknowledged; packets left out of trains: {} TSO/GSO super-segments (not single packets on the wire), {} retransmissions (their ACKs are ambiguous), {} at the same instant as the one before; {} trains dropped waiting for ACKs",
                    f.id, d.from, d.to, w.trains, w.lower_bounds, v.increasing, v.rates_differ,
                    v.too_few_acks, v.acks_at_one_instant, v.unacknowledged, s.super_segments,
                    s.retransmissions, s.zero_gaps, s.given_up
                ));
            }
        }
    }
    if !notes.is_empty() {
        writeln!(o)?;
        for n in notes {
            writeln!(o, "{n}")?;
        }
    }
    transfers_table(o, transfers)
}

fn transfers_table(o: &mut dyn Write, transfers: &[TransferReport]) -> io::Result<()> {
    if transfers.is_empty() {
        return Ok(());
    }
    writeln!(o)?;
    writeln!(
        o,
        "IEPM-BW transfers (flows between two hosts starting within 5 s), Mbit/s: method 1 Σ bytes/time, 2 bytes / mean time, 3 bytes / max time"
    )?;
    for t in transfers {
        writeln!(
            o,
            "{} → {}: {} streams, {} bytes: {} / {} / {}",
            t.from,
            t.to,
            t.streams,
            t.bytes,
            crate::output::number(t.mbps[0]),
            crate::output::number(t.mbps[1]),
            crate::output::number(t.mbps[2])
        )?;
    }
    Ok(())
}

fn live_table(
    o: &mut dyn Write,
    elapsed: Duration,
    rows: &[LiveRow],
    last: &mut std::collections::HashMap<(u64, String), u64>,
) -> io::Result<()> {
    writeln!(
        o,
        "-- {:.0} s: {} flows sending data",
        elapsed.as_secs_f64(),
        rows.len()
    )?;
    for r in rows {
        let key = (r.id, r.from.to_string());
        let before = last.insert(key, r.new_bytes).unwrap_or(0);
        let rate = (r.new_bytes - before.min(r.new_bytes)) as f64 * 8.0 / 1e6;
        writeln!(
            o,
            "{:<4} {:<46} {:>9} Mbit/s  rtt {:>8} ms  ts {:>8} ms  retx {:>5}  avail ≥ {} →{}",
            r.id,
            format!("{} → {}", r.from, r.to),
            crate::output::number(rate),
            r.ack_rtt_median_s.map(ms).unwrap_or_else(|| "-".into()),
            r.ts_rtt_median_s.map(ms).unwrap_or_else(|| "-".into()),
            r.retransmissions,
            opt(r.last_bound_mbps),
            opt(r.forecast_mbps)
        )?;
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

/// One line per flow: `key=value` pairs, both directions.
pub fn flow_line(f: &FlowReport) -> String {
    let mut s = format!(
        "flow={} a={} b={} start={} end={} handshake={} closed={} evicted={}",
        f.id,
        f.a,
        f.b,
        seconds(f.start_ns),
        seconds(f.last_ns),
        f.handshake,
        f.closed,
        f.evicted
    );
    for (tag, d) in ["ab", "ba"].iter().zip(&f.directions) {
        let q = |v: &Option<Summary>, w: fn(&Summary) -> f64| {
            v.as_ref()
                .map(|x| format!("{:.9}", w(x)))
                .unwrap_or_else(|| "-".into())
        };
        s.push_str(&format!(
            " {tag}.packets={} {tag}.bytes={} {tag}.payload={} {tag}.new={} {tag}.duration={:.9} {tag}.mbps={} {tag}.retx={} {tag}.fast={} {tag}.spurious={} {tag}.ooo={} {tag}.loss={} {tag}.ack_rtt.n={} {tag}.ack_rtt.min={} {tag}.ack_rtt.median={} {tag}.ack_rtt.p90={} {tag}.ack_rtt.max={} {tag}.ts_rtt.n={} {tag}.ts_rtt.median={} {tag}.super={} {tag}.bounds={} {tag}.last_bound={} {tag}.next_bound={}",
            d.packets,
            d.frame_bytes,
            d.payload_bytes,
            d.new_bytes,
            d.duration_s(),
            d.throughput_mbps.map(|v| format!("{v:.6}")).unwrap_or_else(|| "-".into()),
            d.retransmissions,
            d.fast_retransmissions,
            d.spurious_retransmissions,
            d.out_of_order,
            d.loss.map(|v| format!("{v:.6}")).unwrap_or_else(|| "-".into()),
            d.ack_rtt.map_or(0, |x| x.n),
            q(&d.ack_rtt, |x| x.min),
            q(&d.ack_rtt, |x| x.median),
            q(&d.ack_rtt, |x| x.p90),
            q(&d.ack_rtt, |x| x.max),
            d.ts_rtt.map_or(0, |x| x.n),
            q(&d.ts_rtt, |x| x.median),
            d.super_segments,
            d.wren.as_ref().map_or(0, |w| w.lower_bounds),
            d.wren.as_ref().and_then(|w| w.last_bound_mbps).map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into()),
            d.wren.as_ref().and_then(|w| w.forecast.as_ref()).map(|f| format!("{:.3}", f.value)).unwrap_or_else(|| "-".into()),
        ));
    }
    s
}

/// One line per Wren train.
pub fn train_line(t: &TrainReport) -> String {
    let tr = &t.train;
    let abs = |rel: f64| t.flow_start_ns as f64 * 1e-9 + rel;
    format!(
        "train flow={} from={} to={} start={:.6} end={:.6} packets={} acked={} isr_mbps={:.3} ack_mbps={} verdict={}",
        t.flow,
        t.from,
        t.to,
        abs(tr.start),
        abs(tr.end),
        tr.packets,
        tr.acked,
        tr.isr_bps / 1e6,
        tr.ack_rate_bps.map(|r| format!("{:.3}", r / 1e6)).unwrap_or_else(|| "-".into()),
        serde_json::to_value(tr.verdict).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
    )
}

/// One line per RTT sample: the packet that completed it, the method, seconds.
pub fn sample_line(s: &RttSample) -> String {
    format!(
        "sample packet={} method={} rtt={:.9}",
        s.packet,
        if s.timestamps { "ts" } else { "ack" },
        s.rtt_s
    )
}
