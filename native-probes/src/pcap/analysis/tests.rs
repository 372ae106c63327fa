use super::*;
use crate::pcap::decode::linktype;
use crate::pcap::decode::tests::ipv4_tcp;

/// A scripted connection: handshake, `n` data segments 1 ms apart acknowledged one by one
/// 10 ms later, FIN both ways.
fn connection(an: &mut Analyzer, t0_us: i64, port: u16, n: u32) {
    let c = [10, 0, 0, 1];
    let s = [10, 0, 0, 2];
    let mut frames: Vec<(i64, Vec<u8>)> = Vec::new();
    let at = |us: i64| (t0_us + us) * 1000;
    frames.push((
        at(0),
        ipv4_tcp(c, s, (port, 80), 100, 0, flag::SYN, 0, Some((1, 0))),
    ));
    frames.push((
        at(10_000),
        ipv4_tcp(
            s,
            c,
            (80, port),
            500,
            101,
            flag::SYN | flag::ACK,
            0,
            Some((7, 1)),
        ),
    ));
    frames.push((
        at(10_100),
        ipv4_tcp(c, s, (port, 80), 101, 501, flag::ACK, 0, Some((2, 7))),
    ));
    for i in 0..n {
        let seq = 101 + i * 1000;
        let t = 11_000 + i as i64 * 1000;
        frames.push((
            at(t),
            ipv4_tcp(
                c,
                s,
                (port, 80),
                seq,
                501,
                flag::ACK,
                1000,
                Some((3 + i, 7)),
            ),
        ));
        frames.push((
            at(t + 10_000),
            ipv4_tcp(
                s,
                c,
                (80, port),
                501,
                seq + 1000,
                flag::ACK,
                0,
                Some((8 + i, 3 + i)),
            ),
        ));
    }
    let end = 101 + n * 1000;
    let tf = 30_000 + n as i64 * 1000;
    frames.push((
        at(tf),
        ipv4_tcp(c, s, (port, 80), end, 501, flag::FIN | flag::ACK, 0, None),
    ));
    frames.push((
        at(tf + 10_000),
        ipv4_tcp(
            s,
            c,
            (80, port),
            501,
            end + 1,
            flag::FIN | flag::ACK,
            0,
            None,
        ),
    ));
    frames.sort_by_key(|f| f.0);
    for (i, (t, f)) in frames.iter().enumerate() {
        an.frame(i as u64 + 1, linktype::ETHERNET, f, f.len() as u32, *t)
            .unwrap();
    }
}

#[test]
fn a_resent_syn_does_not_stretch_the_out_of_order_window() {
    // The SYN is lost and sent again 1 s later; the handshake then takes 10 ms. Three
    // segments, and the first sent again 50 ms after the highest with no duplicate ACKs:
    // a retransmission (tshark's too), not out of order (it came after the first RTT).
    let mut an = Analyzer::new(Config::default());
    let (c, s, port) = ([10, 0, 0, 1], [10, 0, 0, 2], 40002);
    let at = |us: i64| (1_700_000_000_000_000 + us) * 1000;
    let mut frames = vec![
        (
            at(0),
            ipv4_tcp(c, s, (port, 80), 100, 0, flag::SYN, 0, None),
        ),
        (
            at(1_000_000),
            ipv4_tcp(c, s, (port, 80), 100, 0, flag::SYN, 0, None),
        ),
        (
            at(1_010_000),
            ipv4_tcp(s, c, (80, port), 500, 101, flag::SYN | flag::ACK, 0, None),
        ),
        (
            at(1_010_100),
            ipv4_tcp(c, s, (port, 80), 101, 501, flag::ACK, 0, None),
        ),
    ];
    for i in 0..3u32 {
        let t = 1_011_000 + i as i64 * 1000;
        frames.push((
            at(t),
            ipv4_tcp(c, s, (port, 80), 101 + i * 1000, 501, flag::ACK, 1000, None),
        ));
    }
    frames.push((
        at(1_063_000),
        ipv4_tcp(c, s, (port, 80), 101, 501, flag::ACK, 1000, None),
    ));
    for (i, (t, f)) in frames.iter().enumerate() {
        an.frame(i as u64 + 1, linktype::ETHERNET, f, f.len() as u32, *t)
            .unwrap();
    }
    an.finish();
    let flows = an.take_finished();
    let up = &flows[0].directions[0];
    // The SYN sent again is a retransmission too, as tshark counts it.
    assert_eq!((up.retransmissions, up.out_of_order), (2, 0), "{up:?}");
}

#[test]
fn a_full_flow_table_makes_room_by_reporting_the_flows_idle_longest() {
    let mut an = Analyzer::new(Config {
        max_flows: 3,
        ..Config::default()
    });
    let t0 = 1_700_000_000_000_000_000i64;
    let syn = |port: u16| {
        ipv4_tcp(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            (port, 80),
            1,
            0,
            flag::SYN,
            0,
            None,
        )
    };
    // Flows 0, 1 and 2 start, flow 0 sends again, and a fourth flow comes: flow 1, idle
    // longest, is reported to make room.
    let packets = [(0, 40000), (1, 40001), (2, 40002), (3, 40000), (4, 40003)];
    for (i, (ms, port)) in packets.iter().enumerate() {
        let f = syn(*port);
        an.frame(
            i as u64 + 1,
            linktype::ETHERNET,
            &f,
            f.len() as u32,
            t0 + ms * 1_000_000,
        )
        .unwrap();
    }
    assert_eq!((an.evicted, an.live_flows()), (1, 3));
    let early = an.take_finished();
    assert_eq!(early.len(), 1);
    assert_eq!((early[0].id, early[0].evicted), (1, true));
    // The rest at the end, oldest first, in batches or at once alike.
    assert_eq!(an.finish_open(2), 2);
    an.finish();
    let rest: Vec<_> = an
        .take_finished()
        .iter()
        .map(|f| (f.id, f.evicted, f.directions[0].packets))
        .collect();
    assert_eq!(rest, vec![(0, false, 2), (2, false, 1), (3, false, 1)]);
}

#[test]
fn a_scripted_connection_gives_its_counts_rtts_trains_and_records() {
    let mut an = Analyzer::new(Config {
        keep_trains: true,
        ..Config::default()
    });
    connection(&mut an, 1_700_000_000_000_000, 40000, 30);
    connection(&mut an, 1_700_000_002_000_000, 40001, 30);
    let transfers = an.finish();
    let flows = an.take_finished();
    assert_eq!(flows.len(), 2);
    let up = &flows[0].directions[0];
    assert_eq!(up.packets, 33);
    assert_eq!(up.new_bytes, 30_000);
    assert_eq!(up.retransmissions, 0);
    let rtt = up.ack_rtt.unwrap();
    assert!((rtt.median - 0.010).abs() < 1e-9, "{rtt:?}");
    assert_eq!(rtt.n, 32, "the SYN, the 30 data segments and the FIN");
    let ts = up.ts_rtt.unwrap();
    assert!((ts.median - 0.010).abs() < 1e-9, "{ts:?}");
    // Wren: 30 packets 1 ms apart (1052 bytes of IP each), flat RTTs.
    let w = up.wren.as_ref().unwrap();
    assert!(w.lower_bounds >= 1, "{w:?}");
    let bound = w.last_bound_mbps.unwrap();
    assert!(
        (bound - 1052.0 * 8.0 / 1e3 / 1e3 * 1e3).abs() < 0.01,
        "{bound}"
    );
    assert!(!an.take_trains().is_empty());
    // Two connections one after the other (the first closed 2 s before the second): two
    // transfers of one stream each, not one of two (core::iepm::group_transfers).
    assert_eq!(transfers.len(), 2);
    assert!(transfers.iter().all(|t| t.streams == 1));
    let records = an.take_records();
    for r in &records {
        r.validate().unwrap();
        let back = Record::parse(&r.to_line()).unwrap();
        assert_eq!(&back, r);
    }
    let metrics: Vec<_> = records
        .iter()
        .map(|r| (r.source.as_str(), r.metric))
        .collect();
    assert!(metrics.contains(&(SOURCE, Metric::AvailBwLowerBound)));
    assert!(metrics.contains(&(SOURCE, Metric::Throughput)));
    assert!(metrics.contains(&(SOURCE_TS, Metric::Rtt)));
    assert!(metrics.contains(&("pcap iepm method 2", Metric::Throughput)));
}

/// A scripted upload for the capture-side tests: `c` connects to `s`, the SYN/ACK is
/// captured `synack_us` after the SYN and `c`'s ACK `ack_us` after that; then `n`
/// segments of `len` bytes 100 µs apart, each acknowledged `acked_us` later, and FINs.
/// `ttl` is what the capture shows of `c`'s packets and of `s`'s.
#[derive(Clone, Copy)]
struct Upload {
    c: [u8; 4],
    s: [u8; 4],
    port: u16,
    t0_us: i64,
    synack_us: i64,
    ack_us: i64,
    acked_us: i64,
    n: u32,
    len: u32,
    ttl: (u8, u8),
}

/// On a LAN (TTLs at 64 both ways), captured at the sender: a 40 µs round trip, the ACK
/// of the SYN/ACK 5 µs after it.
const LAN_UP: Upload = Upload {
    c: [10, 0, 0, 1],
    s: [10, 0, 0, 2],
    port: 40000,
    t0_us: 0,
    synack_us: 40,
    ack_us: 5,
    acked_us: 40,
    n: 30,
    len: 1000,
    ttl: (64, 64),
};

impl Upload {
    fn frames(&self) -> Vec<(i64, Vec<u8>)> {
        let (c, s, port) = (self.c, self.s, self.port);
        let at = |us: i64| (1_700_000_000_000_000 + self.t0_us + us) * 1000;
        let (up, down) = ((port, 80), (80, port));
        let mut frames = vec![
            (at(0), ipv4_tcp(c, s, up, 100, 0, flag::SYN, 0, None), true),
            (
                at(self.synack_us),
                ipv4_tcp(s, c, down, 500, 101, flag::SYN | flag::ACK, 0, None),
                false,
            ),
        ];
        let t1 = self.synack_us + self.ack_us;
        frames.push((
            at(t1),
            ipv4_tcp(c, s, up, 101, 501, flag::ACK, 0, None),
            true,
        ));
        let len = self.len as usize;
        for i in 0..self.n {
            let (seq, t) = (101 + i * self.len, t1 + 50 + i64::from(i) * 100);
            frames.push((
                at(t),
                ipv4_tcp(c, s, up, seq, 501, flag::ACK, len, None),
                true,
            ));
            frames.push((
                at(t + self.acked_us),
                ipv4_tcp(s, c, down, 501, seq + self.len, flag::ACK, 0, None),
                false,
            ));
        }
        let (end, tf) = (101 + self.n * self.len, t1 + 100 + i64::from(self.n) * 100);
        let fin = flag::FIN | flag::ACK;
        frames.push((at(tf), ipv4_tcp(c, s, up, end, 501, fin, 0, None), true));
        frames.push((
            at(tf + self.acked_us),
            ipv4_tcp(s, c, down, 501, end + 1, fin, 0, None),
            false,
        ));
        frames
            .into_iter()
            .map(|(t, mut f, from_c)| {
                // The IPv4 header's TTL, after the 14 bytes of Ethernet.
                f[14 + 8] = if from_c { self.ttl.0 } else { self.ttl.1 };
                (t, f)
            })
            .collect()
    }
}

/// Analyses the uploads' frames merged in time order; returns the flows by id.
fn capture(uploads: &[Upload]) -> (Vec<FlowReport>, Vec<Record>) {
    let mut an = Analyzer::new(Config::default());
    let mut frames: Vec<_> = uploads.iter().flat_map(Upload::frames).collect();
    frames.sort_by_key(|f| f.0);
    for (i, (t, f)) in frames.iter().enumerate() {
        an.frame(i as u64 + 1, linktype::ETHERNET, f, f.len() as u32, *t)
            .unwrap();
    }
    an.finish();
    assert_eq!(
        an.held_trains, 0,
        "every held train went out or was dropped"
    );
    let mut flows = an.take_finished();
    flows.sort_by_key(|f| f.id);
    (flows, an.take_records())
}

fn bounds(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| r.metric == Metric::AvailBwLowerBound)
        .count()
}

#[test]
fn a_short_path_handshake_acked_late_is_the_sender_s_among_its_address_s_flows() {
    // The sender's own ACK of the SYN/ACK left 120 µs after it, the round trip 40: alone,
    // its handshake says the capture is the receiver's, and says so as a guess.
    let late = Upload {
        ack_us: 120,
        ..LAN_UP
    };
    let (flows, records) = capture(&[late]);
    let up = &flows[0].directions[0];
    assert!(up.wren.is_none(), "{up:?}");
    assert_eq!(
        up.wren_off,
        Some("the capture is at the receiver (a guess: its handshake alone, on a short path)")
    );
    assert_eq!(bounds(&records), 0);
    // The same flow first in a capture of six more uploads from its address, to the
    // same server and to others: its address's handshakes say sender, and its trains,
    // held while that was weak, are reported.
    for peers in [[10, 0, 0, 2], [10, 0, 0, 9]] {
        let mut uploads = vec![late];
        for i in 1..=6u8 {
            let s = if i % 2 == 0 { peers } else { [10, 0, 1, i] };
            uploads.push(Upload {
                s,
                port: 40000 + u16::from(i),
                t0_us: i64::from(i) * 10_000,
                ..LAN_UP
            });
        }
        let (flows, records) = capture(&uploads);
        assert_eq!(flows.len(), 7);
        for f in &flows {
            let up = &f.directions[0];
            let w = up
                .wren
                .as_ref()
                .unwrap_or_else(|| panic!("flow {}: {up:?}", f.id));
            assert!(w.lower_bounds >= 1, "flow {}: {w:?}", f.id);
            // The server's direction sends no data: nothing to judge.
            assert_eq!(f.directions[1].wren_off, None);
        }
        assert!(bounds(&records) >= 7);
    }
    // Late in the capture too, judged when its first segment leaves (no hold).
    let mut uploads: Vec<Upload> = (0..6u8)
        .map(|i| Upload {
            port: 40001 + u16::from(i),
            t0_us: i64::from(i) * 10_000,
            ..LAN_UP
        })
        .collect();
    uploads.push(Upload {
        t0_us: 100_000,
        ..late
    });
    let (flows, _) = capture(&uploads);
    assert!(flows.iter().all(|f| f.directions[0].wren.is_some()));
}

#[test]
fn tso_super_segments_are_the_sender_s_by_their_ttls_not_their_size() {
    // Captured at the sender behind a router: its packets at TTL 64, the server's at 62;
    // its segments TSO super-segments; its ACK of the SYN/ACK later than the round trip.
    // One flow, whose handshake alone says receiver: the TTLs say sender.
    let tso = Upload {
        ack_us: 120,
        len: 2920,
        ttl: (64, 62),
        ..LAN_UP
    };
    let (flows, _) = capture(&[tso]);
    let up = &flows[0].directions[0];
    assert_eq!(up.super_segments, 30);
    assert!(up.wren.is_some() && up.wren_off.is_none(), "{up:?}");
    // The same with no handshake captured: analysed, as any such flow is.
    let mut an = Analyzer::new(Config::default());
    let mut frames = tso.frames();
    frames.drain(..3);
    for (i, (t, f)) in frames.iter().enumerate() {
        an.frame(i as u64 + 1, linktype::ETHERNET, f, f.len() as u32, *t)
            .unwrap();
    }
    an.finish();
    let flows = an.take_finished();
    assert!(!flows[0].handshake);
    assert!(flows[0].directions[0].wren.is_some());
}

#[test]
fn a_receiver_s_capture_is_the_receiver_s_with_super_segments_and_early_guesses() {
    // At the receiver (10.0.0.2) on a long path behind routers: the client's data arrives
    // at TTL 61 merged by GRO into super-segments, the receiver's own packets at 64; its
    // SYN/ACK leaves 30 µs after the SYN, the client's ACK comes 30 ms later; its ACKs
    // follow each segment by 20 µs.
    let long = Upload {
        synack_us: 30,
        ack_us: 30_000,
        acked_us: 20,
        len: 2920,
        ttl: (61, 64),
        ..LAN_UP
    };
    let (flows, records) = capture(&[long]);
    let up = &flows[0].directions[0];
    assert_eq!(up.super_segments, 30);
    assert!(up.wren.is_none(), "{up:?}");
    assert_eq!(
        up.wren_off,
        Some("the capture is at the receiver (IP TTLs)")
    );
    assert_eq!(bounds(&records), 0);
    // The TTLs outweigh the timing: the same with the SYN/ACK leaving late.
    let slow = Upload {
        synack_us: 50_000,
        ..long
    };
    let (flows, _) = capture(&[slow]);
    assert!(flows[0].directions[0].wren.is_none());
    // Without TTLs (a LAN) on a long path, the handshake itself is clear.
    let (flows, _) = capture(&[Upload {
        ttl: (64, 64),
        ..long
    }]);
    assert_eq!(
        flows[0].directions[0].wren_off,
        Some("the capture is at the receiver (its handshake)")
    );
    // On a short LAN path, the first upload's SYN/ACK held up 100 µs by the receiver's
    // own stack (its handshake says sender), with nine more uploads answered at once
    // from other clients: every upload left out, the first one's trains (made while it
    // was a guess) dropped unreported.
    let first = Upload {
        synack_us: 100,
        ack_us: 40,
        acked_us: 20,
        ..LAN_UP
    };
    let mut uploads = vec![first];
    for i in 1..=9u8 {
        uploads.push(Upload {
            c: [10, 0, 0, 10 + i],
            port: 40000 + u16::from(i),
            t0_us: i64::from(i) * 10_000,
            synack_us: 5,
            ..first
        });
    }
    let (flows, records) = capture(&uploads);
    for f in &flows {
        let up = &f.directions[0];
        assert!(up.wren.is_none(), "flow {}: {up:?}", f.id);
        assert_eq!(
            up.wren_off,
            Some("the capture is at the receiver (its hosts' handshakes)"),
            "flow {}",
            f.id
        );
    }
    assert_eq!(bounds(&records), 0);
}

#[test]
fn an_address_s_ttls_decide_its_lan_flows_and_outweigh_their_handshakes() {
    // The capture's host talks to a server behind a router (TTLs say it is local), then
    // to two on its LAN, each handshake acked late (each alone says receiver).
    let routed = Upload {
        ttl: (64, 60),
        ..LAN_UP
    };
    let lan = |i: u8| Upload {
        s: [10, 0, 0, 20 + i],
        port: 41000 + u16::from(i),
        t0_us: 10_000 * i64::from(i),
        ack_us: 200,
        ..LAN_UP
    };
    let (flows, _) = capture(&[routed, lan(1), lan(2)]);
    for f in &flows {
        assert!(f.directions[0].wren.is_some(), "flow {}", f.id);
    }
}

#[test]
fn a_weak_judgement_holds_a_bounded_number_of_trains() {
    // One long upload on a LAN, its handshake a guess: its trains are held up to
    // HELD_PER_DIRECTION, then it is judged on what there is, here the sender (its
    // handshake alone), and every train is reported, the held ones first.
    let long = Upload { n: 6000, ..LAN_UP };
    let mut an = Analyzer::new(Config {
        keep_trains: true,
        ..Config::default()
    });
    let frames = long.frames();
    let mut most_held = 0;
    for (i, (t, f)) in frames.iter().enumerate() {
        an.frame(i as u64 + 1, linktype::ETHERNET, f, f.len() as u32, *t)
            .unwrap();
        most_held = most_held.max(an.held_trains);
    }
    an.finish();
    assert!(most_held > HELD_PER_DIRECTION / 2 && most_held <= HELD_PER_DIRECTION);
    assert_eq!(an.held_trains, 0);
    let trains = an.take_trains();
    let w = an.take_finished()[0].directions[0].wren.clone().unwrap();
    assert!(w.trains as usize > HELD_PER_DIRECTION, "{w:?}");
    assert_eq!(trains.len() as u64, w.trains);
    assert!(trains.windows(2).all(|t| t[0].train.end <= t[1].train.end));
}

#[test]
fn the_addresses_kept_are_bounded_and_the_busiest_stay() {
    let flow = |peer: u32, near_a: bool| {
        let mut f = Flow {
            id: 0,
            a: Endpoint {
                addr: Addr::v4([10, 0, 0, 1]),
                port: 40000,
            },
            b: Endpoint {
                addr: Addr::v4((0x0b00_0000 + peer).to_be_bytes()),
                port: 80,
            },
            halves: Default::default(),
            start_ns: 0,
            last_ns: 0,
            syn_ns: Some(0),
            synack_ns: Some(40_000),
            ack3_ns: Some(45_000),
            fin: [false; 2],
            rst: false,
            ttl: [ttl::INITIAL; 2],
            side: None,
            wren: [WrenState::Undecided, WrenState::Undecided],
        };
        if !near_a {
            f.ack3_ns = Some(200_000);
        }
        f
    };
    let mut sides = Sides::default();
    // One handshake in 20 flips, each with a new peer, past the table's size.
    for peer in 0..(MAX_ADDRESSES as u32 + 1000) {
        sides.count(&flow(peer, peer % 20 != 0).handshake());
        assert!(sides.addrs.len() <= MAX_ADDRESSES);
    }
    let local = sides.addrs[&Addr::v4([10, 0, 0, 1])];
    assert!(local.timing > 0 && local.handshakes > MAX_ADDRESSES as u32);
    // A new flipped handshake of the local address is judged by the others, firmly.
    let mut f = flow(u32::MAX / 2, false);
    sides.count(&f.handshake());
    f.side = sides.judge(&f.handshake());
    let j = f.side.unwrap();
    assert!(
        j.near_a && j.firm && j.basis == crate::pcap::sides::Basis::Handshakes,
        "{j:?}"
    );
}
