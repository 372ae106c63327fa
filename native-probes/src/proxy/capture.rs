//! The proxy's live capture of its own upstream connections, for Wren (edge). Zangrilli &
//! Lowekamp §4: "Wren produces a series of available bandwidth measurements for each
//! connection established on the proxy machine … gathered for each connection/path between
//! the proxy and each server". Their trace facility (§3.1) timestamps packets in the kernel;
//! here libpcap's kernel timestamps do (§3.1.1's alternative, [`crate::pcap::read::live`]).
//! The analysis (§3.2: trains of evenly spaced departures, ISR against the ACK return rate,
//! the RTT trend, lower bounds) is the passive analyser's ([`crate::pcap::analysis`], Wren on
//! the sending side: the proxy's uploads), run on a thread of its own as the paper's analysis
//! thread (§3.2, §4.3) and fed packet by packet, so the lag is the capture's, not a polling
//! period's.
//!
//! Which direction is the proxy's: the one from the side that opened the connection, which
//! here is always the proxy ([`WrenSide::Initiator`]). Judged from the handshake's timing
//! instead, a path of some tens of microseconds read 12 of 304 upload connections (behind
//! 25 Mbit/s of cross traffic) as captured at their receiver, and a kept-alive connection so
//! read gave Wren no train all its life.
//!
//! Which replica a lower bound belongs to: the flow's remote endpoint (address and port) is
//! a replica's. The filter lets through only TCP to and from the replicas' endpoints; the
//! interface is the one whose address the kernel's route to the replicas uses (`any`, Linux's
//! cooked header, which the decoder reads, when they are reached through several).
//!
//! Bounded: flows expire (idle for [`IDLE_NS`] of capture time, or closed), the analyser
//! keeps no IEPM-BW totals, and samples reach the proxy through a queue of [`QUEUE`]: when
//! the proxy has not taken them, new ones are dropped and counted, never waited for.

use super::metrics::CaptureCounts;
use crate::pcap::analysis::{Analyzer, Config, WrenSide, WrenTotals};
use crate::pcap::read::live::Live;
use nowcast_core::record::Metric;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lower bounds waiting for the proxy, at most.
pub const QUEUE: usize = 4096;
/// A flow with no packet for this long (capture time) is dropped (the upstream pool closes
/// connections idle for 30 s).
pub const IDLE_NS: i64 = 60_000_000_000;
/// Bytes kept of each packet: a cooked header, IP and TCP with options.
const SNAPLEN: i32 = 192;
/// The kernel's ring for the capture: about 30,000 packets' headers, a third of a second of a
/// busy gigabit link (the analyser reads it continuously).
const RING: i32 = 8 << 20;

/// Where upload bandwidth comes from (`--bandwidth-source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Wren when the capture can be opened, else TCP_INFO.
    Auto,
    /// Wren, or an error when the capture cannot be opened.
    Wren,
    TcpInfo,
    Transfer,
}

impl Choice {
    pub const NAMES: [&'static str; 4] = ["auto", "wren", "tcp-info", "transfer"];

    pub fn parse(s: &str) -> Result<Choice, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "wren" => Ok(Choice::Wren),
            "tcp-info" => Ok(Choice::TcpInfo),
            "transfer" => Ok(Choice::Transfer),
            _ => Err(format!(
                "'{s}' is not a bandwidth source (auto, wren, tcp-info, transfer)"
            )),
        }
    }

    /// Whether a capture is attempted.
    pub fn wants_capture(self) -> bool {
        matches!(self, Choice::Auto | Choice::Wren)
    }
}

/// One lower bound on the available bandwidth of the path to a replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub replica: usize,
    /// Capture time of the train's end, ms since 1970.
    pub ts_ms: f64,
    pub mbit: f64,
    /// Bytes of the train.
    pub bytes: u64,
}

/// The capture thread's counts, shared with the proxy's `/metrics`.
#[derive(Default)]
pub struct Counts {
    packets: AtomicU64,
    bounds: AtomicU64,
    queue_dropped: AtomicU64,
    kernel_dropped: AtomicU64,
    /// What Wren made of the uploads, as of the last second.
    wren: Mutex<WrenTotals>,
    /// Set when the thread ended by itself (the capture failed).
    ended: AtomicBool,
}

impl Counts {
    pub fn snapshot(&self) -> CaptureCounts {
        CaptureCounts {
            packets: self.packets.load(Relaxed),
            bounds: self.bounds.load(Relaxed),
            queue_dropped: self.queue_dropped.load(Relaxed),
            kernel_dropped: self.kernel_dropped.load(Relaxed),
            wren: self.wren(),
        }
    }

    /// Whether the capture still runs.
    pub fn running(&self) -> bool {
        !self.ended.load(Relaxed)
    }

    /// Wren's trains and what was left out of them, by why, for an operator asking why there
    /// is no lower bound (updated every second and when the capture stops).
    pub fn wren(&self) -> WrenTotals {
        *self.wren.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running capture.
pub struct Capture {
    /// The interface captured on.
    pub iface: String,
    /// The BPF filter.
    pub filter: String,
    /// The lower bounds, for the proxy to take (see [`Capture::take_samples`]).
    samples: Option<Receiver<Sample>>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The replicas' endpoints: `(replica, "host:port")` resolved now.
pub fn endpoints(replicas: &[(usize, String)]) -> Result<HashMap<SocketAddr, Vec<usize>>, String> {
    let mut map: HashMap<SocketAddr, Vec<usize>> = HashMap::new();
    for (r, authority) in replicas {
        let addrs = authority
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve replica {authority}: {e}"))?;
        for a in addrs {
            let v = map.entry(a).or_default();
            if !v.contains(r) {
                v.push(*r);
            }
        }
    }
    if map.is_empty() {
        return Err("no replica address to capture".into());
    }
    Ok(map)
}

/// Most endpoints (or hosts) the filter names one by one. Past some hundred endpoints the
/// kernel refuses the filter of every endpoint (on loopback: 200 were over
/// `net.core.optmem_max`, 300 over BPF's 4,096 instructions), and libpcap then filters every
/// packet of the interface in user space, after its optimiser took time and memory to compile
/// it before the proxy listened (300 endpoints: 0.5 s and a peak of 104 MB; 1,024: 8 s and
/// 975 MB, where 64 hosts' filter takes nothing to speak of).
const FILTER_TERMS: usize = 64;

/// The BPF filter: TCP to or from any of `eps`; past [`FILTER_TERMS`] endpoints, TCP to or
/// from their hosts (past as many hosts, all TCP). The coarser filters let more flows through
/// to the analyser, whose lower bounds count only where their far end is a replica's endpoint.
pub fn filter(eps: &HashMap<SocketAddr, Vec<usize>>) -> String {
    let sorted = |mut terms: Vec<String>| {
        terms.sort();
        terms.dedup();
        terms
    };
    if eps.len() <= FILTER_TERMS {
        let terms = sorted(
            eps.keys()
                .map(|a| format!("(host {} and port {})", a.ip(), a.port()))
                .collect(),
        );
        return format!("tcp and ({})", terms.join(" or "));
    }
    let hosts = sorted(eps.keys().map(|a| format!("host {}", a.ip())).collect());
    if hosts.len() <= FILTER_TERMS {
        format!("tcp and ({})", hosts.join(" or "))
    } else {
        "tcp".into()
    }
}

/// The interface the kernel sends to `ip` from: the one holding the source address it picks.
fn iface_toward(ip: IpAddr, devices: &[pcap::Device]) -> Option<String> {
    let bind: SocketAddr = match ip {
        IpAddr::V4(_) => "0.0.0.0:0".parse().ok()?,
        IpAddr::V6(_) => "[::]:0".parse().ok()?,
    };
    let s = UdpSocket::bind(bind).ok()?;
    // A UDP connect sends nothing: it asks the routing table.
    s.connect(SocketAddr::new(ip, 9)).ok()?;
    let local = s.local_addr().ok()?.ip();
    devices
        .iter()
        .find(|d| d.addresses.iter().any(|a| a.addr == local))
        .map(|d| d.name.clone())
}

/// The interface(s) toward the replicas: one name, or `any` when they are several or unknown.
pub fn interface(eps: &HashMap<SocketAddr, Vec<usize>>) -> String {
    let devices = pcap::Device::list().unwrap_or_default();
    let mut names: Vec<Option<String>> =
        eps.keys().map(|a| iface_toward(a.ip(), &devices)).collect();
    names.sort();
    names.dedup();
    match names.as_slice() {
        [Some(one)] => one.clone(),
        _ => "any".into(),
    }
}

impl Capture {
    /// Opens the capture (on `iface`, or the interface toward the replicas) and starts its
    /// thread. The error says why it cannot (privilege, interface) in words a user can act on.
    pub fn open(replicas: &[(usize, String)], iface: Option<&str>) -> Result<Capture, String> {
        let eps = endpoints(replicas)?;
        let iface = iface.map_or_else(|| interface(&eps), str::to_string);
        let filter = filter(&eps);
        let live = Live::open_with(&iface, Some(&filter), SNAPLEN, RING)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (counts, stop) = (counts.clone(), stop.clone());
            std::thread::Builder::new()
                .name("nowcast-wren".into())
                .spawn(move || {
                    run(live, eps, tx, &counts, &stop);
                    counts.ended.store(true, Relaxed);
                })
                .map_err(|e| format!("cannot start the capture thread: {e}"))?
        };
        Ok(Capture {
            iface,
            filter,
            samples: Some(rx),
            counts,
            stop,
            thread: Some(thread),
        })
    }

    /// The receiving end of the lower bounds (once).
    pub fn take_samples(&mut self) -> Option<Receiver<Sample>> {
        self.samples.take()
    }

    /// The counts, which stay readable after the capture is stopped.
    pub fn counts(&self) -> Arc<Counts> {
        self.counts.clone()
    }

    /// Stops the thread and waits for it (it looks at the flag at least every millisecond).
    pub fn stop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The analyser's settings for the proxy's own upstream connections.
fn analyzer_config() -> Config {
    Config {
        // The proxy opened every connection the filter lets through: its uploads are the
        // direction from the initiator, whatever the handshake's timing would suggest.
        wren_side: WrenSide::Initiator,
        idle_ns: IDLE_NS,
        linger_ns: 2_000_000_000,
        keep_samples: false,
        keep_trains: false,
        transfers: false,
        ..Config::default()
    }
}

/// How often the kernel's drop count and Wren's totals (a look at every open flow) are
/// published to [`Counts`].
const PUBLISH: Duration = Duration::from_secs(1);

/// The capture thread: frames to the analyser, lower bounds to the queue.
fn run(
    mut live: Live,
    eps: HashMap<SocketAddr, Vec<usize>>,
    tx: SyncSender<Sample>,
    counts: &Counts,
    stop: &AtomicBool,
) {
    let mut an = Analyzer::new(analyzer_config());
    let mut published = Instant::now();
    while !stop.load(Relaxed) {
        match live.next_frame() {
            Ok(Some(frame)) => {
                counts.packets.fetch_add(1, Relaxed);
                let _ = an.frame(
                    frame.number,
                    frame.link,
                    frame.data,
                    frame.orig_len,
                    frame.ts_ns,
                );
                if !send_bounds(&mut an, &eps, &tx, counts) {
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                crate::warn_line!("nowcast proxy: the capture stopped ({e}); bandwidth from the upstream connections' TCP_INFO from now on");
                break;
            }
        }
        // Also while the interface is quiet, so that the last second's trains are told.
        if published.elapsed() >= PUBLISH {
            published = Instant::now();
            counts.kernel_dropped.store(live.stats().dropped, Relaxed);
            *counts.wren.lock().unwrap_or_else(|e| e.into_inner()) = an.wren_totals();
        }
    }
    *counts.wren.lock().unwrap_or_else(|e| e.into_inner()) = an.wren_totals();
}

/// The lower bounds the analyser made, to the proxy; `false` once the proxy is gone.
fn send_bounds(
    an: &mut Analyzer,
    eps: &HashMap<SocketAddr, Vec<usize>>,
    tx: &SyncSender<Sample>,
    counts: &Counts,
) -> bool {
    // Flow reports are not wanted here; records are, but only the lower bounds.
    drop(an.take_finished());
    for rec in an.take_records() {
        if rec.metric != Metric::AvailBwLowerBound {
            continue;
        }
        let (Some(mbit), Ok(to)) = (rec.value, rec.to.parse::<SocketAddr>()) else {
            continue;
        };
        let Some(replicas) = eps.get(&to) else {
            continue;
        };
        counts.bounds.fetch_add(1, Relaxed);
        let bytes = rec
            .probe
            .as_ref()
            .and_then(|p| p.payload_bytes)
            .unwrap_or(0);
        for &replica in replicas {
            let s = Sample {
                replica,
                ts_ms: rec.timestamp_ms,
                mbit,
                bytes,
            };
            match tx.try_send(s) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    counts.queue_dropped.fetch_add(1, Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return false,
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_names_every_replica_endpoint_and_an_address_maps_to_its_replicas() {
        let eps = endpoints(&[
            (0, "10.0.0.2:8080".into()),
            (1, "[fd00::1]:80".into()),
            (2, "10.0.0.2:8080".into()),
        ])
        .unwrap();
        assert_eq!(
            filter(&eps),
            "tcp and ((host 10.0.0.2 and port 8080) or (host fd00::1 and port 80))"
        );
        assert_eq!(eps[&"10.0.0.2:8080".parse().unwrap()], vec![0, 2]);
        assert_eq!(eps[&"[fd00::1]:80".parse().unwrap()], vec![1]);
        // No port: refused before any lookup.
        assert!(endpoints(&[(0, "10.0.0.2".into())]).is_err());
    }

    #[test]
    fn proxy_capture_filter_of_many_endpoints_names_their_hosts_or_all_tcp() {
        let eps = |n: usize, hosts: usize| -> HashMap<SocketAddr, Vec<usize>> {
            (0..n)
                .map(|i| {
                    let ip = std::net::Ipv4Addr::from(0x0a00_0000 + (i % hosts) as u32);
                    (SocketAddr::from((ip, 20_000 + i as u16)), vec![i])
                })
                .collect()
        };
        // Up to 64 endpoints, each named.
        let f = filter(&eps(FILTER_TERMS, 2));
        assert_eq!(f.matches(" and port ").count(), 64, "{f}");
        // More: their hosts, or all TCP when they are many too.
        assert_eq!(filter(&eps(1_024, 1)), "tcp and (host 10.0.0.0)");
        assert_eq!(
            filter(&eps(1_024, 2)),
            "tcp and (host 10.0.0.0 or host 10.0.0.1)"
        );
        assert_eq!(filter(&eps(1_024, 1_024)), "tcp");
    }

    /// An upload connection as the proxy (10.0.0.1) captures it on a path of 40 µs, whose ACK
    /// of the SYN/ACK left `ack3_us` after it: then two uploads 10 ms apart, each of 30
    /// segments 100 µs apart acknowledged 50 µs later, and the connection kept open.
    fn upload(an: &mut Analyzer, ack3_us: i64) {
        use crate::pcap::decode::{flag, linktype, tests::ipv4_tcp};
        let (p, r, ports) = ([10, 0, 0, 1], [10, 0, 0, 2], (40000, 8080));
        let back = (ports.1, ports.0);
        let mut frames = vec![
            (0, ipv4_tcp(p, r, ports, 100, 0, flag::SYN, 0, None)),
            (
                40,
                ipv4_tcp(r, p, back, 500, 101, flag::SYN | flag::ACK, 0, None),
            ),
            (
                40 + ack3_us,
                ipv4_tcp(p, r, ports, 101, 501, flag::ACK, 0, None),
            ),
        ];
        for i in 0..60 {
            let (seq, t) = (
                101 + i * 1000,
                1_000 + i64::from(i) * 100 + i64::from(i / 30) * 10_000,
            );
            frames.push((t, ipv4_tcp(p, r, ports, seq, 501, flag::ACK, 1000, None)));
            frames.push((
                t + 50,
                ipv4_tcp(r, p, back, 501, seq + 1000, flag::ACK, 0, None),
            ));
        }
        frames.sort_by_key(|f| f.0);
        for (i, (us, f)) in frames.iter().enumerate() {
            let ts_ns = 1_700_000_000_000_000_000 + us * 1000;
            an.frame(i as u64 + 1, linktype::ETHERNET, f, f.len() as u32, ts_ns)
                .unwrap();
        }
    }

    #[test]
    fn the_proxy_analyses_its_uploads_however_long_its_handshake_ack_took() {
        let bounds = |an: &mut Analyzer| {
            an.take_records()
                .iter()
                .filter(|r| r.metric == Metric::AvailBwLowerBound)
                .count()
        };
        // Its own ACK of the SYN/ACK leaving 60 µs after it (a busy host) and the round trip
        // taking 40: judged from that timing, the capture is the receiver's, and the uploads,
        // all of a kept-alive connection's life, are not analysed.
        let mut judged = Analyzer::new(Config {
            wren_side: WrenSide::Sender,
            ..analyzer_config()
        });
        upload(&mut judged, 60);
        assert_eq!(bounds(&mut judged), 0);
        assert_eq!(judged.wren_totals().directions, 0);
        // The proxy's capture knows it opened the connection, so the timing does not matter.
        for ack3_us in [5, 60, 5_000] {
            let mut an = Analyzer::new(analyzer_config());
            upload(&mut an, ack3_us);
            assert!(bounds(&mut an) >= 1, "ACK after {ack3_us} µs");
            // The totals count the open connection: its upload analysed, its trains.
            let t = an.wren_totals();
            assert_eq!(t.directions, 1, "{t:?}");
            assert!(t.trains >= 1 && t.lower_bounds >= 1, "{t:?}");
            // Reported (its last train evaluated then), the flow's figures are the totals; the
            // replica's direction is never analysed, whatever it sends.
            an.finish_open(usize::MAX);
            let flow = &an.take_finished()[0];
            let w = flow.directions[0]
                .wren
                .as_ref()
                .expect("the upload analysed");
            let t = an.wren_totals();
            assert_eq!(
                (t.trains, t.lower_bounds),
                (w.trains, w.lower_bounds),
                "{t:?}"
            );
            assert_eq!(flow.directions[1].wren, None);
        }
    }

    #[test]
    fn the_choice_is_one_of_four_names() {
        for n in Choice::NAMES {
            assert!(Choice::parse(n).is_ok());
        }
        assert!(Choice::parse("tcp_info").unwrap_err().contains("tcp-info"));
        assert!(Choice::Auto.wants_capture() && !Choice::TcpInfo.wants_capture());
    }
}
