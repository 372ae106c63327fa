//! The flags `nowcast tcp` and `nowcast udp` share, turned into plain configuration: the
//! schedule, the series' settings and the record sink.

use anyhow::Result;
use nowcast::net::{parse_ms, parse_seconds};
use nowcast::output::{Ndjson, RecordSink, Table, Tee};
use nowcast::periodic::Plan;
use nowcast::series::Settings;
use nowcast_core::probed::{Config, Overrides};
use nowcast_core::record::{Metric, Transport};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Clone)]
pub struct Common {
    /// Seconds from the start of one experiment to the start of the next. Without --count,
    /// experiments continue until SIGINT or SIGTERM.
    #[arg(long, value_parser = parse_seconds)]
    pub period: Option<f64>,
    /// Number of experiments, at least 1 (default: 1, or unlimited with --period).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Write NDJSON measurement records to standard output instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the NDJSON records to FILE.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Lowest adaptive timeout, in ms, or with a unit as every duration here (250ms, 1.5s,
    /// 1min) (default: per series, from the core's table: 1000 for
    /// round trips, 100 for a UDP burst's wait, 3000 for bandwidth probes).
    #[arg(long, value_parser = parse_ms)]
    pub timeout_floor: Option<f64>,
    /// Highest adaptive timeout, in ms (default: 10000 for round trips, 60000 for bandwidth).
    #[arg(long, value_parser = parse_ms)]
    pub timeout_ceiling: Option<f64>,
    /// Added to a timed-out probe's time when it is fed back, in ms (default: 1000 for round
    /// trips, 100 for a UDP burst, 5000 for bandwidth).
    #[arg(long, value_parser = parse_ms)]
    pub timeout_penalty: Option<f64>,
    /// The timeout until a series has enough values to know its spread, in ms (default:
    /// 3000 for round trips, 1000 for a UDP burst, 15000 for bandwidth).
    #[arg(long, value_parser = parse_ms)]
    pub timeout_initial: Option<f64>,
    /// Also archive the records in this SQLite file (created if missing; see `nowcast
    /// archive`).
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// Hard limit on every probe, in seconds (or with a unit), whatever its adaptive timeout.
    #[arg(long, value_parser = parse_seconds, default_value_t = 60.0)]
    pub deadline: f64,
}

impl Common {
    pub fn plan(&self) -> Result<Plan> {
        let period = match self.period {
            Some(p) if !(p.is_finite() && p >= 0.0) => usage!("--period must be ≥ 0 seconds"),
            Some(p) => Duration::from_secs_f64(p),
            None => Duration::ZERO,
        };
        let count = match (self.count, self.period) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(1),
        };
        Ok(Plan { period, count })
    }

    pub fn deadline(&self) -> Result<Duration> {
        if !(self.deadline.is_finite() && self.deadline > 0.0) {
            usage!("--deadline must be a positive number of seconds");
        }
        Ok(Duration::from_secs_f64(self.deadline))
    }

    /// The series' settings: the records' source and target, the period they carry, and
    /// the timeout flags in place of the core's defaults.
    pub fn settings(&self, source: &'static str, to: &str, transport: Transport) -> Settings {
        Settings {
            source: source.to_string(),
            to: to.to_string(),
            transport,
            period_ms: self.period.filter(|p| *p > 0.0).map(|p| p * 1e3),
            overrides: Overrides {
                kind: None,
                floor_ms: self.timeout_floor,
                ceiling_ms: self.timeout_ceiling,
                penalty_ms: self.timeout_penalty,
                initial_ms: self.timeout_initial,
            },
        }
    }

    /// Refuses timeout flags that leave a series of `metrics` no timeout to keep, naming the
    /// flag, and the default it clashes with when the other bound was not given (the core
    /// said "timeout bounds need 0 < floor ≤ ceiling" with its own field names).
    pub fn check_timeouts(&self, settings: &Settings, metrics: &[Metric]) -> Result<()> {
        // parse_ms takes only finite durations ≥ 0: a zero is what is left to refuse (a
        // penalty of 0 is none).
        for (name, v) in [
            ("timeout-floor", self.timeout_floor),
            ("timeout-ceiling", self.timeout_ceiling),
            ("timeout-initial", self.timeout_initial),
        ] {
            if v == Some(0.0) {
                usage!("--{name} must be above 0");
            }
        }
        for &m in metrics {
            let b = Config::new(m, Some(settings.transport), &settings.source, &settings.to)
                .with(&settings.overrides)
                .bounds;
            if b.floor_ms > b.ceiling_ms {
                let (floor, ceiling) = (b.floor_ms, b.ceiling_ms);
                match (self.timeout_floor, self.timeout_ceiling) {
                    (Some(_), Some(_)) => usage!(
                        "--timeout-floor {floor} ms is above --timeout-ceiling {ceiling} ms"
                    ),
                    (Some(_), None) => usage!(
                        "--timeout-floor {floor} ms is above the {m} series' default ceiling of {ceiling} ms (--timeout-ceiling sets it)"
                    ),
                    _ => usage!(
                        "--timeout-ceiling {ceiling} ms is below the {m} series' default floor of {floor} ms (--timeout-floor sets it)"
                    ),
                }
            }
        }
        Ok(())
    }

    /// The table or NDJSON on standard output, and NDJSON in the file of --out.
    pub fn sink(&self) -> Result<Box<dyn RecordSink>> {
        let stdout: Box<dyn RecordSink> = if self.json {
            Box::new(Ndjson::new(std::io::stdout()))
        } else {
            Box::new(Table::new(std::io::stdout()))
        };
        let sink: Box<dyn RecordSink> = match &self.out {
            Some(path) => Box::new(Tee(stdout, Ndjson::create(path)?)),
            None => stdout,
        };
        Ok(match &self.archive {
            Some(path) => Box::new(Tee(
                sink,
                nowcast::archive::Archive::start(&nowcast::archive::ArchiveConfig::sqlite(
                    path.clone(),
                ))?,
            )),
            None => sink,
        })
    }
}

/// Refuses an `--out` that is one of the inputs, before anything is written: `consequence`
/// says what writing it would do to that input. The same path (links resolved, for a file
/// that does not exist yet its folder's) or the same file under another name (a hard link:
/// the same device and inode).
pub fn refuse_an_input(out: &Path, inputs: &[PathBuf], consequence: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let out_file = std::fs::metadata(out).ok();
    let out_path = canonical(out);
    for input in inputs {
        let same_file = match (&out_file, std::fs::metadata(input)) {
            (Some(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        let same_path = out_path.is_some() && out_path == canonical(input);
        if same_file || same_path {
            usage!(
                "--out {}: this is the input {}, which {consequence}; name another file",
                out.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// `p` absolute with its links resolved; for a file that does not exist yet, its folder's
/// canonical path joined with its name.
fn canonical(p: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(p).ok().or_else(|| {
        let folder = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(folder).ok()?.join(p.file_name()?))
    })
}

/// The columns of the terminal on standard error, if it is one (TIOCGWINSZ): read at each
/// redraw of a progress line, so that a narrow or resized pane gets a line that fits (one
/// that wrapped left a trail of stale lines at each redraw).
pub fn stderr_columns() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills the winsize it is given; fd 2 is only read from.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) } == 0;
    // As indicatif's terminal (console) reads it: a size of no rows is no size.
    (ok && ws.ws_col > 0 && ws.ws_row > 0).then_some(usize::from(ws.ws_col))
}
