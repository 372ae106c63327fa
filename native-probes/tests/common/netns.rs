//! Network namespaces made for one root-only test, joined by veth pairs, and the processes
//! started in them: all of it goes when the value is dropped.

use super::sh;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};

/// Runs `f` on a thread that has entered network namespace `ns` (threads it starts are in
/// it too).
pub fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open the namespace");
        // SAFETY: setns on this thread only, with a valid descriptor of a network namespace.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}");
        f()
    })
}

pub struct Netns {
    /// The namespaces' names, in the order given.
    pub ns: Vec<String>,
    pub children: Vec<Child>,
}

impl Netns {
    /// Adds the namespaces, each with its loopback up.
    pub fn new(names: &[String]) -> Netns {
        let net = Netns {
            ns: names.to_vec(),
            children: Vec::new(),
        };
        for n in names {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        net
    }

    /// A veth pair from namespace `a` (device, address/prefix) to namespace `b`, up, with
    /// the offloads off: one frame per packet, as a tbf and packet timing want.
    pub fn veth(&self, a: (&str, &str, &str), b: (&str, &str, &str)) {
        sh(&[
            "ip", "link", "add", a.1, "type", "veth", "peer", "name", b.1,
        ]);
        for (n, dev, addr) in [a, b] {
            sh(&["ip", "link", "set", dev, "netns", n]);
            sh(&["ip", "-n", n, "addr", "add", addr, "dev", dev]);
            sh(&["ip", "-n", n, "link", "set", dev, "up"]);
            sh(&[
                "ip", "netns", "exec", n, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro",
                "off",
            ]);
        }
    }

    /// `ip route add ROUTE...` in namespace `n`.
    pub fn route(&self, n: &str, route: &[&str]) {
        sh(&[&["ip", "-n", n, "route", "add"][..], route].concat());
    }

    /// Namespace `n` forwards between its interfaces.
    pub fn forward(&self, n: &str) {
        sh(&[
            "ip",
            "netns",
            "exec",
            n,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ]);
    }

    /// A token bucket of `rate_mbit` on `dev` in namespace `n`, with bucket and latency as tc
    /// spells them ("4600b", "30ms").
    pub fn tbf(&self, n: &str, dev: &str, rate_mbit: u32, burst: &str, latency: &str) {
        let rate = format!("{rate_mbit}mbit");
        sh(&[
            "ip", "netns", "exec", n, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
            &rate, "burst", burst, "latency", latency,
        ]);
    }

    /// Starts `args` in namespace `i` (output discarded); returns its index for
    /// [`Netns::stop`].
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

    /// Sends `signal` (e.g. "-TERM"; "-KILL" to kill) to child `k` and waits for it.
    pub fn stop(&mut self, k: usize, signal: &str) {
        let pid = self.children[k].id().to_string();
        let _ = Command::new("kill").args([signal, &pid]).status();
        let _ = self.children[k].wait();
    }
}

impl Drop for Netns {
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
