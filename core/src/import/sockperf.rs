//! sockperf's `--full-log FILE` (sockperf 3.x, `ping-pong` and `under-load`): a block of
//! parameters and statistics between dashed lines, then one line per sample,
//! `packet, txTime(sec), rxTime(sec), rtt(usec)` with `--full-rtt`, else `latency(usec)`,
//! which sockperf computes as half the round trip: it is doubled back into the RTT. Times are
//! sockperf's own clock (seconds from an origin the log does not give): the series' times
//! are relative.

use super::{number, quote, Clock, Out, SeriesInfo, Sink};
use crate::record::Metric;

/// Whether a first data line (trimmed) is a sockperf log's.
pub fn is_sockperf(t: &str) -> bool {
    (t.len() >= 10 && t.bytes().all(|b| b == b'-')) || is_header(t)
}

fn is_header(t: &str) -> bool {
    t.starts_with("packet,") && t.contains("txTime")
}

#[derive(Debug, Default)]
pub struct Sockperf {
    /// ms per unit of the sample column, and its name, once the header was read.
    column: Option<(f64, String)>,
    id: Option<Option<usize>>,
    /// Past the samples.
    done: bool,
}

impl Sockperf {
    pub fn line<S: Sink>(&mut self, text: &str, out: &mut Out<'_, S>) {
        let t = text.trim();
        let Some((scale, name)) = &self.column else {
            if is_header(t) {
                let name = t.rsplit(',').next().unwrap_or("").trim().to_string();
                let scale = match name.as_str() {
                    "rtt(usec)" => 1e-3,
                    "latency(usec)" => 2e-3,
                    _ => {
                        return out.error(
                            None,
                            format!(
                                "unknown sample column '{}' (rtt(usec) or latency(usec))",
                                quote(&name)
                            ),
                        )
                    }
                };
                self.column = Some((scale, name));
            }
            return;
        };
        if self.done || t.is_empty() {
            return;
        }
        if t.bytes().all(|b| b == b'-') {
            self.done = true;
            return;
        }
        let fields: Vec<&str> = t.split(',').map(str::trim).collect();
        let [_, tx, _, sample] = fields[..] else {
            return out.error(
                None,
                format!("{} field(s) where a sample has 4", fields.len()),
            );
        };
        let Some(tx) = number(tx).filter(|s| s.is_finite() && s.abs() < 1e12) else {
            return out.error(
                Some("txTime(sec)"),
                format!("'{}' is not a time in seconds", quote(tx)),
            );
        };
        let Some(v) = number(sample) else {
            return out.error(Some(name), format!("'{}' is not a number", quote(sample)));
        };
        let id = *self.id.get_or_insert_with(|| {
            out.reg.add(SeriesInfo::measured(
                "sockperf rtt".into(),
                Metric::Rtt,
                None,
                Clock::Relative,
            ))
        });
        let (scale, name) = (*scale, name.clone());
        out.point(id, Some(tx * 1000.0), v * scale, &name);
    }

    /// At the end: why a sockperf log gave nothing, if it did not.
    pub fn finish(&self) -> Option<String> {
        self.column.is_none().then(|| {
            "the sockperf log has no samples (no line 'packet, txTime(sec), rxTime(sec), …': \
             run sockperf with --full-log FILE)"
                .to_string()
        })
    }
}
