//! A client's connection as the server holds it (edge): a socket that notes when bytes last
//! moved either way, for the idle limit, and since when it has taken none of what the proxy
//! has to send, for the send timeout; and that closes with a reset when the proxy cut it off.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client connection's activity: when bytes last moved either way (ns since the proxy's
/// start), since when its socket has refused what the proxy writes (0: it took the last
/// write), its requests in flight, and whether the proxy cut it off.
pub(super) struct Activity {
    pub(super) last: AtomicU64,
    pub(super) blocked: AtomicU64,
    pub(super) active: AtomicU64,
    pub(super) cut: AtomicBool,
}

/// A client socket that notes when bytes last moved either way.
pub(super) struct Watched {
    pub(super) inner: TcpStream,
    pub(super) activity: Arc<Activity>,
    pub(super) origin: Instant,
}

impl Watched {
    fn touch(&self) {
        self.activity
            .last
            .store(self.origin.elapsed().as_nanos() as u64, Relaxed);
    }

    /// Notes what a write did: bytes taken (activity; not blocked), or none for want of room
    /// in the socket (blocked since now, unless it was already).
    fn wrote(&self, r: &Poll<std::io::Result<usize>>) {
        match r {
            Poll::Ready(Ok(n)) if *n > 0 => {
                self.touch();
                self.activity.blocked.store(0, Relaxed);
            }
            Poll::Pending if self.activity.blocked.load(Relaxed) == 0 => {
                let now = self.origin.elapsed().as_nanos() as u64;
                self.activity.blocked.store(now.max(1), Relaxed);
            }
            _ => {}
        }
    }
}

impl Drop for Watched {
    /// A connection the proxy cut off (idle, no first head in time) is closed with a reset.
    /// Closed the ordinary way, the kernel keeps what was queued for a client that does not
    /// read, and a FIN behind it, for as long as that client keeps its end open (FIN-WAIT-1,
    /// megabytes a connection, minutes), counted by no cap once the proxy let go of it: one
    /// address piled up 715 MB in a minute in a review.
    fn drop(&mut self) {
        if self.activity.cut.load(Relaxed) {
            let _ = socket2::SockRef::from(&self.inner).set_linger(Some(Duration::ZERO));
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.touch();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(&r);
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(&r);
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
