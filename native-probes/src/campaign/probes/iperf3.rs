//! A campaign's `iperf3` run: `iperf3 -c HOST -p PORT -J -t DURATION [-P STREAMS] [-w
//! WINDOW] [-R]`, IEPM-BW's iperf TCP throughput (§II.A), with the window and streams of
//! §III.D in the record (`probe.sndbuf_bytes`, `probe.streams`).

use super::external::{self, Cancel};
use crate::campaign::plan::{Iperf3Params, Target};
use crate::series::SeriesSet;
use crate::when::Ms;
use nowcast_core::probed::Outcome;
use nowcast_core::record::{Metric, Probe, Record, Transport};

pub fn run(
    p: &Iperf3Params,
    target: &Target,
    bound_ms: Ms,
    set: &mut SeriesSet,
    cancel: &Cancel,
) -> Vec<Record> {
    let started = crate::clock::wall_ms();
    let mut args = vec![
        "-c".to_string(),
        target.host.clone(),
        "-p".into(),
        p.port.unwrap_or(target.iperf3_port).to_string(),
        "-J".into(),
        "-t".into(),
        p.duration_s.to_string(),
        "-P".into(),
        p.streams.to_string(),
        "--connect-timeout".into(),
        (bound_ms.clamp(1000, 10_000)).to_string(),
    ];
    if let Some(w) = p.window {
        args.extend(["-w".into(), w.to_string()]);
    }
    if p.reverse {
        args.push("-R".into());
    }
    let result = external::run(&p.program, &args, cancel).and_then(|out| {
        parse(&out.stdout).map_err(|e| {
            if out.stderr.trim().is_empty() {
                e
            } else {
                format!("{e}; {}", out.stderr.trim())
            }
        })
    });
    let probe = Probe {
        transport: Some(Transport::Tcp),
        streams: Some(p.streams),
        sndbuf_bytes: p.window,
        payload_bytes: result.as_ref().ok().map(|r| r.bytes),
        raw_ms: result.as_ref().ok().map(|r| r.seconds * 1e3),
        ..Probe::default()
    };
    super::observe(
        set,
        &[Metric::Throughput],
        started,
        bound_ms,
        probe,
        result.map(|r| {
            vec![(
                Metric::Throughput,
                Outcome::Measured {
                    value: r.mbit_s,
                    duration_ms: Some(r.seconds * 1e3),
                },
            )]
        }),
    )
}

/// What an iperf3 `-J` report says.
#[derive(Clone, Debug, PartialEq)]
pub struct Iperf3Result {
    /// Throughput received, Mbit/s (the receiver's figure, as iperf3 prints it last).
    pub mbit_s: f64,
    pub bytes: u64,
    pub seconds: f64,
}

/// Parses `iperf3 -J` output: `end.sum_received` (TCP), else `end.sum`; an `error` field is
/// the tool's own failure message.
pub fn parse(json: &str) -> Result<Iperf3Result, String> {
    let v: serde_json::Value = serde_json::from_str(json.trim()).map_err(|e| {
        let head: String = json.trim().chars().take(80).collect();
        format!("iperf3 gave no JSON report ({e}): {head}")
    })?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("iperf3: {e}"));
    }
    let end = v.get("end").ok_or("iperf3: the report has no 'end'")?;
    let sum = end
        .get("sum_received")
        .or_else(|| end.get("sum"))
        .ok_or("iperf3: the report has no sum_received or sum")?;
    let num = |k: &str| sum.get(k).and_then(|x| x.as_f64());
    let bps = num("bits_per_second").ok_or("iperf3: no bits_per_second")?;
    let seconds = num("seconds").unwrap_or(0.0);
    let bytes = num("bytes").unwrap_or(0.0);
    if !(bps.is_finite() && bps >= 0.0) {
        return Err(format!("iperf3: bits_per_second {bps}"));
    }
    Ok(Iperf3Result {
        mbit_s: bps / 1e6,
        bytes: bytes as u64,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_report_and_its_errors() {
        let ok = r#"{"start":{},"intervals":[],"end":{"sum_sent":{"seconds":10.0,"bytes":1250000000,"bits_per_second":1.0e9},"sum_received":{"seconds":10.02,"bytes":1240000000,"bits_per_second":990000000.0}}}"#;
        assert_eq!(
            parse(ok),
            Ok(Iperf3Result {
                mbit_s: 990.0,
                bytes: 1_240_000_000,
                seconds: 10.02
            })
        );
        let refused = r#"{"start":{},"intervals":[],"end":{},"error":"error - unable to connect to server: Connection refused"}"#;
        assert!(parse(refused).unwrap_err().contains("Connection refused"));
        assert!(parse("iperf3: parameter error")
            .unwrap_err()
            .contains("no JSON"));
    }
}
