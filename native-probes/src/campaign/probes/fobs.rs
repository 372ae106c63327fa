//! A campaign's `fobs` run: one FOBS transfer (Dickens §2–5; the library's
//! [`crate::fobs::io::send`], as `nowcast fobs send`) of `size` bytes to the target's
//! `nowcast fobs recv`. Its records are FOBS's own ([`crate::fobs::record`]): the goodput
//! (`throughput`) and the share of packets lost (`loss`) through the job's series, then one
//! `loss` record with a `congestion` object per congestion event.
//!
//! The bytes sent are a sparse file of zeros made for the run and removed after it (FOBS
//! neither compresses nor looks at them). The transfer stops itself shortly before its
//! bound, so that the run ends as a failure naming the bound rather than being killed; each
//! run stores under a name of its own (`nowcast-campaign-PROBE-TIME-N`), so that a receiver
//! that keeps files never refuses a run's name, and one started with `--discard` keeps none.

use crate::campaign::plan::{FobsParams, Kind, Target};
use crate::classify::model::Model;
use crate::classify::Classifier;
use crate::fobs::congestion::HighSpeed;
use crate::fobs::io::{self, SendUpdate};
use crate::fobs::record;
use crate::fobs::sender::{self, Event, Sender};
use crate::fobs::wire::{parse_token, Done, Hello};
use crate::net::resolve;
use crate::series::SeriesSet;
use crate::stop::Stop;
use crate::when::Ms;
use nowcast_core::probed::Outcome;
use nowcast_core::record::{Metric, Probe, Record, Transport};
use std::fs::File;
use std::time::Duration;

/// How long before its bound a transfer stops itself, at most (a tenth of short bounds).
const MARGIN_MS: Ms = 1_000;

pub fn run(
    p: &FobsParams,
    target: &Target,
    bound_ms: Ms,
    set: &mut SeriesSet,
    index: u64,
) -> Vec<Record> {
    let started_wall = crate::clock::wall_ms();
    let to = target.record_to(&Kind::Fobs(p.clone()));
    let mut events = Vec::new();
    let result = transfer(p, target, &to, bound_ms, index, &mut events);
    let probe = Probe {
        transport: Some(Transport::Fobs),
        payload_bytes: Some(p.size),
        ..Probe::default()
    };
    let mut records = super::observe(
        set,
        &[Metric::Throughput, Metric::Loss],
        started_wall,
        bound_ms,
        probe,
        result.map(|(goodput, loss, seconds)| {
            let duration_ms = Some(seconds * 1e3);
            vec![
                (
                    Metric::Throughput,
                    Outcome::Measured {
                        value: goodput,
                        duration_ms,
                    },
                ),
                (
                    Metric::Loss,
                    Outcome::Measured {
                        value: loss,
                        duration_ms,
                    },
                ),
            ]
        }),
    );
    records.extend(events);
    records
}

/// The sparse file of zeros a run sends, open and already unlinked: nothing is left behind
/// however the campaign ends (a SIGKILL too).
fn payload(size: u64, index: u64) -> std::io::Result<File> {
    let path = std::env::temp_dir().join(format!(
        "nowcast-campaign-fobs-{}-{index}-{}",
        std::process::id(),
        io::random_u64()
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    file.set_len(size)?;
    Ok(file)
}

/// One transfer: (goodput Mbit/s, loss, seconds), or why it failed; congestion events go to
/// `events` as they come.
fn transfer(
    p: &FobsParams,
    target: &Target,
    to: &str,
    bound_ms: Ms,
    index: u64,
    events: &mut Vec<Record>,
) -> Result<(f64, f64, f64), String> {
    let token = target
        .fobs_token
        .as_deref()
        .or(p.token.as_deref())
        .ok_or("no token for the target's `nowcast fobs recv`")?;
    let token = parse_token(token)?;
    let port = p.port.unwrap_or(target.fobs_port);
    let addr = resolve(&target.address(port), port)?.addrs[0];
    let file =
        payload(p.size, index).map_err(|e| format!("a file of {} bytes to send: {e}", p.size))?;
    let hash = io::hash_open(&file).map_err(|e| format!("hashing what to send: {e}"))?;
    let hello = Hello {
        token,
        size: p.size,
        packet: p.packet,
        window: p.window,
        resume: false,
        hash,
        name: format!(
            "nowcast-campaign-{}-{}-{index}",
            to.replace([':', '[', ']', '/'], "_"),
            crate::clock::wall_ms() as u64
        ),
    };
    let classifier = p.classifier.then(|| Classifier::new(Model::shipped()));
    let sender = Sender::new(
        sender::Config {
            hello,
            initial_rate: p.rate,
            signature_packets: 0,
        },
        Box::new(HighSpeed::new(p.rate, p.max_rate, f64::from(p.packet))),
        classifier,
    );
    // The transfer's own deadline, a little before the runner's kill.
    let stop = Stop::new();
    let finished = Stop::new();
    let margin = MARGIN_MS.min(bound_ms / 10);
    let deadline = Duration::from_millis(bound_ms.saturating_sub(margin).max(1) as u64);
    let watchdog = {
        let (stop, finished) = (stop.clone(), finished.clone());
        std::thread::Builder::new()
            .name("fobs-deadline".into())
            .spawn(move || {
                if !finished.wait_timeout(deadline) {
                    stop.trigger();
                }
            })
            .map_err(|e| format!("starting the transfer's deadline: {e}"))?
    };
    let mut seq = 0u64;
    let mut delivered = 0u64;
    let summary = io::send(sender, &file, addr, &stop, &mut |u| match u {
        SendUpdate::Progress { delivered: d, .. } => delivered = d,
        SendUpdate::Event(Event::Window(w)) => {
            if w.lost > 0 {
                events.push(record::congestion(
                    w,
                    crate::clock::wall_ms(),
                    to,
                    seq,
                    p.packet,
                    p.classifier,
                ));
                seq += 1;
            }
        }
        SendUpdate::Event(_) => {}
    });
    finished.trigger();
    let _ = watchdog.join();
    let summary = summary.map_err(|e| format!("{to}: {e}"))?;
    if let Some(r) = summary.refused {
        return Err(format!("{to}: refused: {}", r.reason()));
    }
    match (summary.done, &summary.failed) {
        (Some(Done::Stored), _) => {}
        (Some(Done::HashMismatch), _) => {
            return Err("the receiver's copy did not match the hash".into())
        }
        (Some(Done::StorageFailed), _) => return Err("the receiver could not store it".into()),
        (Some(Done::Abandoned), _) => return Err("the receiver abandoned the transfer".into()),
        (Some(Done::Stopped), _) => return Err("the receiver was stopped by its operator".into()),
        (Some(d @ Done::Other(_)), _) => return Err(format!("the transfer was {d}")),
        (None, Some(_)) if stop.is_set() => {
            return Err(format!(
                "stopped at the bound ({} ms) after {} of {} bytes",
                deadline.as_millis(),
                delivered.saturating_mul(u64::from(p.packet)).min(p.size),
                p.size
            ))
        }
        (None, Some(f)) => return Err(format!("{to}: {f}")),
        (None, None) => return Err(format!("{to}: the transfer did not finish")),
    }
    Ok((
        record::goodput_mbit_s(summary.bytes - summary.held_bytes, summary.seconds),
        record::loss(&summary.stats),
        summary.seconds,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_payload_is_never_a_file_on_disk_and_hashes_as_one() {
        let file = payload(3 << 20, 7).unwrap();
        let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        // Unlinked as soon as made: a campaign killed mid-transfer leaves nothing behind.
        assert!(link.to_string_lossy().ends_with(" (deleted)"), "{link:?}");
        let hash = io::hash_open(&file).unwrap();
        let on_disk = std::env::temp_dir().join(format!("nowcast-payload-{}", std::process::id()));
        std::fs::File::create(&on_disk)
            .unwrap()
            .set_len(3 << 20)
            .unwrap();
        let want = io::hash_file(&on_disk);
        std::fs::remove_file(&on_disk).unwrap();
        assert_eq!(hash, want.unwrap());
    }
}
