//! The loop of `nowcast pcap`: frames from the files or the live capture into the
//! [`Analyzer`], records into the [`RecordSink`] as they come, and the tables for people
//! (the summary by default, `--flows` one line per flow, `--trains` one line per Wren train,
//! `--samples` one line per RTT sample). Edge: it reads files, the clock and the interface,
//! and writes.

use super::analysis::TrainReport;
use super::analysis::{Analyzer, Config, FlowReport, TransferReport};
use super::read::{self, live::Live, Problem};
use super::tables::{
    flow_block, live_table, no_flows, no_trains, sample_line, summary, train_lines,
    transfers_table, Totals,
};
use crate::output::{Experiment, Heading, RecordSink};
use crate::stop::Stop;
use anyhow::{anyhow, bail, Result};
use nowcast_core::record::{Metric, Record};
use std::io::{self, Write};
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
    /// Most flows in the summary table ([`DEFAULT_ROWS`]): the ones with the most bytes.
    pub rows: usize,
}

/// The summary table's rows by default: a screenful or two of the flows with the most bytes.
/// A capture of a busy server or a SYN flood has thousands (a table of 100,000 rows is read
/// by nobody); `--flows` and `--json` give every flow.
pub const DEFAULT_ROWS: usize = 50;

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

/// The flows of the summary table, at most [`Show::rows`]: past that many, the ones with the
/// fewest bytes are dropped and counted, so that a capture of a million flows does not hold a
/// million reports for a table nobody reads to its end.
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
            "the flow table was full ({max_flows} flows at once, --max-flows): {} reported before {} closed or went idle, to make room (the ones idle longest); a later packet of {} starts a new flow",
            crate::format::count(an.evicted, "flow"),
            if an.evicted == 1 { "it" } else { "they" },
            if an.evicted == 1 { "it" } else { "one of them" }
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
    /// What `--flows`, `--samples` and `--trains` printed, to say so when it was nothing.
    flows_shown: u64,
    samples_shown: u64,
    /// The last train printed (its direction heads the rows after it).
    last_train: Option<TrainReport>,
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
                self.flows_shown += 1;
                for l in flow_block(&f) {
                    writeln!(self.text, "{l}")?;
                }
            }
        }
        if self.show.trains {
            for t in an.take_trains() {
                for l in train_lines(&t, self.last_train.as_ref()) {
                    writeln!(self.text, "{l}")?;
                }
                self.last_train = Some(t);
            }
        }
        if self.show.samples {
            for s in an.take_samples() {
                self.samples_shown += 1;
                writeln!(self.text, "{}", sample_line(&s))?;
            }
        }
        Ok(())
    }

    /// After the last flow: each text asked for that printed nothing says so, and why that
    /// can be.
    fn say_none(&mut self, an: &Analyzer, min_train: usize) -> io::Result<()> {
        if self.show.flows && self.flows_shown == 0 {
            writeln!(self.text, "{}", no_flows(an))?;
        }
        if self.show.samples && self.samples_shown == 0 {
            let why = if an.tcp_packets == 0 {
                no_flows(an)
            } else {
                format!(
                    "none in {}: data→ACK needs a data segment and the ACK that ends it (not \
                     sent twice, Karn's rule), timestamps a TSval and its echo, both captured",
                    crate::format::count(an.tcp_packets, "TCP segment")
                )
            };
            writeln!(self.text, "no RTT samples: {why}")?;
        }
        if self.show.trains && self.last_train.is_none() {
            writeln!(self.text, "{}", no_trains(an, min_train))?;
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
    let min_train = cfg.wren.min_train;
    let mut rows = Rows::new(show.rows, table);
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
        flows_shown: 0,
        samples_shown: 0,
        last_train: None,
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
            // Files that gave packets so far: a step back at the next one's first packet is
            // files out of order, overlapping, or given twice.
            let mut files_read = 0u64;
            for path in &paths {
                let name = path.display().to_string();
                // `-`: standard input (`zcat trace.pcap.gz | nowcast pcap -`, `tcpdump -w -`).
                let f = match crate::input::open(path) {
                    Ok(f) => f,
                    Err(e) => {
                        crate::warn_line!("nowcast pcap: {name}: open: {e}; not read");
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
                                    crate::warn_line!(
                                        "nowcast pcap: {name}: packet {}: {skip}",
                                        fr.number
                                    );
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
                        crate::warn_line!("nowcast pcap: {name}: {p}");
                    },
                );
                let steps = clock_steps(&mut an, files_read > 0);
                for line in &steps {
                    crate::warn_line!("nowcast pcap: {name}: {line}");
                }
                let clock = steps.len() as u64;
                problems += clock;
                if damaged > DAMAGED_SHOWN {
                    crate::warn_line!(
                        "nowcast pcap: {name}: {} more with damaged or cut headers",
                        crate::format::count(damaged - DAMAGED_SHOWN, "packet")
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
                        crate::warn_line!("nowcast pcap: {name}: {what}");
                        headline.push(format!("{name}: {what}"));
                        unread.push(name);
                        continue;
                    }
                };
                if stats.packets == 0 && stats.problems > 0 {
                    // A capture's header and nothing after it that reads as a packet: not
                    // a capture with no traffic, a file that could not be read.
                    let what = format!(
                        "{format}, but no packet could be read ({} above); not read",
                        crate::format::count(stats.problems, "problem")
                    );
                    crate::warn_line!("nowcast pcap: {name}: {what}");
                    headline.push(format!("{name}: {what}"));
                    unread.push(name);
                    continue;
                }
                files_read += 1;
                headline.push(format!(
                    "{name}: {}, {}, {format}{}",
                    crate::format::count(stats.packets, "packet"),
                    crate::format::count(stats.bytes, "byte"),
                    if stats.problems + clock > 0 {
                        format!(
                            ", {} (above)",
                            crate::format::count(stats.problems + clock, "problem")
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
            out.say_none(&an, min_train)?;
            if show.flows {
                transfers_table(&mut out.text, &transfers)?;
            }
            if table {
                let s = (title.as_str(), &headline[..], &transfers[..]);
                summary_of(&mut out.text, s, &an, rows, max_flows)?;
            } else if let Some(n) = evicted_note(&an, max_flows) {
                crate::warn_line!("nowcast pcap: {n}");
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
                    for line in clock_steps(&mut an, false) {
                        crate::warn_line!("nowcast pcap: {iface}: {line}");
                    }
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
            out.say_none(&an, min_train)?;
            let st = cap.stats();
            let cpu = cpu_seconds() - cpu0;
            let wall = started.elapsed().as_secs_f64();
            headline.push(format!(
                "{iface}: libpcap received {}, dropped {} (buffer full), {} by the interface",
                st.received, st.dropped, st.if_dropped,
            ));
            headline.push(format!(
                "analyser CPU {:.2} s over {:.1} s ({:.0} %)",
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
                    crate::warn_line!("nowcast pcap: {n}");
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

/// A line for each step back of the capture's clock since the last call ([`super::timeline`]);
/// `after_a_file`: the input follows another file read as the same capture.
fn clock_steps(an: &mut Analyzer, after_a_file: bool) -> Vec<String> {
    let (steps, more) = an.timeline.take_steps();
    let mut lines: Vec<String> = steps
        .iter()
        .map(|s| {
            let back = crate::format::significant(s.back_ns as f64 / 1e9);
            if s.packet == 1 && after_a_file {
                format!("its first packet is {back} s before the end of the file before it (files out of order, overlapping, or given twice?); the files are one capture in the order given, and its times are read on from there")
            } else {
                format!("packet {}: the capture's clock goes back {back} s (stepped?); the times from it on are read on from the packet before", s.packet)
            }
        })
        .collect();
    if more > 0 {
        lines.push(format!(
            "{} more where the clock goes back",
            crate::format::count(more, "packet")
        ));
    }
    lines
}

/// The error of a run that left inputs unread (each was named with its reason as it came).
fn unread_error(unread: &[String], inputs: usize) -> String {
    format!(
        "{} of {} not read (named above): {}",
        unread.len(),
        crate::format::count(inputs as u64, "input file"),
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
    let cap = rows.cap;
    let (flows, left_out) = rows.finish();
    let total = Totals {
        flows: flows.len() as u64 + left_out,
        left_out,
        rows: cap,
        evicted: evicted_note(an, max_flows),
    };
    summary(o, title, headline, an, &flows, &total, transfers)
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
