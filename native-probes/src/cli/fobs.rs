//! `nowcast fobs send FILE HOST[:PORT]` and `nowcast fobs recv`: flags into the FOBS cores'
//! configuration, progress and records out. Wiring only; the protocol is `nowcast::fobs`.

use super::classify::load_model;
use anyhow::{anyhow, bail, Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use indicatif::{ProgressBar, ProgressStyle};
use nowcast::classify::model::{SIGNATURE_PACKETS_MAX, SIGNATURE_PACKETS_MIN};
use nowcast::classify::signature::{Label, Labelled};
use nowcast::classify::{Classifier, Diagnosis};
use nowcast::clock::wall_ms;
use nowcast::fobs::congestion::{Controller, Fixed, HighSpeed, LossCount};
use nowcast::fobs::io::{self, RecvOptions, RecvUpdate, SendUpdate};
use nowcast::fobs::memory::{Basis, PathMemory, Transfer};
use nowcast::fobs::record;
use nowcast::fobs::sender::{self, Event, Sender};
use nowcast::fobs::wire::{self, Done, Hello, DEFAULT_PORT, TOKEN_LEN};
use nowcast::format::{self, count};
use nowcast::net::{self, parse_size, resolve};
use nowcast::net::{parse_ms, parse_seconds};
use nowcast::stop::Stop;
use nowcast_core::record::{Probe, Transport};
use std::io::{IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Send FILE to a `nowcast fobs recv` at HOST[:PORT].
    Send(SendArgs),
    /// Receive transfers into a directory.
    Recv(RecvArgs),
}

#[derive(clap::Args)]
#[command(
    after_help = "Rates are bits per second with an optional K, M or G (decimal): 500M, 1G. \
    Records with --json (source \"nowcast fobs\"): one `loss` record per congestion event with \
    the classifier's reading (congestion.*), then `throughput` (goodput, Mbit/s) and `loss` \
    (packets lost / sent); of a transfer that did not finish, both with status error and why. \
    The receiver has 5 s to answer the offer; exit status 2 when HOST:PORT is not a FOBS \
    receiver."
)]
pub struct SendArgs {
    /// The file to send (a regular file; the receiver stores it under its name, or --name).
    file: PathBuf,
    /// The receiver, HOST or HOST:PORT ([v6]:PORT).
    target: String,
    /// The receiver's token (printed by `nowcast fobs recv`).
    #[arg(long)]
    token: String,
    /// Name to store the file under (default: FILE's name).
    #[arg(long)]
    name: Option<String>,
    /// Payload bytes per packet (64–65000).
    #[arg(long, default_value_t = 1400, value_parser = clap::value_parser!(u16).range(64..=65_000))]
    packet: u16,
    /// Most packets per transmission window, 64–65536 (a window also closes after a round trip).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(64..=65_536))]
    window: u32,
    /// The rate to start at: auto is half the rate this path delivered in its transfers of
    /// the last hour (forecast from them; see --path-memory), or 20M on a path with none.
    #[arg(long, default_value = "auto")]
    rate: String,
    /// The highest rate.
    #[arg(long, default_value = MAX_RATE)]
    max_rate: String,
    /// Treat all loss as network loss (the comparison run).
    #[arg(long)]
    no_classifier: bool,
    /// How loss enters the long-term loss rate: events (a window's losses once, TFRC's
    /// loss-event rate, as TCP answers them), packets (every lost packet, over TFRC's last
    /// eight loss intervals; loses its share to a TCP flow on a shared drop-tail link), or
    /// transfer (the packets lost over those sent since the transfer began: the long-term
    /// loss rate of the FOBS paper's evaluation, §4.1; it never forgets a congested spell).
    #[arg(long, default_value = "events", value_parser = PossibleValuesParser::new(LossCount::ALL.iter().map(|c| c.name()))
        .map(|s| s.parse::<LossCount>().expect("one of the possible values")))]
    loss_rate: LossCount,
    /// Send at this constant rate, with no congestion control (experiments only: signature
    /// collection and the classifier's overhead).
    #[arg(long, value_name = "RATE")]
    fixed_rate: Option<String>,
    /// Classifier model file (default: the shipped model).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// Continue an interrupted transfer of the same file.
    #[arg(long)]
    resume: bool,
    /// NDJSON records on standard output instead of the summary.
    #[arg(long)]
    json: bool,
    /// Append the signatures that had loss to FILE (for training): consecutive blocks of
    /// --signature-packets acknowledged packets.
    #[arg(long, value_name = "FILE")]
    signatures: Option<PathBuf>,
    /// Packets in each signature written with --signatures (default: the length the
    /// classifier's model was trained on, which is also how many packets it classifies).
    #[arg(long, value_name = "N")]
    signature_packets: Option<usize>,
    /// The label written with --signatures.
    #[arg(long, value_parser = ["cpu", "network", "?"], default_value = "?")]
    label: String,
    /// The file of recent delivery rates per receiver that --rate auto starts from (default:
    /// $XDG_STATE_HOME/nowcast/fobs-paths.json, or ~/.local/state/nowcast/fobs-paths.json).
    #[arg(long, value_name = "FILE")]
    path_memory: Option<PathBuf>,
    /// Neither read nor add to the path memory (a cold start at 20M unless --rate says).
    #[arg(long, conflicts_with = "path_memory")]
    no_path_memory: bool,
    /// No progress display.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "Prints its token at start; a sender must present it. One transfer at a \
    time; see SECURITY.md (\"FOBS receiver\") for what a receiver on a public address accepts."
)]
pub struct RecvArgs {
    /// Directory to store files in.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Address to listen on, IP or IP:PORT (TCP control and UDP data on the same port).
    #[arg(long, default_value = "0.0.0.0")]
    listen: String,
    /// Port to listen on, when --listen names none [default: 8070].
    #[arg(long)]
    port: Option<u16>,
    /// The token senders must present, 32 hex digits (default: a random one, printed).
    #[arg(long)]
    token: Option<String>,
    /// Largest file accepted (KiB, or with B/K/M/G).
    #[arg(long, default_value = "16G")]
    max_size: String,
    /// Highest data rate accepted (datagrams beyond it are dropped).
    #[arg(long, default_value = "10G")]
    max_rate: String,
    /// Milliseconds to wait after a window's end before acknowledging it (or with a unit:
    /// 250ms, 1s, as every duration here).
    #[arg(long, value_parser = parse_ms, default_value_t = 2.0)]
    grace_ms: f64,
    /// Seconds without a valid datagram or message before a transfer is abandoned.
    #[arg(long, value_parser = parse_seconds, default_value_t = 30.0)]
    idle: f64,
    /// SO_RCVBUF of the data socket (KiB, or with B/K/M/G, as every size here; a small one
    /// makes CPU-like loss).
    #[arg(long, value_parser = parse_size)]
    rcvbuf: Option<u64>,
    /// Exit after one transfer.
    #[arg(long)]
    once: bool,
    /// Check each file's hash, then delete it rather than keep it (a receiver for measuring
    /// transfers, e.g. a campaign's `fobs` probes, whose disk must not fill).
    #[arg(long)]
    discard: bool,
    /// Connections accepted per client network per minute.
    #[arg(long, default_value_t = 30.0)]
    per_client_per_minute: f64,
    /// How long an unfinished transfer is kept for `--resume` after it was last written
    /// (e.g. 12h, 7d; a bare number is seconds): older part files are deleted, at the start
    /// and every 10 minutes, so that senders that never come back do not fill the disk.
    #[arg(long, value_parser = parse_seconds, default_value = "7d")]
    keep_unfinished: f64,
    /// Print nothing but the listening line and errors.
    #[arg(long, short)]
    quiet: bool,
}

/// The rate `flag` gives, bytes/s (at least [`wire::MIN_RATE`]): a bad one is a usage error
/// naming the flag.
fn parse_rate(flag: &str, s: &str) -> Result<f64> {
    wire::parse_rate(s).map_err(|e| usage_err!("{flag}: {e}"))
}

fn parse_token(s: &str) -> Result<[u8; TOKEN_LEN]> {
    wire::parse_token(s).map_err(|e| usage_err!("--token: {e}"))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The progress line's style: the bar takes what `cols` leaves beside `msg` (indicatif's
/// `wide_bar` measured 80 columns whatever the terminal, so a narrow pane wrapped the line
/// and each redraw left a stale one behind).
fn bar_style(cols: usize, msg: &str) -> ProgressStyle {
    let width = cols.saturating_sub(msg.chars().count() + 7).max(4);
    ProgressStyle::with_template(&format!("{{percent:>3}}% {{bar:{width}}} {{msg}}"))
        .expect("template")
}

/// `--max-rate`'s default.
const MAX_RATE: &str = "10G";

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Sub::Send(a) => send(a),
        Sub::Recv(a) => recv(a),
    }
}

fn send(a: SendArgs) -> Result<()> {
    // A target that names no receiver (a bad port, a name that does not resolve) exits 2,
    // as `nowcast tcp`'s and `udp`'s do, and as one that does not speak FOBS.
    let target = resolve(&a.target, DEFAULT_PORT).map_err(super::CouldNotRun)?;
    // Not blocking on a FIFO: only a regular file has a size to offer and a hash to send.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&a.file)
        .with_context(|| format!("{}", a.file.display()))?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        bail!(
            "{}: is a directory; FOBS sends one file (an archive of the directory, say)",
            a.file.display()
        );
    }
    if !meta.is_file() {
        bail!(
            "{}: is not a regular file (a pipe or a device has no size to offer); FOBS sends \
             a file",
            a.file.display()
        );
    }
    let size = meta.len();
    let modified = meta.modified().ok();
    let name = match &a.name {
        Some(n) => n.clone(),
        None => a
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| anyhow!("{}: no file name; give --name", a.file.display()))?
            .to_string(),
    };
    if !(64..=65_000).contains(&a.packet) || !(64..=65_536).contains(&a.window) {
        usage!("--packet must be 64–65000 bytes and --window 64–65536 packets");
    }
    if let Some(why) = wire::name_problem(&name) {
        bail!(
            "{}: a receiver would refuse the name {name:?}: {why}; give another with --name",
            a.file.display()
        );
    }
    if !a.quiet && !a.json && std::io::stderr().is_terminal() && size >= 1 << 30 {
        // Hashing a large file takes seconds before anything is sent.
        nowcast::warn_line!(
            "hashing {} ({:.1} GiB)…",
            a.file.display(),
            size as f64 / f64::from(1u32 << 30)
        );
    }
    let hash = io::hash_file(&a.file).with_context(|| format!("{}: read", a.file.display()))?;
    let hello = Hello {
        token: parse_token(&a.token)?,
        size,
        packet: a.packet,
        window: a.window,
        resume: a.resume,
        hash,
        name: name.clone(),
    };
    let max = parse_rate("--max-rate", &a.max_rate)?;
    let path = target.addrs[0].ip().to_string();
    let memory = (!a.no_path_memory).then(|| Memory::open(a.path_memory.clone()));
    let initial = match (a.rate.as_str(), &memory) {
        ("auto", Some(m)) => {
            let cold = parse_rate("--rate", COLD_START)?;
            let s = m.memory.start(&path, wall_ms(), cold, max);
            if let (
                Basis::Remembered {
                    transfers,
                    forecast_mbit_s,
                },
                false,
                true,
            ) = (s.basis, a.quiet, s.rate > cold)
            {
                nowcast::warn_line!(
                    "nowcast: {}",
                    start_line(s.rate, max, forecast_mbit_s, transfers, &path)
                );
            }
            s.rate
        }
        ("auto", None) => parse_rate("--rate", COLD_START)?,
        (r, _) => parse_rate("--rate", r)?,
    };
    let packet = f64::from(a.packet);
    let controller: Box<dyn Controller> = match &a.fixed_rate {
        // --max-rate is the highest rate, a fixed one's too.
        Some(r) => Box::new(Fixed::new(parse_rate("--fixed-rate", r)?.min(max), packet)),
        None => Box::new(HighSpeed::new(initial, max, packet).with_loss_count(a.loss_rate)),
    };
    let model = load_model(a.model.as_deref())?;
    let signature_packets = a.signature_packets.unwrap_or(model.signature_packets);
    if !(SIGNATURE_PACKETS_MIN..=SIGNATURE_PACKETS_MAX).contains(&signature_packets) {
        usage!("--signature-packets must be {SIGNATURE_PACKETS_MIN}–{SIGNATURE_PACKETS_MAX}");
    }
    let classifier = (!a.no_classifier).then(|| Classifier::new(model));
    let classifying = classifier.is_some();
    let sender = Sender::new(
        sender::Config {
            hello,
            initial_rate: initial,
            signature_packets: if a.signatures.is_some() {
                signature_packets
            } else {
                0
            },
        },
        controller,
        classifier,
    );
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let mut sigs = match &a.signatures {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("{}", p.display()))?,
        ),
        None => None,
    };
    let label = match a.label.as_str() {
        "cpu" => Some(Label::Cpu),
        "network" => Some(Label::Network),
        _ => None,
    };
    let bar = (!a.quiet && !a.json && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(size);
        b.set_style(bar_style(
            super::common::stderr_columns().unwrap_or(80),
            "starting",
        ));
        b.set_message("starting");
        b
    });
    let plain = !a.quiet && !a.json && bar.is_none();
    let mut last_plain = std::time::Instant::now();
    let to = target.name.clone();
    let mut stdout = std::io::stdout().lock();
    let mut seq = 0u64;
    let (mut cpu, mut net, mut inc, mut lost) = (0u64, 0u64, 0u64, 0u64);
    let mut delivery = DeliveryRate::new();
    let mut failure: Option<anyhow::Error> = None;
    let summary = io::send(sender, &file, target.addrs[0], &stop, &mut |u| match u {
        SendUpdate::Event(Event::Signature(s)) => {
            if let Some(f) = sigs.as_mut() {
                let line = Labelled {
                    label,
                    signature: s.clone(),
                }
                .to_string();
                if let Err(e) = writeln!(f, "{line}") {
                    failure.get_or_insert(e.into());
                }
            }
        }
        SendUpdate::Event(Event::Window(w)) if w.lost > 0 => {
            lost += w.lost;
            match w.verdict.map(|v| v.diagnosis()) {
                Some(Diagnosis::Cpu) => cpu += 1,
                Some(Diagnosis::Network) => net += 1,
                Some(_) => inc += 1,
                None => {}
            }
            if a.json {
                let r = record::congestion(w, wall_ms(), &to, seq, a.packet, classifying);
                seq += 1;
                if let Err(e) = writeln!(stdout, "{}", r.to_line()) {
                    failure.get_or_insert(e.into());
                }
            }
        }
        // `--resume` that found nothing to continue sends the whole file: said, not silent.
        SendUpdate::Event(Event::Accepted { held }) if a.resume => {
            let line = if *held == 0 {
                format!(
                    "nowcast: nothing to resume: the receiver holds no part of this file under \
                     {name:?} (none was left, or it was of other contents); sending all of it"
                )
            } else {
                format!("nowcast: resuming: the receiver holds {held} of its packets")
            };
            match &bar {
                Some(b) => b.println(line),
                None => nowcast::warn_line!("{line}"),
            }
        }
        SendUpdate::Progress {
            delivered,
            total,
            rate,
        } => {
            let done = (delivered * u64::from(a.packet)).min(size);
            // kbit/s below 1 Mbit/s (a slow link read "0 Mbit/s (pacing 0)").
            let rate_of = |bytes_per_s: f64| {
                nowcast::format::scaled(bytes_per_s * 8e-6, nowcast_core::record::Unit::MbitPerS)
            };
            let delivering = delivery.update(done);
            let msg = format!(
                "{} (pacing {}), {lost} lost: {cpu} cpu, {net} net, {inc} unsure",
                rate_of(delivering),
                rate_of(rate),
            );
            if let Some(b) = &bar {
                // The time left at the rate delivered now; none before there is a rate.
                let eta = (delivering > 0.0 && done < size).then(|| {
                    let s = ((size - done) as f64 / delivering).ceil().min(1e9);
                    format!(", ETA {}", nowcast::when::human(s as i64 * 1000))
                });
                // What fits the terminal: the classifier's counts go first, then the
                // pacing, so that the line never wraps (the bar takes what is left).
                let cols = super::common::stderr_columns().unwrap_or(80);
                let eta = eta.unwrap_or_default();
                let msg = if cols >= 100 {
                    format!("{msg}{eta}")
                } else if cols >= 60 {
                    format!("{}, {lost} lost{eta}", rate_of(delivering))
                } else {
                    rate_of(delivering)
                };
                b.set_style(bar_style(cols, &msg));
                b.set_position(done);
                b.set_message(msg);
            } else if plain && last_plain.elapsed() >= Duration::from_secs(1) {
                last_plain = std::time::Instant::now();
                nowcast::warn_line!(
                    "{:5.1}% of {total} packets, {msg}",
                    100.0 * done as f64 / size.max(1) as f64
                );
            }
        }
        _ => {}
    });
    let summary = match summary {
        // Nothing listens there: nothing was offered, nothing to resume.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(super::CouldNotRun(format!(
                "{}: connection refused: {}",
                target.name,
                nowcast::format::ask_running("nowcast fobs recv")
            ))
            .into())
        }
        other => other.with_context(|| target.name.clone())?,
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(r) = summary.refused {
        bail!("{}: refused: {}", target.name, r.reason());
    }
    if let Some(u) = &summary.unanswered {
        // Nothing was started: no summary of a transfer, nothing to resume.
        return Err(super::CouldNotRun(format!(
            "{} {}: {}",
            target.name,
            u.describe(),
            nowcast::format::ask_running("nowcast fobs recv")
        ))
        .into());
    }
    if !summary.welcomed {
        bail!(
            "{}: {} before the receiver answered; nothing was sent",
            target.name,
            summary
                .failed
                .as_deref()
                .unwrap_or("the transfer did not start")
        );
    }
    let loss = record::loss(&summary.stats);
    // Why the transfer did not finish, and whether `--resume` can continue it.
    let unfinished = match (summary.done, &summary.failed) {
        (Some(Done::Stored), _) => None,
        (Some(Done::HashMismatch), _) => Some((
            // The likeliest cause is here: a file written to while it was read.
            if std::fs::metadata(&a.file).and_then(|m| m.modified()).ok() != modified {
                format!(
                    "the receiver's copy did not match the hash; it was discarded: {} changed \
                     while it was being sent (its modification time moved); send it again once \
                     it is written",
                    a.file.display()
                )
            } else {
                "the receiver's copy did not match the hash; it was discarded".to_string()
            },
            false,
        )),
        (Some(Done::StorageFailed), _) => {
            Some(("the receiver could not store the file".to_string(), false))
        }
        (Some(Done::Abandoned), _) => Some(("the receiver abandoned the transfer".into(), true)),
        (Some(Done::Stopped), _) => Some(("the receiver was stopped by its operator".into(), true)),
        (Some(d @ Done::Other(_)), _) => Some((format!("the transfer was {d}"), true)),
        (None, Some(f)) => Some((f.clone(), true)),
        (None, None) => Some(("the transfer did not finish".into(), true)),
    };
    let s = summary.stats;
    let counts = format!(
        "{} sent, {} lost ({} %), {}; classifier {}",
        count(s.sent, "packet"),
        s.lost,
        // Three significant digits: 0.0386 % where the classifier's range is, 18.8 % (was
        // 18.8295 %).
        nowcast::format::significant(100.0 * loss),
        if s.acknowledged == s.windows {
            count(s.windows, "window")
        } else {
            // A file stored before its last windows' acknowledgements came back.
            format!(
                "{} ({} acknowledged)",
                count(s.windows, "window"),
                s.acknowledged
            )
        },
        if classifying {
            format!(
                "on: cpu {}, network {}, inconclusive {}",
                s.cpu_verdicts, s.network_verdicts, s.inconclusive
            )
        } else {
            "off".into()
        }
    );
    let probe = Probe {
        transport: Some(Transport::Fobs),
        payload_bytes: Some(size),
        ..Probe::default()
    };
    let from = summary.local.map(|l| l.ip().to_string());
    let Some((why, resumable)) = unfinished else {
        // Goodput: the bytes this transfer sent (not those a resume found at the receiver)
        // over its time; only of a file the receiver stored.
        let sent = summary.bytes - summary.held_bytes;
        let goodput = record::goodput_mbit_s(sent, summary.seconds);
        // A transfer held to a lower `--max-rate` than the default says what the cap allowed,
        // not what the path can do: the next transfer, uncapped, would start below the path.
        let capped = max < parse_rate("--max-rate", MAX_RATE)?
            && summary.stats.peak_delivery as f64 * 8.0 >= 0.9 * max;
        if let (Some(m), false) = (memory, capped) {
            if summary.stats.peak_delivery > 0 {
                m.remember(
                    &path,
                    Transfer {
                        at_ms: wall_ms(),
                        peak_delivery_mbit_s: summary.stats.peak_delivery as f64 * 8e-6,
                    },
                );
            }
        }
        if sent == 0 {
            // Nothing crossed the path: a goodput of 0 would be a false measurement in
            // whatever series the records join.
            let why = if summary.bytes == 0 {
                "the file is empty"
            } else {
                "the receiver held all of it from before"
            };
            if a.json {
                nowcast::warn_line!(
                    "nowcast: {}: stored, but nothing was sent ({why}): no throughput or loss \
                     to record",
                    target.name
                );
            } else {
                writeln!(
                    stdout,
                    "{}: stored; nothing was sent ({why}), so no goodput was measured",
                    target.name
                )?;
            }
        } else if a.json {
            let records =
                record::transfer(wall_ms(), &to, from.as_deref(), &probe, Ok((goodput, loss)));
            for r in records {
                writeln!(stdout, "{}", r.to_line())?;
            }
        } else {
            writeln!(
                stdout,
                "{}: {} in {:.2} s: {goodput:.1} Mbit/s goodput; {counts}",
                target.name,
                count(sent, "byte"),
                summary.seconds,
            )?;
        }
        return Ok(());
    };
    // An unfinished transfer has no goodput, and the path memory learns nothing from it:
    // the summary and the records say what the receiver acknowledged and why it stopped.
    let (done, left) = (
        summary.delivered_bytes,
        size.saturating_sub(summary.delivered_bytes),
    );
    let delivered = format!("{done} of {size} bytes acknowledged by the receiver");
    if a.json {
        // As a failed probe of `nowcast tcp` or a campaign's: status error, no value, and
        // why, for both of the transfer's series.
        let why = format!("{to}: {why} ({delivered})");
        for r in record::transfer(wall_ms(), &to, from.as_deref(), &probe, Err(&why)) {
            writeln!(stdout, "{}", r.to_line())?;
        }
    } else {
        writeln!(
            stdout,
            "{}: not finished after {:.2} s: {delivered}, {left} left; {counts}",
            target.name, summary.seconds,
        )?;
    }
    if resumable {
        bail!("{why} (resume with --resume)")
    }
    bail!("{why}")
}

/// What `--rate auto` starts at, `rate` (bytes/s): half what the path delivered, or
/// `--max-rate` (`max`) when that is lower, which the line then says instead.
fn start_line(rate: f64, max: f64, forecast_mbit_s: f64, transfers: usize, path: &str) -> String {
    let from = format!(
        "{forecast_mbit_s:.0} Mbit/s, forecast from {transfers} transfer{} to {path} in the last \
         hour",
        if transfers == 1 { "" } else { "s" }
    );
    let start = rate * 8e-6;
    if rate >= max {
        format!("starting at {start:.0} Mbit/s (--max-rate; the path delivered {from})")
    } else {
        format!(
            "starting at {start:.0} Mbit/s: half the rate this path delivered ({from}; --rate \
             20M for a cold start)"
        )
    }
}

/// `--rate`'s start on a path with nothing remembered.
const COLD_START: &str = "20M";

/// The path memory's file: read at the start of a transfer, a finished transfer's goodput
/// added at its end. A file that cannot be read is reported and left as it is.
struct Memory {
    file: Option<PathBuf>,
    memory: PathMemory,
    writable: bool,
}

impl Memory {
    fn open(file: Option<PathBuf>) -> Self {
        let file = file.or_else(default_memory_file);
        let mut m = Self {
            file,
            memory: PathMemory::new(),
            writable: true,
        };
        let Some(f) = &m.file else { return m };
        match std::fs::read_to_string(f) {
            Ok(text) => match PathMemory::parse(&text) {
                Ok(memory) => m.memory = memory,
                Err(e) => {
                    nowcast::warn_line!(
                        "warning: path memory {}: {e}; starting cold, and the file is left as it is",
                        f.display()
                    );
                    m.writable = false;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                nowcast::warn_line!("warning: path memory {}: {e}; starting cold", f.display());
                m.writable = false;
            }
        }
        m
    }

    /// Adds the transfer to the file as it is now (another sender may have written since
    /// it was read), through a temporary file renamed over it.
    fn remember(self, path: &str, t: Transfer) {
        let (Some(f), true) = (self.file, self.writable) else {
            return;
        };
        let mut now = match std::fs::read_to_string(&f) {
            Ok(text) => match PathMemory::parse(&text) {
                Ok(m) => m,
                Err(_) => return,
            },
            Err(_) => PathMemory::new(),
        };
        now.remember(path, t);
        let tmp = f.with_extension(format!("tmp.{}", std::process::id()));
        let written = f
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, now.to_json()))
            .and_then(|()| std::fs::rename(&tmp, &f));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            nowcast::warn_line!("warning: path memory {}: {e}; not updated", f.display());
        }
    }
}

/// $XDG_STATE_HOME/nowcast/fobs-paths.json, or ~/.local/state/nowcast/fobs-paths.json.
fn default_memory_file() -> Option<PathBuf> {
    let non_empty = |v: &str| {
        std::env::var_os(v)
            .filter(|x| !x.is_empty())
            .map(PathBuf::from)
    };
    let state = non_empty("XDG_STATE_HOME")
        .or_else(|| non_empty("HOME").map(|h| h.join(".local/state")))?;
    Some(state.join("nowcast").join("fobs-paths.json"))
}

/// The rate at which a transfer's bytes are acknowledged, for the progress line: over the
/// last half second or more (since the start until then), so that it shows what the path
/// delivers now, not the controller's pacing rate (which on a fast host sits at its cap).
struct DeliveryRate {
    start: std::time::Instant,
    mark: (std::time::Instant, u64),
    rate: Option<f64>,
}

impl DeliveryRate {
    const SPAN: Duration = Duration::from_millis(500);

    fn new() -> Self {
        let now = std::time::Instant::now();
        Self {
            start: now,
            mark: (now, 0),
            rate: None,
        }
    }

    /// Bytes per second, given the bytes acknowledged so far.
    fn update(&mut self, done: u64) -> f64 {
        let now = std::time::Instant::now();
        let since = now - self.mark.0;
        if since >= Self::SPAN {
            self.rate = Some(done.saturating_sub(self.mark.1) as f64 / since.as_secs_f64());
            self.mark = (now, done);
        }
        self.rate
            .unwrap_or_else(|| done as f64 / (now - self.start).as_secs_f64().max(1e-3))
    }
}

/// The receiver's address from `--listen` (an IP, or IP:PORT, as [`net::split_host_port`]
/// reads it) and `--port`: the port named once, or the default.
fn listen_addr(listen: &str, port: Option<u16>) -> Result<std::net::SocketAddr> {
    let want = port.unwrap_or(DEFAULT_PORT);
    let not_ip = || {
        usage_err!("--listen '{listen}' is not an IP address or IP:PORT (e.g. 0.0.0.0, [::1]:8070)")
    };
    let (host, named) = net::split_host_port(listen, want).map_err(|_| not_ip())?;
    let ip: std::net::IpAddr = host.parse().map_err(|_| not_ip())?;
    if port.is_some() && named != want {
        usage!("--listen {listen} names port {named}, --port {want}: give one");
    }
    Ok(std::net::SocketAddr::new(ip, named))
}

fn recv(a: RecvArgs) -> Result<()> {
    let token = match &a.token {
        Some(t) => parse_token(t)?,
        None => {
            let mut t = [0u8; TOKEN_LEN];
            io::fill_random(&mut t);
            t
        }
    };
    let listen = listen_addr(&a.listen, a.port)?;
    let dir = a
        .dir
        .canonicalize()
        .map_err(|e| usage_err!("--dir {}: {e}", a.dir.display()))?;
    if !dir.is_dir() {
        usage!("--dir {} is not a directory", dir.display());
    }
    if !(a.grace_ms.is_finite() && a.grace_ms >= 0.0) {
        usage!("--grace-ms {} must be 0 or more", a.grace_ms);
    }
    if !(a.idle.is_finite() && a.idle > 0.0) {
        usage!("--idle {} must be above 0", a.idle);
    }
    // 0 or less acted as 1 (one transfer a minute, then "too many connections").
    if !(a.per_client_per_minute.is_finite() && a.per_client_per_minute > 0.0) {
        usage!(
            "--per-client-per-minute {} must be above 0 (connections a client network may open \
             a minute)",
            a.per_client_per_minute
        );
    }
    if !(a.keep_unfinished.is_finite() && a.keep_unfinished > 0.0) {
        usage!(
            "--keep-unfinished {} must be above 0 (how long an unfinished transfer is kept \
             for --resume, e.g. 7d)",
            a.keep_unfinished
        );
    }
    // Every transfer writes there (a part file, even under --discard): a directory it cannot
    // write to refused every sender after "listening", without a word at the start.
    // A random name: a pid is often the same in containers sharing a volume.
    let mut tag = [0u8; 8];
    io::fill_random(&mut tag);
    let probe = dir.join(format!(".nowcast-fobs-check-{}", hex(&tag)));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .with_context(|| {
            format!(
                "--dir {}: cannot write there, where every transfer is stored",
                dir.display()
            )
        })?;
    let opts = RecvOptions {
        listen,
        dir,
        token,
        max_size: parse_size(&a.max_size).map_err(|e| usage_err!("--max-size: {e}"))?,
        max_rate: parse_rate("--max-rate", &a.max_rate)?,
        grace: Duration::from_secs_f64(a.grace_ms / 1e3),
        idle: Duration::from_secs_f64(a.idle),
        rcvbuf: a
            .rcvbuf
            .map(|b| match usize::try_from(b) {
                // The kernel takes 0 as its least buffer: not what anyone asking means.
                Ok(0) => Err(usage_err!("--rcvbuf 0: give a size above 0 (e.g. 8M)")),
                Ok(b) => Ok(b),
                Err(_) => Err(usage_err!("--rcvbuf: too large")),
            })
            .transpose()?,
        once: a.once,
        discard: a.discard,
        per_client_per_minute: a.per_client_per_minute,
        keep_unfinished: Duration::from_secs_f64(a.keep_unfinished),
    };
    let stop = Stop::on_signals().map_err(|e| anyhow!("cannot install signal handlers: {e}"))?;
    let quiet = a.quiet;
    let keep_s = a.keep_unfinished;
    let mut out = std::io::stdout().lock();
    let mut failed = None;
    io::recv(&opts, &stop, &mut |u| {
        let line = match u {
            RecvUpdate::Listening { tcp } => Some(format!(
                "nowcast fobs recv: listening on {tcp} (tcp and udp), directory {}, token {}",
                opts.dir.display(),
                hex(&token)
            )),
            RecvUpdate::Refused { peer, why } if !quiet => Some(format!("{peer}: {why}")),
            RecvUpdate::Unfinished {
                found,
                deleted,
                error,
            } => unfinished_line(found, deleted, error.as_deref(), keep_s)
                .filter(|_| !quiet || error.is_some()),
            RecvUpdate::Warning { what } => {
                nowcast::warn_line!("nowcast fobs recv: {what}");
                None
            }
            RecvUpdate::Transfer {
                peer,
                name,
                size,
                resumed,
                discarded,
            } if !quiet => Some(format!(
                "{peer}: receiving {name:?} ({size} bytes, {resumed} packets already held){}",
                if discarded > 0 {
                    format!(
                        "; the {discarded} packets an unfinished transfer of it left are dropped: \
                         the sender did not ask to resume (--resume)"
                    )
                } else {
                    String::new()
                }
            )),
            RecvUpdate::Finished {
                peer,
                name,
                result,
                drops,
                seconds,
                size,
                received,
                held,
                kept,
            } => {
                let what = match &result {
                    Ok(Done::Stored) if opts.discard => {
                        "received, hash verified, deleted (--discard)".to_string()
                    }
                    Ok(d) => d.to_string(),
                    Err(e) => e.clone(),
                };
                // A refused hello has no name yet. Names are quoted: one may hold ": ".
                let who = if name.is_empty() {
                    format!("{peer}")
                } else {
                    format!("{peer}: {name:?}")
                };
                if opts.once && !matches!(result, Ok(Done::Stored)) {
                    failed = Some(format!("{who}: {what}"));
                }
                (!quiet).then(|| {
                    // A rate only for a file that arrived, and of the bytes that arrived in
                    // this transfer: the size a refused sender announced over the time of the
                    // refusal is no rate, nor is a resumed file's whole size over the time
                    // its missing part took. An unfinished transfer says what arrived.
                    let rate = if matches!(result, Ok(Done::Stored)) {
                        let before = match size.saturating_sub(received) {
                            0 => String::new(),
                            b => format!("; {b} bytes were held from an earlier transfer"),
                        };
                        format!(
                            " in {seconds:.2} s ({:.1} Mbit/s{before})",
                            received as f64 * 8e-6 / seconds.max(1e-9)
                        )
                    } else if held > 0 || kept {
                        format!(
                            " after {seconds:.2} s: {held} of {size} bytes held{}",
                            if kept { ", kept for --resume" } else { ", not kept" }
                        )
                    } else {
                        format!(" after {seconds:.2} s")
                    };
                    let datagrams = drops.total() - drops.control;
                    let dropped = if datagrams == 0 {
                        String::new()
                    } else {
                        format!(
                            "; datagrams dropped: {datagrams} (malformed {}, wrong source {}, wrong session {}, window {}, packet {}, over rate {})",
                            drops.malformed,
                            drops.source,
                            drops.session,
                            drops.window,
                            drops.packet,
                            drops.rate
                        )
                    };
                    let broken = match drops.control {
                        0 => String::new(),
                        n => format!("; control messages that broke the protocol: {n}"),
                    };
                    format!("{who}: {what}{rate}{dropped}{broken}")
                })
            }
            _ => None,
        };
        if let Some(l) = line {
            let _ = writeln!(out, "{l}");
            let _ = out.flush();
        }
    })?;
    match failed {
        Some(f) => bail!(f),
        None => Ok(()),
    }
}

/// What a receiver says of an unfinished transfer in its directory: kept for `--resume`
/// (at the start), deleted for its age, or not deletable.
fn unfinished_line(
    u: &io::Unfinished,
    deleted: bool,
    error: Option<&str>,
    keep_s: f64,
) -> Option<String> {
    let held = if u.size == 0 {
        "empty".to_string()
    } else {
        format!(
            "{:.1} % of {} held",
            u.held as f64 * 100.0 / u.size as f64,
            format::bytes(u.size)
        )
    };
    let ago = format::ago(u.age.as_secs_f64() * 1e3);
    // As the flag is written (`7d`, `12h`).
    let keep = nowcast::when::exact((keep_s * 1e3).round() as i64);
    Some(match (deleted, error) {
        (false, _) => format!(
            "nowcast fobs recv: unfinished {:?} kept for --resume ({held}, last written {ago}; \
             deleted {keep} after that: --keep-unfinished)",
            u.name
        ),
        (true, None) => format!(
            "nowcast fobs recv: deleted unfinished {:?} ({held}, last written {ago}): kept \
             {keep} (--keep-unfinished)",
            u.name
        ),
        (true, Some(e)) => format!(
            "nowcast fobs recv: could not delete unfinished {:?} ({held}, last written {ago}, \
             older than --keep-unfinished {keep}): {e}",
            u.name
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_capped_by_max_rate_says_so() {
        let mbit = |m: f64| m * 1e6 / 8.0;
        assert_eq!(
            start_line(mbit(150.0), mbit(150.0), 392.0, 3, "10.0.0.2"),
            "starting at 150 Mbit/s (--max-rate; the path delivered 392 Mbit/s, forecast from \
             3 transfers to 10.0.0.2 in the last hour)"
        );
        assert_eq!(
            start_line(mbit(196.0), mbit(10_000.0), 392.0, 1, "10.0.0.2"),
            "starting at 196 Mbit/s: half the rate this path delivered (392 Mbit/s, forecast \
             from 1 transfer to 10.0.0.2 in the last hour; --rate 20M for a cold start)"
        );
    }

    #[test]
    fn listen_takes_an_ip_or_an_ip_and_port_and_the_port_once() {
        let at = |l: &str, p: Option<u16>| listen_addr(l, p).map(|a| a.to_string());
        assert_eq!(
            at("0.0.0.0", None).unwrap(),
            format!("0.0.0.0:{DEFAULT_PORT}")
        );
        assert_eq!(at("127.0.0.1", Some(9000)).unwrap(), "127.0.0.1:9000");
        assert_eq!(at("127.0.0.1:47000", None).unwrap(), "127.0.0.1:47000");
        assert_eq!(at("[::1]:47000", Some(47000)).unwrap(), "[::1]:47000");
        assert_eq!(at("::1", None).unwrap(), format!("[::1]:{DEFAULT_PORT}"));
        let both = at("127.0.0.1:47000", Some(9000)).unwrap_err().to_string();
        assert!(both.contains("names port 47000, --port 9000"), "{both}");
        let bad = at("localhost:80", None).unwrap_err().to_string();
        assert!(
            bad.contains("'localhost:80' is not an IP address or IP:PORT"),
            "{bad}"
        );
    }
}
