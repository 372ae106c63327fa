//! A three-namespace path for the root-only emulated-link tests of Wren: sender ─ router
//! (tbf toward the receiver) ─ receiver, with the offloads off (one frame per packet, as
//! Wren's trains need) and every segment acknowledged at once (quickack). Child processes
//! started in it and the namespaces go when it is dropped.

use super::sh;
use std::process::{Child, Command, Stdio};

/// Namespaces `ns` = [sender, router, receiver].
pub struct Path3 {
    pub ns: [String; 3],
    /// The sender's interface (toward the router).
    pub sender_dev: String,
    /// The receiver's address.
    pub receiver_ip: String,
    children: Vec<Child>,
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
        let p = Path3 {
            ns: ns.clone(),
            sender_dev: sv.clone(),
            receiver_ip: format!("{b}.2"),
            children: Vec::new(),
        };
        for n in &ns {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        let [s, r, d] = &ns;
        sh(&[
            "ip", "link", "add", &sv, "type", "veth", "peer", "name", &rs,
        ]);
        sh(&[
            "ip", "link", "add", &rd, "type", "veth", "peer", "name", &dv,
        ]);
        for (dev, n) in [(&sv, s), (&rs, r), (&rd, r), (&dv, d)] {
            sh(&["ip", "link", "set", dev, "netns", n]);
        }
        for (n, dev, addr) in [
            (s, &sv, format!("{a}.1/24")),
            (r, &rs, format!("{a}.254/24")),
            (r, &rd, format!("{b}.254/24")),
            (d, &dv, format!("{b}.2/24")),
        ] {
            sh(&["ip", "-n", n, "addr", "add", &addr, "dev", dev]);
            sh(&["ip", "-n", n, "link", "set", dev, "up"]);
            sh(&[
                "ip", "netns", "exec", n, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro",
                "off",
            ]);
        }
        sh(&[
            "ip",
            "-n",
            s,
            "route",
            "add",
            "default",
            "via",
            &format!("{a}.254"),
        ]);
        // Every segment acknowledged at once (no delayed ACKs), as Wren's ACK timing needs.
        sh(&[
            "ip",
            "-n",
            d,
            "route",
            "add",
            "default",
            "via",
            &format!("{b}.254"),
            "quickack",
            "1",
        ]);
        sh(&[
            "ip",
            "netns",
            "exec",
            r,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ]);
        sh(&[
            "ip",
            "netns",
            "exec",
            r,
            "tc",
            "qdisc",
            "add",
            "dev",
            &rd,
            "root",
            "tbf",
            "rate",
            &format!("{rate_mbit}mbit"),
            "burst",
            "4600b",
            "latency",
            "30ms",
        ]);
        p
    }

    /// Starts `args` in namespace `i` (output discarded); returns its index for
    /// [`Path3::stop`].
    pub fn spawn(&mut self, i: usize, args: &[&str]) -> usize {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns[i]])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn in a namespace");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Sends `signal` (e.g. "-TERM") to child `k` and waits for it.
    pub fn stop(&mut self, k: usize, signal: &str) {
        let pid = self.children[k].id().to_string();
        let _ = Command::new("kill").args([signal, &pid]).status();
        let _ = self.children[k].wait();
    }
}

impl Drop for Path3 {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}
