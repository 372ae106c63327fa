//! Fuzzing of the FOBS decoders and the receiver's core, as bounded property tests: the
//! corpus in `tests/corpus/fobs.txt`, random bytes and mutations of valid datagrams and
//! frames. Nothing may panic; a datagram that is not exactly valid is never stored; a
//! forged or malformed one is counted.
//!
//! `NOWCAST_FUZZ_CASES` sets the cases per property (default 1024); the benchmark runs more.

mod common;

use common::corpus;
use nowcast::fobs::receiver::{Config, Event, Receiver};
use nowcast::fobs::wire::{Control, DataHeader, Framer, Hello, HASH_LEN, TOKEN_LEN};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("NOWCAST_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    }
}

/// A receiver that accepted a 10,000-byte file in 1,000-byte packets, windows of 64.
fn receiver() -> Receiver {
    let mut rx = Receiver::new(
        Config {
            token: [1; TOKEN_LEN],
            max_size: 1 << 20,
            max_rate: 1e12,
            grace_ns: 0,
            idle_ns: u64::MAX / 4,
            session: 0x5eed,
            udp_port: 9,
        },
        0,
    );
    rx.handle_control(
        0,
        Control::Hello(Hello {
            token: [1; TOKEN_LEN],
            size: 10_000,
            packet: 1000,
            window: 64,
            resume: false,
            hash: [0; HASH_LEN],
            name: "x".into(),
        }),
    );
    assert!(matches!(rx.poll_event(), Some(Event::Open { .. })));
    rx.opened(0, &[]);
    rx
}

#[test]
fn the_corpus_meets_its_expectations() {
    for case in corpus::load("fobs.txt") {
        let mut rx = receiver();
        match case.expect.as_str() {
            "store" | "drop" => {
                let stored = rx.handle_datagram(1, true, &case.bytes).is_some();
                assert_eq!(stored, case.expect == "store", "{}", case.name);
                if !stored {
                    assert_eq!(rx.drops.total(), 1, "{}: counted", case.name);
                }
            }
            "ok" | "close" => {
                let mut f = Framer::with_limit(4096);
                f.push(&case.bytes);
                match f.next_message() {
                    Ok(Some(m)) => rx.handle_control(1, m),
                    Ok(None) => panic!("{}: incomplete frame", case.name),
                    Err(_) => rx.drops.control += 1,
                }
                let closed = rx.drops.control > 0;
                assert_eq!(closed, case.expect == "close", "{}", case.name);
            }
            other => panic!("{}: unknown expectation {other}", case.name),
        }
    }
}

fn valid_datagram(seq: u64) -> Vec<u8> {
    let mut d = vec![0u8; 28 + 1000];
    DataHeader {
        session: 0x5eed,
        window: 0,
        index: (seq % 64) as u32,
        seq,
    }
    .encode(&mut d);
    d
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_datagrams_never_panic_and_are_never_stored(bytes in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let mut rx = receiver();
        let stored = rx.handle_datagram(1, true, &bytes);
        // Storing needs the session number, which random bytes almost never carry.
        if stored.is_some() {
            prop_assert_eq!(&bytes[4..12], &0x5eedu64.to_le_bytes());
        }
    }

    #[test]
    fn mutated_datagrams_are_stored_only_when_exactly_valid(
        seq in 0u64..10, at in 0usize..1100, byte in any::<u8>(), cut in 0usize..1100,
    ) {
        let mut d = valid_datagram(seq);
        if at < d.len() {
            d[at] = byte;
        }
        d.truncate(cut.max(1).min(d.len()));
        let mut rx = receiver();
        if let Some(s) = rx.handle_datagram(1, true, &d) {
            let h = DataHeader::decode(&d).unwrap();
            prop_assert_eq!(h.session, 0x5eed);
            prop_assert!(h.seq < 10);
            prop_assert_eq!(s.end - s.start, 1000);
            prop_assert_eq!(s.end, d.len());
        } else {
            prop_assert_eq!(rx.drops.total(), 1);
        }
    }

    #[test]
    fn random_control_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut f = Framer::default();
        f.push(&bytes);
        let mut rx = receiver();
        while let Ok(Some(m)) = f.next_message() {
            rx.handle_control(1, m);
        }
        for kind in 0..8u8 {
            let _ = Control::decode(kind, &bytes);
        }
    }

    #[test]
    fn control_messages_round_trip(window in any::<u32>(), count in 0u32..=65_536, span in any::<u64>()) {
        let m = Control::Ack(nowcast::fobs::wire::Ack {
            window,
            count,
            span_ns: span,
            held_ns: 7,
            bitmap: vec![0xa5; (count as usize).div_ceil(8)],
        });
        let mut b = Vec::new();
        m.encode(&mut b);
        let mut f = Framer::default();
        f.push(&b);
        prop_assert_eq!(f.next_message().unwrap(), Some(m));
    }
}
