//! Services that are not nowcast's, on 127.0.0.1, for the tests of what a command says when
//! its target is one: a listener that hands each connection to a handler on a thread of its
//! own, and the handlers of a web server and of a service that says nothing.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A listener on 127.0.0.1 that hands each connection, with its number, to `handle` on its
/// own thread; stopped, and every handler joined, on drop.
pub struct Peer {
    pub addr: String,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Peer {
    pub fn start(handle: impl Fn(TcpStream, usize) + Send + Sync + 'static) -> Peer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped) = (accepted.clone(), stop.clone());
        let handle = Arc::new(handle);
        let thread = std::thread::spawn(move || {
            let mut handlers = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        // Longer than any deadline a test waits out (a FOBS offer's 5 s):
                        // a silent peer must not close first.
                        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                        let n = count.fetch_add(1, Ordering::SeqCst);
                        let handle = handle.clone();
                        handlers.push(std::thread::spawn(move || handle(s, n)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for h in handlers {
                let _ = h.join();
            }
        });
        Peer {
            addr,
            accepted,
            stop,
            thread: Some(thread),
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads until the client closes (or the read timeout), as a server waiting for more would.
pub fn wait_for_close(s: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
}

/// A web server's answer to a request it cannot parse: the status line, then it closes.
pub fn bad_request(mut s: TcpStream) {
    let mut hello = [0u8; 64];
    let _ = s.read(&mut hello);
    let _ = s.write_all(
        b"HTTP/1.0 400 Bad request\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<html></html>",
    );
    let _ = s.shutdown(Shutdown::Write);
    wait_for_close(&mut s);
}
