//! A three-namespace path for the root-only emulated-link tests of Wren: sender ─ router
//! (tbf toward the receiver) ─ receiver, with the offloads off (one frame per packet, as
//! Wren's trains need) and every segment acknowledged at once (quickack). Child processes
//! started in it and the namespaces go when it is dropped.

use super::netns::Netns;

/// Namespaces `ns` = [sender, router, receiver].
pub struct Path3 {
    pub ns: [String; 3],
    /// The sender's interface (toward the router).
    pub sender_dev: String,
    /// The receiver's address.
    pub receiver_ip: String,
    net: Netns,
}

impl Path3 {
    /// Names start with `tag` (unique per test); `subnets` are the sender's and the
    /// receiver's /24s (e.g. "10.231.91"); the router's tbf toward the receiver runs at
    /// `rate_mbit` with a bucket of three frames: a longer line-rate burst queues (a bigger
    /// bucket really is bandwidth above the rate for the trains that fit in it).
    pub fn new(tag: &str, subnets: [&str; 2], rate_mbit: u32) -> Path3 {
        let id = format!("{tag}{}", std::process::id());
        let ns = ["s", "r", "d"].map(|role| format!("nw{role}{id}"));
        let [sv, rs, rd, dv] = ["s", "rs", "rd", "d"].map(|d| format!("{d}{id}"));
        let [a, b] = subnets;
        let net = Netns::new(&ns);
        let [s, r, d] = &ns;
        let (sa, ra) = (format!("{a}.1/24"), format!("{a}.254/24"));
        let (rb, db) = (format!("{b}.254/24"), format!("{b}.2/24"));
        net.veth((s, &sv, &sa), (r, &rs, &ra));
        net.veth((r, &rd, &rb), (d, &dv, &db));
        net.route(s, &["default", "via", &format!("{a}.254")]);
        // Every segment acknowledged at once (no delayed ACKs), as Wren's ACK timing needs.
        net.route(d, &["default", "via", &format!("{b}.254"), "quickack", "1"]);
        net.forward(r);
        net.tbf(r, &rd, rate_mbit, "4600b", "30ms");
        Path3 {
            ns: ns.clone(),
            sender_dev: sv,
            receiver_ip: format!("{b}.2"),
            net,
        }
    }

    /// Starts `args` in namespace `i` (output discarded); returns its index for
    /// [`Path3::stop`].
    pub fn spawn(&mut self, i: usize, args: &[&str]) -> usize {
        self.net.spawn(i, args)
    }

    /// Sends `signal` (e.g. "-TERM") to child `k` and waits for it.
    pub fn stop(&mut self, k: usize, signal: &str) {
        self.net.stop(k, signal)
    }
}
