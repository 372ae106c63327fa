//! The size a request is timed for: its own upload where known, plus what completed
//! exchanges of its route (else its service) moved ([`estimate_size`]), learnt as they
//! complete.

use super::*;

impl Policy {
    /// The key of a request's route (`method` and `path`, its query left out) in service `s`,
    /// under which [`Policy::learn_size`] keeps what its exchanges moved.
    pub fn route_key(&self, s: usize, method: &str, path: &str) -> RouteKey {
        Routes::key(s, method, path)
    }

    /// The size to forecast a request to service `s` for: its upload `length` if known
    /// (Content-Length, or 0 without a body), plus for the rest what completed exchanges of
    /// its route (else of the service) moved, else the service's assumed size
    /// ([`estimate_size`]).
    pub fn size_of(&self, s: usize, length: Option<u64>, route: Option<&RouteKey>) -> Size {
        let svc = &self.services[s];
        let learned = route
            .filter(|k| k.service == s)
            .and_then(|k| self.routes.get(k));
        estimate_size(length, learned, Some(&svc.sizes), svc.cfg.default_size)
    }

    /// A request of `route` completed (a response came and its body was read to the end),
    /// having moved `up` bytes to the replica and `down` back: learn its route's and its
    /// service's sizes from it. Not for probes.
    pub fn learn_size(&mut self, route: &RouteKey, up: u64, down: u64) {
        if let Some(svc) = self.services.get_mut(route.service) {
            svc.sizes.add(up, down);
            self.routes.add(route, up, down);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::testing::*;

    #[test]
    fn a_request_is_timed_for_what_its_route_moved_not_for_the_last_upload() {
        use crate::proxy::budget::SizeFrom;
        let mut p = two(Balance::Completion);
        // a: 100 ms RTT, 100 Mbit/s; b: 5 ms, 10 Mbit/s. Small requests go to b, big to a.
        for i in 0..20 {
            let t = i as f64 * 10.0;
            p.finish(&ok(0, t, 100.0, 100.0, 1 << 20));
            p.finish(&ok(1, t, 10.0, 5.0, 1 << 20));
        }
        let mut t = 300.0;
        // One exchange: chosen for its size, then learnt from (`up` and `down` moved).
        let mut run = |p: &mut Policy, method: &str, path: &str, length, up, down| {
            let k = p.route_key(0, method, path);
            let size = p.size_of(0, length, Some(&k));
            let d = p.choose_sized(0, size, None, t, [0.9, 0.0]);
            assert_eq!(d.size, size);
            assert_eq!(d.size.bytes, size.bytes);
            let (mbit, rtt) = [(100.0, 100.0), (10.0, 5.0)][d.replica];
            p.finish(&ok(d.replica, t + 1.0, mbit, rtt, up));
            p.learn_size(&k, up, down);
            t += 10.0;
            d
        };
        // Nothing known: a GET is timed for the assumed size, an upload for its own length.
        let k = p.route_key(0, "GET", "/hello.txt");
        let s = p.size_of(0, Some(0), Some(&k));
        assert_eq!((s.bytes, s.from), (65_536.0, SizeFrom::Default));
        let d = run(&mut p, "POST", "/up", Some(20_000_000), 20_000_000, 9);
        assert_eq!((d.size.bytes, d.size.from), (20e6, SizeFrom::ContentLength));
        assert_eq!(d.replica, 0);
        // The first GET after it: the service's mean download, not its upload: to b.
        let d = run(&mut p, "GET", "/hello.txt", Some(0), 0, 12);
        assert_eq!((d.size.bytes, d.size.from), (9.0, SizeFrom::Service));
        assert_eq!(d.replica, 1);
        // Then what GETs of its path moved.
        for n in 1..=3 {
            let d = run(&mut p, "GET", "/hello.txt", Some(0), 0, 12);
            assert_eq!(
                (d.size.bytes, d.size.from, d.size.samples),
                (12.0, SizeFrom::MethodPath, n)
            );
            assert_eq!((d.replica, d.reason), (1, Reason::Best));
        }
        // A path not seen: the service's mean download (its own upload is none).
        let d = run(&mut p, "GET", "/other", Some(0), 0, 12);
        assert_eq!(d.size.from, SizeFrom::Service);
        assert!(d.size.bytes < 20.0, "{}", d.size.bytes);
        // A download learnt as big is timed as big: to a.
        run(&mut p, "GET", "/big", Some(0), 0, 10 << 20);
        let d = run(&mut p, "GET", "/big", Some(0), 0, 10 << 20);
        assert_eq!(
            (d.size.bytes, d.size.from),
            ((10 << 20) as f64, SizeFrom::MethodPath)
        );
        assert_eq!(d.replica, 0);
        // An upload of unknown length: what its route moved both ways.
        let d = run(&mut p, "POST", "/up", None, 20_000_000, 9);
        assert_eq!(
            (d.size.bytes, d.size.from),
            (20_000_009.0, SizeFrom::MethodPath)
        );
        // A retry keeps its first decision's size.
        let r = p.retry_sized(0, d.size, d.replica, t, [0.9, 0.0]).unwrap();
        assert_eq!((r.size, r.reason), (d.size, Reason::Retry));
    }
}
