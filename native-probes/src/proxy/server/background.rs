//! The proxy's work beside the requests: the active probes the policy asks for, Wren's lower
//! bounds from the capture thread into the policy, and the thread that writes the records.

use super::{attempt, Attempt, Head, Outgoing, Shared};
use crate::proxy::body::Up;
use crate::proxy::capture::Sample;
use crate::proxy::policy::Source;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::http::uri::PathAndQuery;
use hyper::Method;
use nowcast_core::record::Record;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The zeros the probes POST (at most 64 MiB): one buffer, made at the first probe and shared
/// by every probe (`Bytes` clones count references), not one for each of the probes in
/// flight, which start by the hundred with many replicas.
pub(super) struct Zeros {
    len: usize,
    made: std::sync::OnceLock<Bytes>,
}

impl Zeros {
    pub(super) fn new(bytes: u64) -> Zeros {
        Zeros {
            len: bytes.min(64 << 20) as usize,
            made: std::sync::OnceLock::new(),
        }
    }

    pub(super) fn get(&self) -> Bytes {
        self.made
            .get_or_init(|| Bytes::from(vec![0u8; self.len]))
            .clone()
    }
}

/// A probe of `replica`, run to the end of its response.
async fn probe(sh: Arc<Shared>, replica: usize) {
    let (method, body) = if sh.probe.bytes > 0 {
        (Method::POST, Up::Bytes(Full::new(sh.probe_zeros.get())))
    } else {
        (Method::GET, Up::Empty)
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static("nowcast-proxy-probe"),
    );
    let head = Head {
        method,
        path_and_query: PathAndQuery::try_from(sh.probe.path.as_str())
            .unwrap_or_else(|_| PathAndQuery::from_static("/")),
        headers,
    };
    let timeout = sh.policy.lock().expect("policy").timeout_ms(replica);
    let out = Outgoing {
        headers: head.headers.clone(),
        body,
    };
    if let Attempt::Ok(r) = attempt(
        &sh,
        replica,
        &head,
        out,
        timeout,
        None,
        &mut None,
        Instant::now(),
    )
    .await
    {
        let mut b = r.into_body();
        while let Some(f) = b.frame().await {
            if f.is_err() {
                break;
            }
        }
    }
}

/// The thread that writes the records as NDJSON lines, and the sender that feeds it. A write
/// that fails is said once on standard error; the records after it are dropped.
pub(super) fn record_writer(
    mut out: Box<dyn Write + Send>,
) -> (std::sync::mpsc::Sender<Record>, std::thread::JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel::<Record>();
    let h = std::thread::spawn(move || {
        while let Ok(r) = rx.recv() {
            let mut ok = writeln!(out, "{}", r.to_line()).is_ok();
            while let Ok(r) = rx.try_recv() {
                ok &= writeln!(out, "{}", r.to_line()).is_ok();
            }
            if !ok || out.flush().is_err() {
                crate::warn_line!(
                    "nowcast proxy: writing records failed; records are no longer written"
                );
                while rx.recv().is_ok() {}
                break;
            }
        }
    });
    (tx, h)
}

/// Wren's lower bounds from the capture thread, into the policy as they come (§4.3's lag:
/// at most one tick here), and their records out.
pub(super) async fn feed_wren(sh: Arc<Shared>, rx: std::sync::mpsc::Receiver<Sample>) {
    loop {
        let recs: Vec<Record> = {
            let now = sh.now_ms();
            let mut p = sh.policy.lock().expect("policy");
            std::iter::from_fn(|| rx.try_recv().ok())
                .filter_map(|s| {
                    let ts = s.ts_ms.min(now);
                    p.bandwidth_sample(s.replica, Source::Wren, ts, s.mbit, s.bytes)
                })
                .collect()
        };
        if let Some(tx) = &sh.records {
            for r in recs {
                let _ = tx.send(r);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Probes: whatever the policy says is due, checked four times a TTL (`tick_ms`: the
/// shortest of the replicas that are probed, those of services that choose by forecasts;
/// `None`: no service does).
pub(super) async fn run_probes(sh: Arc<Shared>, tick_ms: Option<f64>) {
    let Some(tick_ms) = tick_ms else {
        return;
    };
    let tick = Duration::from_secs_f64((tick_ms / 1e3).max(0.02));
    loop {
        let due = {
            let now = sh.now_ms();
            let mut p = sh.policy.lock().expect("policy");
            let due = p.due_probes(now);
            for &r in &due {
                p.probe_started(r, sh.probe.bytes, now);
            }
            due
        };
        for r in due {
            tokio::spawn(probe(sh.clone(), r));
        }
        tokio::time::sleep(tick).await;
    }
}
