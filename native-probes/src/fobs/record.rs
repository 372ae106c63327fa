//! A FOBS transfer's records (schema 1.2), the same from `nowcast fobs send --json` and from
//! a campaign's `fobs` runs: one `loss` record per congestion event with a `congestion`
//! object (the classifier's reading of the window's packet-loss signature and what the
//! controller did, Dickens §2.2 and §3), then the transfer's goodput (`throughput`) and the
//! share of its packets lost (`loss`).
//!
//! Deterministic core: the caller gives the timestamps.

use super::sender::{Action, Stats, WindowOutcome};
use crate::classify::Basis;
use nowcast_core::record::{
    ClassifierMetric, Congestion, CongestionAction, Metric, Probe, Record, Status, Transport,
};

/// The records' `source`.
pub const SOURCE: &str = "nowcast fobs";

/// The record of a window that had loss: metric `loss`, value the window's loss rate, and
/// the classifier's reading (`classifying` false: run with the classifier off).
pub fn congestion(
    w: &WindowOutcome,
    timestamp_ms: f64,
    to: &str,
    seq: u64,
    packet: u16,
    classifying: bool,
) -> Record {
    let window_loss = w.lost as f64 / w.packets.max(1) as f64;
    let mut r = Record::new(timestamp_ms, SOURCE, Metric::Loss, window_loss.min(1.0), to);
    r.seq = Some(seq);
    r.probe = Some(Probe {
        transport: Some(Transport::Fobs),
        payload_bytes: Some(u64::from(packet)),
        ..Probe::default()
    });
    r.congestion = Some(Congestion {
        signature_loss_rate: w.verdict.map_or(window_loss, |v| v.loss_rate).min(1.0),
        classifier_metric: match (classifying, w.verdict.map(|v| v.basis)) {
            (false, _) => ClassifierMetric::Off,
            (true, Some(Basis::Complexity)) => ClassifierMetric::Complexity,
            (true, Some(Basis::SuccessProportion)) => ClassifierMetric::SuccessProportion,
            (true, Some(Basis::None) | None) => ClassifierMetric::NotComputed,
        },
        metric_value: w.verdict.and_then(|v| v.value).filter(|v| v.is_finite()),
        p_cpu: w.verdict.map(|v| v.p_cpu),
        action: match w.action {
            Action::Ignored => CongestionAction::NoCorrectiveAction,
            Action::Held => CongestionAction::AlreadyAnswered,
            _ => CongestionAction::RateFromResponse,
        },
        long_term_loss_rate: w.loss_rate.clamp(0.0, 1.0),
        loss_count: w.loss_count,
        rate_mbit_s: w.rate * 8e-6,
    });
    r
}

/// A transfer's `throughput` (goodput, Mbit/s) and `loss` records: `Ok((goodput, loss))` for
/// a stored file, or `Err(why)` for one that did not finish, whose two records have status
/// error, no value and the reason, as a failed probe's.
pub fn transfer(
    timestamp_ms: f64,
    to: &str,
    from: Option<&str>,
    probe: &Probe,
    outcome: Result<(f64, f64), &str>,
) -> [Record; 2] {
    let values = outcome.map_or([None; 2], |(goodput, loss)| [Some(goodput), Some(loss)]);
    let one = |metric: Metric, value: Option<f64>| {
        let mut r = Record::new(timestamp_ms, SOURCE, metric, value.unwrap_or(0.0), to);
        if let Err(why) = outcome {
            r.status = Status::Error;
            r.value = None;
            r.error = Some(why.to_string());
        }
        r.from = from.map(str::to_string);
        r.probe = Some(probe.clone());
        r
    };
    [
        one(Metric::Throughput, values[0]),
        one(Metric::Loss, values[1]),
    ]
}

/// Goodput in Mbit/s: the bytes this transfer sent (not those a resume found at the
/// receiver) over its time.
pub fn goodput_mbit_s(sent_bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        sent_bytes as f64 * 8e-6 / seconds
    } else {
        0.0
    }
}

/// The share of the packets sent that were lost.
pub fn loss(stats: &Stats) -> f64 {
    (stats.lost as f64 / stats.sent.max(1) as f64).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Verdict;
    use nowcast_core::record::LossCount;

    fn window(action: Action, verdict: Option<Verdict>) -> WindowOutcome {
        WindowOutcome {
            window: 3,
            packets: 4096,
            lost: 41,
            verdict,
            action,
            loss_rate: 0.002,
            loss_count: Some(LossCount::Events),
            rate: 125e6,
            rtt: 0.03,
        }
    }

    #[test]
    fn a_congestion_event_is_a_valid_record_that_reads_back() {
        let v = Verdict {
            loss_rate: 0.01,
            basis: Basis::Complexity,
            value: Some(0.41),
            p_cpu: 0.97,
        };
        let r = congestion(
            &window(Action::Ignored, Some(v)),
            1e12,
            "h:1",
            4,
            1400,
            true,
        );
        r.validate().unwrap();
        let c = r.congestion.clone().unwrap();
        assert_eq!(c.classifier_metric, ClassifierMetric::Complexity);
        assert_eq!(c.action, CongestionAction::NoCorrectiveAction);
        assert_eq!(c.rate_mbit_s, 1000.0);
        assert_eq!(c.loss_count, Some(LossCount::Events));
        assert_eq!(r.value, Some(41.0 / 4096.0));
        assert_eq!(Record::parse(&r.to_line()), Ok(r));
        let off = congestion(
            &window(Action::Responded, None),
            1e12,
            "h:1",
            5,
            1400,
            false,
        );
        let c = off.congestion.clone().unwrap();
        assert_eq!(
            (c.classifier_metric, c.action, c.p_cpu),
            (
                ClassifierMetric::Off,
                CongestionAction::RateFromResponse,
                None
            )
        );
        assert_eq!(Record::parse(&off.to_line()), Ok(off));
    }
}
