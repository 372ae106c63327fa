//! The bodies that pass through the proxy (edge): a request's on its way to a replica,
//! counted as it goes so that the server knows when its upload ended ([`Progress`]), and a
//! response's on its way back to the client. The server makes them, the upstream
//! connections carry them. Each is one of a few kinds, told apart by an enum rather than
//! boxed: a request moves two of them, and a box each was two allocations a request.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A request body on its way to a replica.
pub type UpBody = Counting<Up>;

/// What a request to a replica carries.
pub enum Up {
    /// The client's request body, as it comes.
    Client(Incoming),
    /// Bytes the proxy sends (a probe's upload).
    Bytes(Full<Bytes>),
    /// Nothing (a retry of a request without a body, a probe's GET).
    Empty,
}

impl Body for Up {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Up::Client(b) => Pin::new(b).poll_frame(cx).map_err(BoxError::from),
            Up::Bytes(b) => Pin::new(b).poll_frame(cx).map_err(|e| match e {}),
            Up::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Up::Client(b) => b.is_end_stream(),
            Up::Bytes(b) => b.is_end_stream(),
            Up::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Up::Client(b) => b.size_hint(),
            Up::Bytes(b) => b.size_hint(),
            Up::Empty => SizeHint::with_exact(0),
        }
    }
}

/// What a response to a client carries: a replica's body (`T`), or the proxy's own text.
pub enum Down<T> {
    Replica(T),
    Local(Full<Bytes>),
}

impl<T> Body for Down<T>
where
    T: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Down::Replica(b) => Pin::new(b).poll_frame(cx),
            Down::Local(b) => Pin::new(b)
                .poll_frame(cx)
                .map_err(|e: Infallible| match e {}),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Down::Replica(b) => b.is_end_stream(),
            Down::Local(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Down::Replica(b) => b.size_hint(),
            Down::Local(b) => b.size_hint(),
        }
    }
}

/// Upload progress of one attempt, in ns since the proxy's start (0: not yet).
#[derive(Default)]
pub struct Progress {
    pub(super) bytes: AtomicU64,
    pub(super) last_ns: AtomicU64,
    pub(super) done_ns: AtomicU64,
    /// The client's body broke off (a reset, a malformed chunk): whatever the replica's
    /// connection then reports is the client's doing.
    pub(super) client_failed: AtomicBool,
    /// The upload waits on the client (its body's last poll had nothing), not on the replica:
    /// a stall then is the client's.
    pub(super) waiting_client: AtomicBool,
}

impl Progress {
    /// Whether an attempt that failed before its response failed because of the client:
    /// its body broke off, or its upload was unfinished and waiting on the client. Such a
    /// failure says nothing of the replica and must not count against it (a client could
    /// otherwise get every replica ejected by cutting its uploads short).
    pub fn client_at_fault(&self) -> bool {
        self.client_failed.load(Relaxed)
            || (self.done_ns.load(Relaxed) == 0 && self.waiting_client.load(Relaxed))
    }
}

/// A body that counts what passes and when it ended.
pub struct Counting<B> {
    pub(super) inner: B,
    pub(super) progress: Arc<Progress>,
    pub(super) origin: Instant,
}

impl<B> Body for Counting<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let now = |s: &Self| s.origin.elapsed().as_nanos() as u64;
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        self.progress.waiting_client.store(r.is_pending(), Relaxed);
        match &r {
            Poll::Ready(Some(Err(_))) => self.progress.client_failed.store(true, Relaxed),
            Poll::Ready(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    self.progress.bytes.fetch_add(d.len() as u64, Relaxed);
                }
                let t = now(&self);
                self.progress.last_ns.store(t, Relaxed);
                if self.inner.is_end_stream() {
                    self.progress.done_ns.store(t.max(1), Relaxed);
                }
            }
            Poll::Ready(None) => {
                let t = now(&self).max(1);
                if self.progress.done_ns.load(Relaxed) == 0 {
                    self.progress.done_ns.store(t, Relaxed);
                }
            }
            _ => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
