//! `nowcast classify`: the FOBS loss classifier on its own. Diagnoses signature files
//! (`nowcast classify FILE…`), and fits a model for a new system from labelled ones
//! (`nowcast classify train FILE… --out MODEL`). Flags to configuration and printing only;
//! the classifier is `nowcast::classify`.

use anyhow::{anyhow, bail, Context, Result};
use nowcast::classify::model::Model;
use nowcast::classify::signature::{Label, Labelled};
use nowcast::classify::{train, Classifier, Diagnosis, Tally, Verdict};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The model shipped with the project (native-probes/models/fobs-classifier.json).
pub const SHIPPED_MODEL: &str = Model::SHIPPED;

#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Signature files: one signature a line, `LABEL LEN LOSSES…` (LABEL cpu, network \
    or ?; LOSSES the 0-based lost positions, runs as FIRST-LAST), as `nowcast fobs send \
    --signatures` writes them. With labelled signatures the summary scores the verdicts: \
    correct, wrong, inconclusive (P(CPU) between 0.05 and 0.95) and out of range (loss rate \
    below 0.00008: ½ by rule)."
)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// Signature files to diagnose (- for standard input).
    files: Vec<PathBuf>,
    /// The model (default: the one shipped, trained on this project's emulated links).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// One JSON object per signature on standard output.
    #[arg(long)]
    json: bool,
    /// Complexity alone from a loss rate of 0.0005, as the paper and algorithms.md §5 (by
    /// default the success proportion is a second opinion there, where the model has it).
    #[arg(long)]
    paper: bool,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Fit a model from labelled signature files.
    Train {
        /// Labelled signature files (cpu and network; - for standard input).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where to write the model.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// What the model was trained on (kept in the file).
        #[arg(long, default_value = "labelled signatures")]
        trained_on: String,
    },
}

/// Reads a model file, or the shipped model.
pub fn load_model(path: Option<&Path>) -> Result<Model> {
    match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
            Model::from_json(&text).map_err(|e| anyhow!("{}: {e}", p.display()))
        }
        None => Model::from_json(SHIPPED_MODEL).map_err(|e| anyhow!("shipped model: {e}")),
    }
}

/// The longest signature line read (a signature of the 16 Mi packets
/// `signature::MAX_TEXT_LEN` allows, with every other one lost, is longer; real ones are
/// far shorter), so that a file of one huge line is refused without being held.
const MAX_LINE: usize = 64 << 20;

/// A signature file's signatures with their line numbers, read a line at a time. A bad line
/// is named by its number, quoting at most a part of it; a file without a signature is an
/// error (a wrong file, or one `--signatures` never wrote to: an empty table would read as
/// "nothing to diagnose").
fn read(path: &Path) -> Result<Vec<(u64, Labelled)>> {
    use nowcast::series_input::{Line, Lines};
    // `-` reads standard input, as `forecast` and `pcap` do.
    let f = nowcast::input::open(path).with_context(|| format!("{}", path.display()))?;
    let mut lines = Lines::new(std::io::BufReader::with_capacity(1 << 16, f), MAX_LINE);
    let mut out = Vec::new();
    while let Some((number, line)) = lines
        .next_line()
        .with_context(|| format!("{}", path.display()))?
    {
        let at = || format!("{}:{number}", path.display());
        let Line::Text(bytes) = line else {
            bail!("{}: longer than {MAX_LINE} bytes", at());
        };
        let line = std::str::from_utf8(bytes).map_err(|e| {
            anyhow!(
                "{}: not UTF-8 text (byte {} of the line)",
                at(),
                e.valid_up_to() + 1
            )
        })?;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        out.push((
            number,
            Labelled::parse(line).map_err(|e| anyhow!("{}: {e}", at()))?,
        ));
    }
    if out.is_empty() {
        bail!("{}: no signatures", path.display());
    }
    Ok(out)
}

pub fn run(args: Args) -> Result<()> {
    // Written, not printed: a reader that stops early (`| head`) ends the output quietly.
    let mut out = std::io::stdout().lock();
    if let Some(Sub::Train {
        files,
        out: model_file,
        trained_on,
    }) = args.command
    {
        super::common::refuse_an_input(&model_file, &files, "would be overwritten by the model")?;
        let mut all = Vec::new();
        for f in &files {
            all.extend(read(f)?.into_iter().map(|(_, l)| l));
        }
        let model = train(&all, &trained_on).map_err(|e| anyhow!(e))?;
        std::fs::write(&model_file, model.to_json() + "\n")
            .with_context(|| format!("{}", model_file.display()))?;
        let s = &model.samples;
        let samples = |complexity: usize, success: usize| {
            format!(
                "{} and {}",
                nowcast::format::count(complexity as u64, "complexity sample"),
                nowcast::format::count(success as u64, "success-proportion sample")
            )
        };
        writeln!(
            out,
            "model written to {}: network {}; cpu {}",
            model_file.display(),
            samples(s.network.complexity, s.network.success),
            samples(s.cpu.complexity, s.cpu.success)
        )?;
        return Ok(());
    }
    if args.files.is_empty() {
        usage!("no signature files: nowcast classify FILE… (see --help)");
    }
    // Every file read before anything is printed: a bad or empty one is the only output.
    let inputs = args
        .files
        .iter()
        .map(|f| read(f).map(|l| (f, l)))
        .collect::<Result<Vec<_>>>()?;
    let model = load_model(args.model.as_deref())?;
    let mut c = if args.paper {
        Classifier::paper(model)
    } else {
        Classifier::new(model)
    };
    let mut tallies = [Tally::default(), Tally::default()];
    // Per cause and band of loss rates: [0.00008, 0.0005) (success proportion), then
    // [0.0005, 0.002), [0.002, 0.01), [0.01, 0.1), [0.1, 1].
    const BANDS: [(&str, f64); 5] = [
        ("0.00008–0.0005", 0.0005),
        ("0.0005–0.002", 0.002),
        ("0.002–0.01", 0.01),
        ("0.01–0.1", 0.1),
        ("0.1–1", f64::INFINITY),
    ];
    let mut by_band = [[Tally::default(); BANDS.len()]; 2];
    let (mut signatures, mut packets, mut nanos) = (0u64, 0u64, 0u128);
    let mut unlabelled = [0usize; 4];
    // Unlabelled verdicts on signatures of another length than the model's (marked `?`).
    let mut uncalibrated = 0usize;
    let trained = c.model.signature_packets;
    let mut labels = 0usize;
    for (f, labelled) in inputs {
        if let Some((_, l)) = labelled.iter().find(|(_, l)| l.signature.len() != trained) {
            nowcast::warn_line!(
                "warning: {}: {}-packet signatures, and the model was trained on {trained}-packet ones: \
                 complexity depends on the length, so its verdicts on these are not calibrated",
                f.display(),
                l.signature.len()
            );
        }
        // Unlabelled signatures are what is to be diagnosed: one row each (labelled ones are
        // scored in the summary).
        let unscored = labelled.iter().filter(|(_, l)| l.label.is_none()).count();
        if !args.json && unscored > 0 {
            let s = if unscored == 1 { "" } else { "s" };
            writeln!(out, "{}: {unscored} unlabelled signature{s}", f.display())?;
            writeln!(out, "{}", row_heading())?;
        }
        for (line, l) in labelled {
            let t = Instant::now();
            let v = c.classify(&l.signature);
            nanos += t.elapsed().as_nanos();
            signatures += 1;
            packets += l.signature.len() as u64;
            let d = v.diagnosis();
            match l.label {
                Some(label) => {
                    labels += 1;
                    let k = usize::from(label == Label::Cpu);
                    tallies[k].add(label, d);
                    if d != Diagnosis::OutOfRange {
                        let b = BANDS
                            .iter()
                            .position(|(_, upper)| v.loss_rate < *upper)
                            .unwrap_or(BANDS.len() - 1);
                        by_band[k][b].add(label, d);
                    }
                }
                None => {
                    let calibrated = calibrated(l.signature.len(), trained, d);
                    uncalibrated += usize::from(!calibrated);
                    if !args.json {
                        writeln!(out, "{}", row(line, l.signature.len(), &v, calibrated))?;
                    }
                    unlabelled[match d {
                        Diagnosis::Cpu => 0,
                        Diagnosis::Network => 1,
                        Diagnosis::Inconclusive => 2,
                        Diagnosis::OutOfRange => 3,
                    }] += 1
                }
            }
            if args.json {
                writeln!(
                    out,
                    "{}",
                    serde_json::json!({
                        "file": f.display().to_string(),
                        "label": l.label.map(Label::name),
                        "packets": l.signature.len(),
                        "loss_rate": v.loss_rate,
                        "metric": v.basis.name(),
                        "value": v.value,
                        "p_cpu": v.p_cpu,
                        "diagnosis": format!("{d:?}").to_lowercase(),
                        "calibrated": calibrated(l.signature.len(), trained, d),
                    })
                )?;
            }
        }
    }
    if args.json {
        return Ok(());
    }
    let pct = |n: usize, d: usize| {
        if d == 0 {
            0.0
        } else {
            100.0 * n as f64 / d as f64
        }
    };
    // One table: the causes, then each cause by band of loss rates, every figure under its
    // heading (the bands' rows sat 19 columns right of them).
    const W: usize = 22;
    if labels > 0 {
        writeln!(
            out,
            "{:<W$} {:>8} {:>9} {:>9} {:>13} {:>13}",
            "cause", "in range", "correct", "wrong", "inconclusive", "out of range"
        )?;
    }
    let row = |label: &str, t: &Tally, out_of_range: Option<usize>| {
        let d = t.diagnosed();
        let line = format!(
            "{label:<W$} {d:>8} {:>8.2}% {:>8.2}% {:>12.2}% {:>13}",
            pct(t.correct, d),
            pct(t.wrong, d),
            pct(t.inconclusive, d),
            out_of_range.map_or_else(String::new, |n| n.to_string())
        );
        line.trim_end().to_string()
    };
    // Each cause, then its bands of loss rates under it.
    for (k, name) in ["network", "cpu"].iter().enumerate() {
        let t = tallies[k];
        if t.diagnosed() + t.out_of_range == 0 {
            continue;
        }
        writeln!(out, "{}", row(name, &t, Some(t.out_of_range)))?;
        for (b, (band, _)) in BANDS.iter().enumerate() {
            let t = by_band[k][b];
            if t.diagnosed() > 0 {
                writeln!(out, "{}", row(&format!("  loss {band}"), &t, None))?;
            }
        }
    }
    if unlabelled.iter().sum::<usize>() > 0 {
        writeln!(
            out,
            "unlabelled: cpu {}, network {}, inconclusive {}, out of range {}",
            unlabelled[0], unlabelled[1], unlabelled[2], unlabelled[3]
        )?;
    }
    if uncalibrated > 0 {
        let note = format!(
            "? {} of another length than the {trained} packets the model was trained on: \
             complexity depends on the length, so P(CPU) and the verdict are not calibrated there",
            if uncalibrated == 1 {
                "a verdict on a signature".to_string()
            } else {
                format!("{uncalibrated} verdicts on signatures")
            }
        );
        for l in nowcast::format::wrap("", &nowcast::format::words(&note), " ", 2) {
            writeln!(out, "{l}")?;
        }
    }
    writeln!(out, "{}", cost(nanos, signatures, packets))?;
    Ok(())
}

/// Whether a verdict rests on the model as trained: a signature of the length it was trained
/// on, or one out of range (½ by rule, at any length).
fn calibrated(packets: usize, trained: usize, d: Diagnosis) -> bool {
    packets == trained || d == Diagnosis::OutOfRange
}

/// What the diagnoses cost: per signature, and per packet when there were packets.
fn cost(nanos: u128, signatures: u64, packets: u64) -> String {
    let per_packet = if packets > 0 {
        format!(", {:.2} ns per packet", nanos as f64 / packets as f64)
    } else {
        String::new()
    };
    format!(
        "cost: {:.2} µs per signature{per_packet} ({}, {})",
        nanos as f64 / 1e3 / signatures.max(1) as f64,
        nowcast::format::count(signatures, "signature"),
        nowcast::format::count(packets, "packet")
    )
}

/// The heading of [`row`]'s columns.
fn row_heading() -> String {
    format!(
        "{:>7} {:>7} {:>9}  {:<18} {:>7} {:>6}  verdict",
        "line", "packets", "loss rate", "metric", "value", "P(CPU)"
    )
}

/// One signature's verdict, under [`row_heading`]: its line in the file, its length, its loss
/// rate, the metric the verdict rests on and its value, P(CPU) and the diagnosis, marked `?`
/// when it is not `calibrated` (explained under the rows). 73 columns at most, whatever the
/// file's name (which heads the rows, once).
fn row(line: u64, packets: usize, v: &Verdict, calibrated: bool) -> String {
    let value = v.value.map_or("-".to_string(), |x| format!("{x:.4}"));
    let verdict = match v.diagnosis() {
        Diagnosis::Cpu => "cpu",
        Diagnosis::Network => "network",
        Diagnosis::Inconclusive => "inconclusive",
        Diagnosis::OutOfRange => "out of range",
    };
    format!(
        "{line:>7} {packets:>7} {:>9.6}  {:<18} {value:>7} {:>6.3}  {verdict}{}",
        v.loss_rate,
        v.basis.name(),
        v.p_cpu,
        if calibrated { "" } else { "?" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nowcast::classify::Basis;

    #[test]
    fn a_row_says_each_verdict_in_under_100_columns() {
        let v = Verdict {
            loss_rate: 0.005859,
            basis: Basis::SuccessProportion,
            value: Some(0.41234),
            p_cpu: 0.98213,
        };
        let r = row(12_345, 512, &v, true);
        assert_eq!(
            r,
            "  12345     512  0.005859  success_proportion  0.4123  0.982  cpu"
        );
        assert!(row(12_345, 512, &v, false).ends_with("0.982  cpu?"));
        let none = Verdict {
            loss_rate: 0.00001,
            basis: Basis::None,
            value: None,
            p_cpu: 0.5,
        };
        assert!(row(1, 512, &none, true).ends_with("     -  0.500  out of range"));
        assert!(row_heading().starts_with("   line packets loss rate  metric"));
        assert!(r.chars().count() <= 100 && row_heading().chars().count() <= 100);
    }

    #[test]
    fn the_cost_counts_in_words_and_has_no_per_packet_figure_without_packets() {
        assert_eq!(
            cost(330, 1, 0),
            "cost: 0.33 µs per signature (1 signature, 0 packets)"
        );
        assert_eq!(
            cost(66_000, 2, 32_768),
            "cost: 33.00 µs per signature, 2.01 ns per packet (2 signatures, 32768 packets)"
        );
    }

    #[test]
    fn only_verdicts_at_the_models_length_or_by_rule_are_calibrated() {
        assert!(calibrated(16_384, 16_384, Diagnosis::Cpu));
        assert!(!calibrated(100, 16_384, Diagnosis::Cpu));
        assert!(!calibrated(100, 16_384, Diagnosis::Inconclusive));
        assert!(calibrated(0, 16_384, Diagnosis::OutOfRange));
    }
}
