//! `ping` output of Linux iputils: the RTT of each reply line (`64 bytes from …: icmp_seq=1
//! ttl=64 time=0.045 ms`), at the time `-D` printed before it (`[1700000000.123456] …`) or,
//! without `-D`, a second apart. The target is the `PING host (address)` line's host.
//! Duplicate replies (`DUP!`) are left out (their probe was counted already), and so are
//! every other message (unreachable, no answer yet) and the statistics at the end.

use super::{number, quote, time_ok, Clock, Out, SeriesInfo, Sink};
use crate::record::Metric;

/// Whether a first data line (trimmed) is ping's.
pub fn is_ping(t: &str) -> bool {
    t.starts_with("PING ") || (t.contains(" bytes from ") && t.contains(" time="))
}

#[derive(Debug, Default)]
pub struct Ping {
    to: Option<String>,
    /// The series, once the first reply was read.
    id: Option<Option<usize>>,
    /// Past the statistics line.
    done: bool,
}

impl Ping {
    pub fn line<S: Sink>(&mut self, text: &str, out: &mut Out<'_, S>) {
        let t = text.trim();
        if let Some(rest) = t.strip_prefix("PING ") {
            self.to = rest.split_whitespace().next().map(str::to_string);
            return;
        }
        if t.starts_with("--- ") && t.ends_with(" ping statistics ---") {
            self.done = true;
        }
        if self.done || !t.contains(" bytes from ") || t.contains("(DUP!)") {
            return;
        }
        // `-D`: [seconds since 1970] before the reply.
        let (time, reply) = match t.strip_prefix('[').and_then(|r| r.split_once(']')) {
            Some((stamp, reply)) => match number(stamp) {
                Some(s) if time_ok(s * 1000.0) => (Some(s * 1000.0), reply),
                _ => {
                    return out.error(
                        Some("timestamp"),
                        format!("'{}' is not a time in seconds", quote(stamp)),
                    )
                }
            },
            None => (None, t),
        };
        let Some((_, after)) = reply.split_once(" time=") else {
            return;
        };
        let mut words = after.split_whitespace();
        let (value, unit) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let Some(v) = number(value) else {
            return out.error(Some("time"), format!("'{}' is not a number", quote(value)));
        };
        if unit != "ms" {
            return out.error(Some("time"), format!("'{}' is not ms", quote(unit)));
        }
        let to = &self.to;
        let id = *self.id.get_or_insert_with(|| {
            let name = match to {
                Some(h) => format!("ping rtt to {h}"),
                None => "ping rtt".into(),
            };
            let clock = if time.is_some() {
                Clock::Epoch
            } else {
                Clock::Count
            };
            out.reg
                .add(SeriesInfo::measured(name, Metric::Rtt, to.clone(), clock))
        });
        out.point(id, time, v, "time");
    }
}
