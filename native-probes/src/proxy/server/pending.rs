//! An attempt's end (edge): what the server needs to report an attempt to the policy once
//! its response body has been read ([`Pending`]), and the replica's response body on its
//! way down ([`Tracked`]), which reports it at the body's end, at a reset, when the client
//! goes away, or when the replica stops sending mid-body for longer than the attempt's
//! stall limit ([`stall_limit_ms`]).

use super::{Shared, MIN_SAMPLE_BYTES};
use crate::proxy::body::{BoxError, Progress};
use crate::proxy::budget::RouteKey;
use crate::proxy::policy::{stall_limit_ms, Done, Failure, Source};
use crate::proxy::upstream::Conn;
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use nowcast_core::transfer::rate_minus_rtt;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// What is needed to report an attempt once its response body has been read.
pub(super) struct Pending {
    pub(super) sh: Arc<Shared>,
    pub(super) replica: usize,
    pub(super) conn: Option<Conn>,
    pub(super) start: Instant,
    pub(super) head: Instant,
    pub(super) progress: Arc<Progress>,
    pub(super) probe: bool,
    /// A client's request: the route whose sizes it teaches once it completes.
    pub(super) route: Option<RouteKey>,
    pub(super) wait_ms: Option<f64>,
    pub(super) status_failure: bool,
    /// A probe answered with a status other than 2xx: its upload may be unread.
    pub(super) refused_probe: bool,
    pub(super) bytes_down: u64,
    /// Whether the connection may go back to the pool once the response is whole.
    pub(super) reuse: bool,
}

impl Pending {
    pub(super) fn done(&mut self, failure: Option<Failure>, complete: bool) {
        let end = Instant::now();
        let conn = self.conn.take();
        let up = self.progress.bytes.load(Relaxed);
        let now_ms = self.sh.ms_at(end);
        let mut policy = self.sh.policy.lock().expect("policy");
        // TCP_INFO (a system call) only when the policy takes this request's RTT, or its
        // upload's bandwidth (the delivery rate, or the goodput net of the least RTT).
        let ok = complete && failure.is_none();
        let want_info =
            ok && (self.probe || policy.sample_due(self.replica, now_ms) || up >= MIN_SAMPLE_BYTES);
        let info = conn.as_ref().filter(|_| want_info).and_then(Conn::info);
        let handshake = conn.as_ref().and_then(|c| c.handshake_ms);
        let rtt_ms = info.map(|i| i.rtt_ms).filter(|r| *r > 0.0).or(handshake);
        // The path's RTT without the queue this very upload built (the smoothed RTT at the
        // end holds it: 12–19 ms against a 0.1 ms path under a 512 KiB upload through a tbf
        // queue), so that RTT + size ÷ bandwidth does not count that queue twice. Only a
        // kernel's own minimum (Linux ≥ 4.6): the smoothed RTT in its place would.
        let base_rtt_ms = info.map(|i| i.min_rtt_ms).filter(|r| *r > 0.0);
        let down_ms = (end - self.head).as_secs_f64() * 1e3;
        // An upload the replica answered before it ended (an early refusal) was cut short
        // and may have reached no further than the socket buffers: no bandwidth of the path.
        let head_ns = self.sh.ns_at(self.head);
        let done_ns = self.progress.done_ns.load(Relaxed);
        let answered_early = up > 0 && (done_ns == 0 || done_ns > head_ns);
        let bandwidth = if !complete
            || failure.is_some()
            || self.refused_probe
            || (up >= MIN_SAMPLE_BYTES && answered_early)
        {
            None
        } else if up >= MIN_SAMPLE_BYTES && self.sh.tcp_info_rate {
            info.map(|i| i.delivery_mbits)
                .filter(|m| *m > 0.0)
                .map(|m| (m, Source::TcpInfo))
        } else if up >= MIN_SAMPLE_BYTES {
            // The upload's goodput: its bytes over the time from dispatch to the response
            // head, less the connection's handshake and one round trip of the path (the
            // request's own, as JavaNws §2.1.1 takes the RTT off a transfer, when that leaves
            // half the time), so that the policy's base RTT + size ÷ bandwidth gives back
            // this upload's time: the queue the upload built is part of its transfer.
            let head_ms = (self.head - self.start).as_secs_f64() * 1e3;
            rate_minus_rtt(up as f64, head_ms - handshake.unwrap_or(0.0), base_rtt_ms)
                .map(|r| r.mbit_per_s)
                .filter(|m| *m > 0.0)
                .map(|m| (m, Source::Transfer))
        } else if self.bytes_down >= MIN_SAMPLE_BYTES && down_ms > 0.0 {
            Some((
                self.bytes_down as f64 * 8.0 / (down_ms * 1e3),
                Source::Transfer,
            ))
        } else {
            None
        };
        let failure = failure.or(self.status_failure.then_some(Failure::Status));
        // What a request and its response moved, once it is whole: the size of the next
        // requests like it (a failure's bytes are only the part that got through).
        if let (Some(k), true, None) = (&self.route, complete, failure) {
            policy.learn_size(k, up, self.bytes_down);
        }
        let recs = self.sh.account(
            &mut policy,
            &Done {
                replica: self.replica,
                now_ms,
                probe: self.probe,
                bytes_up: up,
                bytes_down: self.bytes_down,
                total_ms: (end - self.start).as_secs_f64() * 1e3,
                wait_ms: if complete { self.wait_ms } else { None },
                rtt_ms: if complete { rtt_ms } else { None },
                base_rtt_ms: if complete { base_rtt_ms } else { None },
                bandwidth,
                failure,
            },
        );
        drop(policy);
        self.sh.write(recs);
        if let (Some(c), None, true, true) = (conn, failure, complete, self.reuse) {
            self.sh.pools[self.replica].put(c, end);
        }
    }
}

/// A replica's response body on its way down, reporting the attempt when it ends.
pub(super) struct Tracked {
    inner: Incoming,
    pending: Option<Pending>,
    stall: StallWatch,
}

/// The clock of a response body's silence ([`stall_limit_ms`]): it runs while the body has
/// been asked for its next part and the replica has sent nothing, and restarts at every
/// frame. hyper asks only when the client's connection takes more (HTTP/1.1's write buffer
/// has room, HTTP/2's stream has window), so a client that stops reading stops the clock.
struct StallWatch {
    limit_ns: u64,
    /// When the wait on the replica began, ns since the proxy's start (0: not waiting).
    since: u64,
    /// Wakes the body at the limit. Made at the first wait and left running between waits:
    /// a timer set for an earlier wait fires sooner than the limit of the current one and
    /// is then set again, so a body that is never silent for long resets no timer per frame.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StallWatch {
    fn new(timeout_ms: f64) -> StallWatch {
        StallWatch {
            limit_ns: (stall_limit_ms(timeout_ms) * 1e6) as u64,
            since: 0,
            timer: None,
        }
    }

    /// Ready once the replica of `p` has sent nothing for the limit.
    fn poll(&mut self, p: &Pending, cx: &mut Context<'_>) -> Poll<()> {
        let mut now = p.sh.ns();
        if self.since == 0 {
            self.since = now;
        }
        loop {
            let deadline = self.since + self.limit_ns;
            if now >= deadline {
                // Bytes the socket took and hyper has not passed on yet (a busy proxy) are
                // the replica still sending: the clock runs from the last of them.
                let ago_ns = p
                    .conn
                    .as_ref()
                    .and_then(Conn::info)
                    .map(|i| i.last_data_recv_ms.saturating_mul(1_000_000));
                match ago_ns {
                    Some(ago) if ago < self.limit_ns => self.since = now - ago.min(now),
                    _ => return Poll::Ready(()),
                }
                continue;
            }
            let at: tokio::time::Instant = (p.sh.origin + Duration::from_nanos(deadline)).into();
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
            if timer.is_elapsed() {
                timer.as_mut().reset(at);
            }
            if std::future::Future::poll(timer.as_mut(), cx).is_pending() {
                return Poll::Pending;
            }
            now = p.sh.ns();
        }
    }
}

/// The error a stalled response ends with, towards its client: hyper closes an HTTP/1.1
/// connection before the body's end (the only sign left once the head went out: the body
/// falls short of its Content-Length, or lacks its last chunk) and resets an HTTP/2 stream.
fn stalled_error() -> BoxError {
    Box::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the replica stopped sending mid-body",
    ))
}

impl Tracked {
    /// `inner`, the replica's response body, reporting `pending` when it ends; its silence
    /// limited by the attempt's timeout ([`stall_limit_ms`]).
    pub(super) fn new(inner: Incoming, pending: Pending, timeout_ms: f64) -> Tracked {
        Tracked {
            inner,
            pending: Some(pending),
            stall: StallWatch::new(timeout_ms),
        }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match r {
            Poll::Ready(Some(Ok(f))) => {
                self.stall.since = 0;
                if let (Some(d), Some(p)) = (f.data_ref(), self.pending.as_mut()) {
                    p.bytes_down += d.len() as u64;
                }
                if self.inner.is_end_stream() {
                    if let Some(mut p) = self.pending.take() {
                        p.done(None, true);
                    }
                }
                Poll::Ready(Some(Ok(f)))
            }
            Poll::Ready(None) => {
                if let Some(mut p) = self.pending.take() {
                    p.done(None, true);
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                if let Some(mut p) = self.pending.take() {
                    p.done(Some(Failure::Reset), false);
                }
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Pending => {
                let Tracked { pending, stall, .. } = &mut *self;
                let Some(p) = pending.as_mut() else {
                    return Poll::Pending;
                };
                if stall.poll(p, cx).is_pending() {
                    return Poll::Pending;
                }
                // Counted against the replica; its connection is closed, not pooled.
                if let Some(c) = &p.conn {
                    c.shut_down();
                }
                if let Some(mut p) = pending.take() {
                    p.done(Some(Failure::Stall), false);
                }
                Poll::Ready(Some(Err(stalled_error())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        // The client went away (or stopped being served) before the end: no sample, and the
        // connection is not reused.
        if let Some(mut p) = self.pending.take() {
            p.done(None, false);
        }
    }
}
