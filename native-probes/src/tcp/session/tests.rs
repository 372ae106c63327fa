use super::*;
use crate::series::Settings;
use nowcast_core::probed::Overrides;

const MS: Nanos = 1_000_000;

/// What the scripted peer does with an action, and how long it takes.
enum Reply {
    Connected(Nanos),
    Read(Vec<u8>, Nanos),
    Discarded(Nanos),
    TimedOut(Nanos),
    Failed(&'static str),
    Closed,
    Start(Start),
}

fn config(bulk: Vec<Metric>) -> Config {
    Config {
        host: "h:1".into(),
        size: ProbeSize::Fixed(1_000_000),
        sndbuf: Some(4096),
        rcvbuf: None,
        hello: Hello {
            rcvbuf: 8192,
            sndbuf: 0,
        },
        deadline_ms: 60_000.0,
        bulk,
    }
}

fn series(cfg: &Config) -> SeriesSet {
    let settings = Settings {
        source: "nowcast tcp".into(),
        to: cfg.host.clone(),
        transport: Transport::Tcp,
        period_ms: None,
        overrides: Overrides::default(),
    };
    SeriesSet::new(&cfg.metrics(), &settings).unwrap()
}

fn welcome(status: Accepted, max_payload: u64) -> Vec<u8> {
    Welcome {
        status,
        max_payload,
        rcvbuf: 16384,
        sndbuf: 32768,
        retry_after_ms: 0,
    }
    .encode()
    .to_vec()
}

/// Runs session `number` against `peer`, one clock for both; the actions asked for and
/// the records written.
fn run(
    cfg: &Config,
    set: &mut SeriesSet,
    number: u64,
    peer: impl FnMut(&Action) -> Reply,
) -> (Vec<Action>, Vec<Record>, Option<Granted>) {
    let (actions, records, granted, _) = scripted(cfg, set, number, peer);
    (actions, records, granted)
}

/// [`run`], with the session's [`Trouble`] too.
fn scripted(
    cfg: &Config,
    set: &mut SeriesSet,
    number: u64,
    mut peer: impl FnMut(&Action) -> Reply,
) -> (Vec<Action>, Vec<Record>, Option<Granted>, Option<Trouble>) {
    let mut session = Session::new(cfg, set, number, 1.7e12);
    let mut now: Nanos = 1_000;
    let mut actions = Vec::new();
    for _ in 0..100 {
        let action = session.poll(now);
        actions.push(action.clone());
        if action == Action::Done {
            let granted = session.granted();
            let trouble = session.trouble().cloned();
            return (actions, session.into_records(), granted, trouble);
        }
        let started = now;
        match peer(&action) {
            Reply::Connected(dt) => {
                now += dt;
                session.handle(Event::Connected {
                    started,
                    ended: now,
                    local: Some("127.0.0.1:5000".into()),
                    sndbuf: 8192,
                    rcvbuf: 131072,
                });
            }
            Reply::Read(bytes, dt) => {
                now += dt;
                session.handle(Event::Exchanged {
                    started,
                    ended: now,
                    read: &bytes,
                });
            }
            Reply::Discarded(dt) => {
                now += dt;
                session.handle(Event::Discarded { ended: now });
            }
            Reply::TimedOut(dt) => {
                now += dt;
                session.handle(Event::TimedOut { started, at: now });
            }
            Reply::Failed(e) => session.handle(Event::Failed { error: e.into() }),
            Reply::Closed => session.handle(Event::Closed),
            Reply::Start(start) => session.handle(Event::SenderStart(start)),
        }
    }
    panic!("the session did not end");
}

/// A well-behaved server: 1 ms connects, 0.25 ms echoes, 100 ms bulk transfers.
fn good(action: &Action) -> Reply {
    match action {
        Action::Connect { .. } => Reply::Connected(MS),
        Action::Exchange { send, read, .. } if *read == Welcome::LEN => {
            assert_eq!(Hello::decode(send.bytes()).unwrap().rcvbuf, 8192);
            Reply::Read(welcome(Accepted::Ok, 1 << 30), MS / 2)
        }
        Action::Exchange {
            send, payload: 0, ..
        } if send.bytes()[0] == wire::OP_PING => Reply::Read(send.bytes().to_vec(), MS / 4),
        // A download's request is acknowledged at once, its payload takes 100 ms.
        Action::Exchange { payload: 0, .. } => Reply::Read(wire::ACK.to_vec(), 0),
        Action::Exchange { .. } => Reply::Read(wire::ACK.to_vec(), 100 * MS),
        Action::Discard { .. } => Reply::Discarded(100 * MS),
        Action::Quit { .. } => Reply::Closed,
        Action::SenderStart => Reply::Start(Start::Over),
        Action::Done => unreachable!(),
    }
}

#[test]
fn a_session_connects_warms_up_echoes_with_and_without_nagle_and_moves_the_payload() {
    let cfg = config(vec![Metric::BandwidthUp, Metric::BandwidthDown]);
    let mut set = series(&cfg);
    let (actions, records, granted) = run(&cfg, &mut set, 7, good);
    let metrics: Vec<Metric> = records.iter().map(|r| r.metric).collect();
    assert_eq!(metrics, cfg.metrics());
    assert!(
        records.iter().all(|r| r.status == Status::Ok),
        "{records:?}"
    );
    let sends: Vec<(Vec<u8>, u64, bool)> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Exchange {
                send,
                payload,
                nodelay,
                ..
            } => Some((send.bytes().to_vec(), *payload, *nodelay)),
            _ => None,
        })
        .collect();
    assert_eq!(sends[1], (vec![b'P', WARM_UP], 0, true), "the warm-up");
    assert_eq!(sends[2], (vec![b'P', 7], 0, true), "rtt: Nagle off");
    assert_eq!(sends[3], (vec![b'P', 7], 0, false), "rtt_nagle: Nagle on");
    assert_eq!(
        (sends[4].1, sends[4].2),
        (1_000_000, true),
        "the payload up"
    );
    assert_eq!(
        sends[5],
        (
            wire::bulk_header(wire::OP_BULK_DOWN, 1_000_000).to_vec(),
            0,
            true
        )
    );
    assert!(matches!(
        actions[actions.len() - 3],
        Action::Discard { len: 1_000_000, .. }
    ));
    assert!(matches!(actions[actions.len() - 2], Action::Quit { .. }));
    let v = |i: usize| records[i].value.unwrap();
    assert_eq!(
        (v(0), v(1), v(2)),
        (1.0, 0.25, 0.25),
        "connect and echoes, ms"
    );
    // 1 MB in 100 ms less the predicted RTT of 0.25 ms, both ways.
    let want = 8.0 / (99.75e-3);
    assert!(
        (v(3) - want).abs() < 1e-9 && (v(4) - want).abs() < 1e-9,
        "{records:?}"
    );
    let p = records[4].probe.as_ref().unwrap();
    assert_eq!((p.raw_ms, p.rtt_subtracted_ms), (Some(100.0), Some(0.25)));
    assert_eq!(p.sndbuf_bytes, Some(8192));
    assert_eq!(records[0].from.as_deref(), Some("127.0.0.1:5000"));
    assert_eq!(
        records[1].timeout_ms,
        Some(3_000.0),
        "the cold start's initial timeout"
    );
    let g = granted.unwrap();
    assert_eq!(
        (g.sndbuf, g.server_rcvbuf, g.server_sndbuf),
        (8192, 16384, 32768)
    );
}

#[test]
fn an_automatic_size_is_found_by_unrecorded_tries_then_follows_the_forecast() {
    // A 100 Mbit/s path behind a token bucket whose 10 ms burst (125 kB) passes at
    // 10 Gbit/s, 0.5 ms of request: a fixed 64 KiB probe reads the burst.
    let path = |bytes: u64| -> Nanos {
        let burst = bytes.min(125_000) as f64;
        let rest = bytes as f64 - burst;
        ((0.5e-3 + burst / 1.25e9 + rest / 12.5e6) * 1e9) as Nanos
    };
    let peer = |action: &Action| match action {
        Action::Exchange { payload, .. } if *payload > 0 => {
            Reply::Read(wire::ACK.to_vec(), path(*payload))
        }
        other => good(other),
    };
    let mut cfg = config(vec![Metric::BandwidthUp]);
    cfg.size = ProbeSize::Fixed(64 * 1024);
    let mut set = series(&cfg);
    let (_, records, _) = run(&cfg, &mut set, 1, peer);
    assert!(
        records[3].value.unwrap() > 1000.0,
        "64 KiB reads the burst: {records:?}"
    );

    cfg.size = ProbeSize::Auto;
    let mut set = series(&cfg);
    // The payloads sent up, tries included.
    let sizes = |actions: &[Action]| -> Vec<u64> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Exchange { payload, .. } if *payload > 0 => Some(*payload),
                _ => None,
            })
            .collect()
    };
    let (actions, records, _) = run(&cfg, &mut set, 1, peer);
    // 64 KiB reads ~1 Gbit/s, 4 MiB (64-fold at most) ~103 Mbit/s over 325 ms: long
    // enough; the recorded probe moves a quarter second of that rate, 4 MiB.
    assert_eq!(sizes(&actions), [64 << 10, 4 << 20, 4 << 20]);
    let bw: Vec<&Record> = records
        .iter()
        .filter(|r| r.metric == Metric::BandwidthUp)
        .collect();
    assert_eq!(bw.len(), 1, "the tries are not records");
    let v = bw[0].value.unwrap();
    assert!((v - 100.0).abs() < 4.0, "{v}");
    assert_eq!(bw[0].probe.as_ref().unwrap().payload_bytes, Some(4 << 20));
    // The next session sizes from the forecast, with no tries: on its new connection, an
    // untimed warm-up (a quarter second of the forecast, or four round trips of it on a long
    // path), then the timed probe, recorded with its own size.
    let (actions, records, _) = run(&cfg, &mut set, 2, peer);
    assert_eq!(sizes(&actions), [4 << 20, 4 << 20]);
    let bw: Vec<&Record> = records
        .iter()
        .filter(|r| r.metric == Metric::BandwidthUp)
        .collect();
    assert_eq!(bw.len(), 1, "the warm-up is not a record");
    assert_eq!(bw[0].probe.as_ref().unwrap().payload_bytes, Some(4 << 20));
    // A fixed size (JavaNws's probe) has no warm-up.
    cfg.size = ProbeSize::Fixed(64 * 1024);
    let (actions, _, _) = run(&cfg, &mut set, 3, peer);
    assert_eq!(sizes(&actions), [64 << 10]);
}

#[test]
fn a_step_that_times_out_is_recorded_with_the_time_it_took_and_ends_the_session() {
    let cfg = config(vec![Metric::BandwidthUp]);
    let mut set = series(&cfg);
    let (actions, records, _) = run(&cfg, &mut set, 0, |a| match a {
        Action::Exchange { nodelay: false, .. } => Reply::TimedOut(3_000 * MS),
        other => good(other),
    });
    let nagle = &records[2];
    assert_eq!(
        (nagle.metric, nagle.status),
        (Metric::RttNagle, Status::Timeout)
    );
    assert_eq!(nagle.probe.as_ref().unwrap().raw_ms, Some(3_000.0));
    assert_eq!(nagle.timeout_ms, Some(3_000.0));
    // No bandwidth probe after it, but a record saying so.
    assert_eq!(records.len(), 4);
    let bw = &records[3];
    assert_eq!((bw.metric, bw.status), (Metric::BandwidthUp, Status::Error));
    assert_eq!(
        bw.error.as_deref(),
        Some("h:1: bandwidth: not tried because the rtt with Nagle on step (rtt_nagle) failed")
    );
    assert!(!actions.iter().any(|a| matches!(
        a,
        Action::Exchange {
            payload: 1_000_000,
            ..
        }
    )));
    assert_eq!(actions.last(), Some(&Action::Done));
    assert!(!actions.iter().any(|a| matches!(a, Action::Quit { .. })));
    // The hard deadline caps every step's timeout.
    let mut short = config(vec![]);
    short.deadline_ms = 500.0;
    let mut set = series(&short);
    let (actions, records, _) = run(&short, &mut set, 0, |_| Reply::TimedOut(500 * MS));
    assert_eq!(
        actions[0],
        Action::Connect {
            sndbuf: Some(4096),
            rcvbuf: None,
            by: 1_000 + 500 * MS
        }
    );
    assert_eq!(
        (records[0].status, records[0].timeout_ms),
        (Status::Timeout, Some(500.0))
    );
}

#[test]
fn refusals_short_reads_and_wrong_echoes_name_the_host_and_the_step() {
    // Rows: what the peer does at which step, the record's metric and its message.
    type Peer = fn(&Action) -> Reply;
    let rows: [(Peer, Metric, &str); 8] = [
        (
            |a| match a {
                Action::Connect { .. } => Reply::Failed("Connection refused (os error 111)"),
                o => good(o),
            },
            Metric::HandshakeRtt,
            "h:1: connect: Connection refused (os error 111)",
        ),
        (
            |a| match a {
                Action::Exchange { read: Welcome::LEN, .. } => {
                    Reply::Read(welcome(Accepted::Busy, 0), MS)
                }
                o => good(o),
            },
            Metric::HandshakeRtt,
            "h:1: hello: the server is busy (all its sessions are taken)",
        ),
        (
            |a| match a {
                Action::Exchange { read: Welcome::LEN, .. } => {
                    Reply::Read(b"HTTP/1.1 400 Bad Request\r\n".to_vec(), MS)
                }
                o => good(o),
            },
            Metric::HandshakeRtt,
            "h:1: hello: the peer does not speak nowcast's protocol (it answered \"HTTP/1.1 400 Bad Request\")",
        ),
        (
            |a| match a {
                Action::Exchange { send, .. } if send.bytes() == [b'P', WARM_UP] => {
                    Reply::Failed("the server closed the connection")
                }
                o => good(o),
            },
            Metric::Rtt,
            "h:1: rtt warm-up: the server closed the connection",
        ),
        (
            |a| match a {
                Action::Exchange {
                    read: Welcome::LEN, ..
                } => Reply::Read(
                    Welcome::refusal(Accepted::OverBudget, 2_500).encode().to_vec(),
                    MS,
                ),
                o => good(o),
            },
            Metric::HandshakeRtt,
            "h:1: hello: this client's network has used up its byte budget on the server; try again in 2.5 s",
        ),
        (
            |a| match a {
                Action::Exchange { nodelay: true, send, .. } if send.bytes() == [b'P', 0] => {
                    Reply::Read(wire::Refusal::Slow.code().to_vec(), MS)
                }
                o => good(o),
            },
            Metric::Rtt,
            "h:1: rtt: the server ended the session: the session moved data more slowly",
        ),
        (
            |a| match a {
                Action::Exchange { nodelay: false, .. } => Reply::Read(vec![b'P', 9], MS),
                o => good(o),
            },
            Metric::RttNagle,
            "h:1: rtt with Nagle on: the echo differs from the probe",
        ),
        (
            |a| match a {
                Action::Exchange {
                    payload: 1_000_000, ..
                } => Reply::Read(wire::REFUSED.to_vec(), MS),
                o => good(o),
            },
            Metric::BandwidthUp,
            "h:1: bandwidth: the server refused 1000000 bytes: the transfer is above",
        ),
    ];
    for (peer, metric, message) in rows {
        let cfg = config(vec![Metric::BandwidthUp]);
        let mut set = series(&cfg);
        let (_, records, _) = run(&cfg, &mut set, 0, peer);
        let failed = records.iter().find(|r| r.status != Status::Ok).unwrap();
        assert_eq!(
            (failed.metric, failed.status),
            (metric, Status::Error),
            "{message}"
        );
        let error = failed.error.as_deref().unwrap();
        assert!(error.starts_with(message), "{error} for {message}");
        // Every series of the session has its record, those after the failure saying
        // they were not tried.
        let metrics: Vec<Metric> = records.iter().map(|r| r.metric).collect();
        assert_eq!(metrics, cfg.metrics(), "{message}");
        let at = records.iter().position(|r| r.metric == metric).unwrap();
        for r in &records[at + 1..] {
            let e = r.error.as_deref().unwrap();
            assert!(e.contains(": not tried because the "), "{e}");
        }
        for r in &records {
            r.validate().unwrap();
        }
    }
}

#[test]
fn a_refused_upload_leaves_an_error_record_for_the_download_not_tried() {
    let cfg = config(vec![Metric::BandwidthUp, Metric::BandwidthDown]);
    let mut set = series(&cfg);
    for n in 0..2 {
        let (actions, records, _) = run(&cfg, &mut set, n, |a| match a {
            Action::Exchange {
                payload: 1_000_000, ..
            } => Reply::Read(wire::REFUSED.to_vec(), MS),
            o => good(o),
        });
        let metrics: Vec<Metric> = records.iter().map(|r| r.metric).collect();
        assert_eq!(metrics, cfg.metrics());
        let down = &records[4];
        assert_eq!(down.status, Status::Error);
        assert_eq!(
            down.error.as_deref(),
            Some("h:1: bandwidth down: not tried because the bandwidth step (bandwidth_up) failed")
        );
        // The step never ran: no timeout was in force, and its series counts a probe
        // (its sequence number moves on) without a timeout or a value.
        assert_eq!(down.timeout_ms, None);
        assert_eq!(down.seq, Some(n));
        assert_eq!(down.probe.as_ref().unwrap().payload_bytes, Some(1_000_000));
        down.validate().unwrap();
        let request = wire::bulk_header(wire::OP_BULK_DOWN, 1_000_000);
        assert!(!actions
            .iter()
            .any(|a| matches!(a, Action::Exchange { send, .. } if send.bytes() == request)));
    }
    let down = set.get(Metric::BandwidthDown).state();
    assert_eq!((down.count, down.timeouts), (0, 0));
}

#[test]
fn a_probe_above_the_servers_cap_is_refused_without_being_sent() {
    let cfg = config(vec![Metric::BandwidthDown]);
    let mut set = series(&cfg);
    let (actions, records, _) = run(&cfg, &mut set, 0, |a| match a {
        Action::Exchange {
            read: Welcome::LEN, ..
        } => Reply::Read(welcome(Accepted::Ok, 1000), MS),
        o => good(o),
    });
    let last = records.last().unwrap();
    assert_eq!(
        last.error.as_deref(),
        Some("h:1: bandwidth down: 1000000 bytes is above the server's cap of 1000 bytes")
    );
    let bulk = wire::bulk_header(wire::OP_BULK_DOWN, 1_000_000);
    assert!(!actions
        .iter()
        .any(|a| matches!(a, Action::Exchange { send, .. } if send.bytes() == bulk)));
}

#[test]
fn the_series_learn_across_sessions_and_the_rtt_forecast_is_subtracted() {
    let cfg = config(vec![Metric::BandwidthUp]);
    let mut set = series(&cfg);
    for n in 0..3 {
        let (_, records, _) = run(&cfg, &mut set, n, good);
        assert_eq!(records[1].seq, Some(n));
        assert_eq!(records[1].forecast.is_some(), n > 0);
    }
    assert_eq!(set.next(Metric::Rtt).unwrap().value, 0.25);
    assert_eq!(set.get(Metric::BandwidthUp).state().count, 3);
}

/// The session's [`Trouble`] against `peer`, with the bandwidth up series.
fn trouble(peer: impl FnMut(&Action) -> Reply) -> Option<Trouble> {
    let cfg = config(vec![Metric::BandwidthUp]);
    let mut set = series(&cfg);
    scripted(&cfg, &mut set, 0, peer).3
}

/// A peer that answers the hello with `answer` and is otherwise well behaved.
fn answering(answer: &'static [u8]) -> impl FnMut(&Action) -> Reply {
    move |a| match a {
        Action::Exchange {
            read: Welcome::LEN, ..
        } => Reply::Read(answer.to_vec(), MS),
        o => good(o),
    }
}

#[test]
fn a_failed_session_is_one_line_naming_the_cause_and_the_series_not_tried() {
    assert_eq!(trouble(good), None, "a session that measured everything");
    let refused = trouble(|a| match a {
        Action::Connect { .. } => Reply::Failed("Connection refused (os error 111)"),
        o => good(o),
    })
    .unwrap();
    assert_eq!(
        refused.line,
        "h:1: connect: Connection refused (os error 111); rtt, rtt_nagle and bandwidth_up not tried"
    );
    assert_eq!(
        (refused.hint, refused.wrong_server),
        (None, None),
        "a server that is down"
    );
    let nagle = trouble(|a| match a {
        Action::Exchange { nodelay: false, .. } => Reply::TimedOut(3_000 * MS),
        o => good(o),
    })
    .unwrap();
    assert_eq!(
        nagle.line,
        "h:1: rtt_nagle timed out after 3000 ms; bandwidth_up not tried"
    );
    let refused_upload = trouble(|a| match a {
        Action::Exchange {
            payload: 1_000_000, ..
        } => Reply::Read(wire::REFUSED.to_vec(), MS),
        o => good(o),
    })
    .unwrap();
    assert_eq!(
        refused_upload.line,
        "h:1: bandwidth: the server refused 1000000 bytes: the transfer is above the server's payload cap",
        "the last step: nothing else to name"
    );
    // A server that refuses for now (busy, its budget) is not a wrong server.
    let mut busy_welcome = [0u8; Welcome::LEN];
    busy_welcome.copy_from_slice(&Welcome::refusal(Accepted::ClientBusy, 5_000).encode());
    let busy = trouble(|a| match a {
        Action::Exchange {
            read: Welcome::LEN, ..
        } => Reply::Read(busy_welcome.to_vec(), MS),
        o => good(o),
    })
    .unwrap();
    assert!(
        busy.line
            .starts_with("h:1: hello: the server is busy for this client")
            && busy
                .line
                .ends_with("try again in 5.0 s; rtt, rtt_nagle and bandwidth_up not tried"),
        "{}",
        busy.line
    );
    assert_eq!(busy.wrong_server, None);
}

#[test]
fn a_hello_that_times_out_asks_whether_nowcast_serve_is_there() {
    let silent = trouble(|a| match a {
        Action::Exchange {
            read: Welcome::LEN, ..
        } => Reply::TimedOut(3_000 * MS),
        o => good(o),
    })
    .unwrap();
    assert_eq!(
        silent.hinted(),
        "h:1: handshake_rtt timed out after 3000 ms; rtt, rtt_nagle and bandwidth_up not tried. \
         The port accepts connections but did not answer the hello: is `nowcast serve` running there?"
    );
    assert_eq!(
        silent.line,
        "h:1: handshake_rtt timed out after 3000 ms; rtt, rtt_nagle and bandwidth_up not tried"
    );
    // A slow `nowcast serve` times out the same way: it is not taken for a wrong server.
    assert_eq!(silent.wrong_server, None);
    // A connect that times out reached no port: no question about the server.
    let connect = trouble(|a| match a {
        Action::Connect { .. } => Reply::TimedOut(3_000 * MS),
        o => good(o),
    })
    .unwrap();
    assert_eq!(
        connect.hinted(),
        "h:1: handshake_rtt timed out after 3000 ms; rtt, rtt_nagle and bandwidth_up not tried"
    );
}

#[test]
fn an_answer_of_another_protocol_is_quoted_and_marks_a_wrong_server() {
    let cfg = config(vec![Metric::BandwidthUp]);
    let mut set = series(&cfg);
    let (actions, records, _) = run(&cfg, &mut set, 0, answering(b"SSH-2.0-OpenSSH_9.2\r\n"));
    // Only the hello's answer is checked as it comes.
    let expects: Vec<&[u8]> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Exchange { expect, .. } => Some(*expect),
            _ => None,
        })
        .collect();
    assert_eq!(expects, [&b"NWCT\x02"[..]]);
    assert_eq!(
        records[0].error.as_deref(),
        Some(
            "h:1: hello: the peer does not speak nowcast's protocol \
             (it answered \"SSH-2.0-OpenSSH_9.2\")"
        )
    );
    // The records of the steps not tried are as for any failed step.
    assert_eq!(
        records[1].error.as_deref(),
        Some("h:1: rtt: not tried because the hello step (handshake_rtt) failed")
    );
    let t = trouble(answering(b"HTTP/1.0 400 Bad request\r\nServer: x\r\n\r\n")).unwrap();
    assert_eq!(
        t.wrong_server.as_deref(),
        Some(
            "h:1 does not speak nowcast's protocol (it answered \"HTTP/1.0 400 Bad request\"): \
             is `nowcast serve` running there?"
        )
    );
    assert_eq!(
        t.hinted(),
        "h:1: hello: the peer does not speak nowcast's protocol (it answered \"HTTP/1.0 400 \
         Bad request\"); rtt, rtt_nagle and bandwidth_up not tried. Is `nowcast serve` \
         running there?"
    );
    // Three bytes are enough to tell.
    let t = trouble(answering(b"220")).unwrap();
    assert!(t.wrong_server.unwrap().contains("(it answered \"220\")"));
    // Another version of this protocol, or a server that did not understand the hello,
    // would answer every session the same: a wrong server too, without the question.
    let t = trouble(answering(b"NWCT\x03\x00")).unwrap();
    assert_eq!(
        t.wrong_server.as_deref(),
        Some("h:1: hello: welcome: the peer speaks protocol version 3, this build speaks 2")
    );
    let t = trouble(|a| match a {
        Action::Exchange {
            read: Welcome::LEN, ..
        } => Reply::Read(welcome(Accepted::BadHello, 0), MS),
        o => good(o),
    })
    .unwrap();
    assert!(t
        .wrong_server
        .unwrap()
        .contains("did not understand the hello"));
    // The start of a welcome cut short is a server that closed, not a wrong one.
    let t = trouble(answering(b"NWCT\x02\x00")).unwrap();
    assert_eq!(t.wrong_server, None, "{}", t.line);
}

#[test]
fn an_answer_agrees_with_a_message_as_far_as_both_go() {
    assert!(agrees(b"NW", &WELCOME_START) && agrees(b"NWCT\x02\x00", &WELCOME_START));
    assert!(!agrees(b"NX", &WELCOME_START) && !agrees(b"NWCT\x01", &WELCOME_START));
}

/// Behind a long path, BBR's startup outlasts one warm-up, and a probe timed inside it times
/// its overshoot. The warm-ups go on, each twice the last, while the sender says it is in its
/// start: the client's own socket on an upload, the server's answer to a ping of
/// [`wire::START_QUERY`] on a download. A server of an earlier build echoes the query: one
/// warm-up, as before. An answer that is neither ends the session with the step named.
#[test]
fn warm_ups_go_on_while_the_sender_is_in_its_start() {
    // 100 Mbit/s, both ways; 0.6 ms of request.
    let path = |bytes: u64| -> Nanos { ((0.6e-3 + bytes as f64 / 12.5e6) * 1e9) as Nanos };
    let moved = |action: &Action| match action {
        Action::Exchange { payload, .. } if *payload > 0 => {
            Some(Reply::Read(wire::ACK.to_vec(), path(*payload)))
        }
        Action::Discard { len, .. } => Some(Reply::Discarded(path(*len))),
        _ => None,
    };
    let is_query = |a: &Action| {
        matches!(a, Action::Exchange { send, .. }
            if send.bytes() == [wire::OP_PING, wire::START_QUERY])
    };
    let sizes = |actions: &[Action]| -> (Vec<u64>, Vec<u64>) {
        let up = actions.iter().filter_map(|a| match a {
            Action::Exchange { payload, .. } if *payload > 0 => Some(*payload),
            _ => None,
        });
        let down = actions.iter().filter_map(|a| match a {
            Action::Discard { len, .. } => Some(*len),
            _ => None,
        });
        (up.collect(), down.collect())
    };
    let mut cfg = config(vec![Metric::BandwidthUp, Metric::BandwidthDown]);
    cfg.size = ProbeSize::Auto;
    let mut set = series(&cfg);
    // The first session's tries, to a sender that is over its start: the forecasts.
    let (_, records, _) = run(&cfg, &mut set, 1, |a: &Action| moved(a).unwrap_or(good(a)));
    assert!(
        records.iter().all(|r| r.status == Status::Ok),
        "{records:?}"
    );

    // In its start for one warm-up each way, then over.
    let (mut ups, mut downs) = (0, 0);
    let (actions, records, _) = run(&cfg, &mut set, 2, |a: &Action| {
        if let Some(r) = moved(a) {
            return r;
        }
        match a {
            Action::SenderStart => {
                ups += 1;
                Reply::Start(if ups == 1 {
                    Start::Startup
                } else {
                    Start::Over
                })
            }
            a if is_query(a) => {
                downs += 1;
                let start = if downs == 1 { b'B' } else { b'C' };
                Reply::Read(vec![wire::OP_PING, start], MS / 4)
            }
            other => good(other),
        }
    });
    assert!(
        records.iter().all(|r| r.status == Status::Ok),
        "{records:?}"
    );
    // 4 MiB (a quarter second of the forecast: 336 ms here), then about twice that (within
    // the second that all warm-ups may last on a short path), then the timed 4 MiB.
    let (up, down) = sizes(&actions);
    assert_eq!(up, down);
    assert_eq!((up.len(), up[0], up[2]), (3, 4 << 20, 4 << 20), "{up:?}");
    assert!((7_900_000..=8 << 20).contains(&up[1]), "{up:?}");
    assert_eq!((ups, downs), (2, 2));
    for r in &records[3..] {
        assert_eq!(r.probe.as_ref().unwrap().payload_bytes, Some(4 << 20));
        assert!((r.value.unwrap() - 100.0).abs() < 1.0, "{r:?}");
    }

    // A server of an earlier build echoes the query: one warm-up down.
    let (actions, records, _) = run(&cfg, &mut set, 3, |a: &Action| moved(a).unwrap_or(good(a)));
    assert!(
        records.iter().all(|r| r.status == Status::Ok),
        "{records:?}"
    );
    assert_eq!(sizes(&actions).1, [4 << 20, 4 << 20]);

    // An answer that is no start, or a refusal, ends the session at the download's warm-up.
    for (answer, why) in [
        (
            vec![wire::OP_PING, b'x'],
            &"the server's answer [80, 120] is not a sender's start".to_string(),
        ),
        (
            wire::Refusal::Budget.code().to_vec(),
            &format!(
                "the server ended the session: {}",
                wire::Refusal::Budget.reason()
            ),
        ),
    ] {
        let (_, records, _) = run(&cfg, &mut set, 4, |a: &Action| match a {
            a if is_query(a) => Reply::Read(answer.clone(), MS / 4),
            a => moved(a).unwrap_or(good(a)),
        });
        let down = records.last().unwrap();
        assert_eq!(
            (down.metric, down.status),
            (Metric::BandwidthDown, Status::Error)
        );
        assert_eq!(
            down.error.as_deref(),
            Some(format!("h:1: bandwidth down warm-up: {why}").as_str())
        );
    }
}
