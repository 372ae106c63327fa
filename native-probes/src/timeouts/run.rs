//! `nowcast bench timeouts` (edge): the reduction-tree experiment of Allen, Wolski & Plank
//! (§4–5) on loopback. Each process of the tree listens on its own port; each send is a
//! message on a kept-open TCP connection to the parent, which holds it for the trace's delay
//! and answers with an application acknowledgement; a send that is not acknowledged within
//! its timeout is cancelled (the connection closed), reconnected and resent, five attempts,
//! then abandoned. Sets of reductions are interleaved across policies, and every policy
//! replays the same seeded trace. `--virtual` computes the same sends in virtual time
//! (the model's own arithmetic) instead of running them.

use super::model::{reduce, tree, Link, Params, Policy, ATTEMPTS};
use super::stats::{row, Row, SetResult};
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Options {
    pub params: Params,
    pub seed: u64,
    pub sets: usize,
    pub per_set: usize,
    /// Real seconds per paper second.
    pub scale: f64,
    pub policies: Vec<Policy>,
    pub virtual_time: bool,
    pub payload: usize,
    /// In virtual time: write every send (its attempts, the timeouts they ran under and the
    /// parts of their delays) as CSV here, to see where the reduction times come from.
    pub sends_csv: Option<String>,
}

/// A message: reduction, link, attempt, payload length; then the payload.
const HEADER: usize = 16;

async fn serve(l: TcpListener, params: Arc<Params>, seed: u64, total: usize, scale: f64) {
    loop {
        let Ok((mut s, _)) = l.accept().await else {
            continue;
        };
        let _ = s.set_nodelay(true);
        let params = params.clone();
        tokio::spawn(async move {
            let mut head = [0u8; HEADER];
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                if s.read_exact(&mut head).await.is_err() {
                    return;
                }
                let f = |i: usize| u32::from_be_bytes(head[i..i + 4].try_into().unwrap()) as usize;
                let (r, link, attempt, mut len) = (f(0), f(4), f(8), f(12));
                while len > 0 {
                    let n = len.min(buf.len());
                    if s.read_exact(&mut buf[..n]).await.is_err() {
                        return;
                    }
                    len -= n;
                }
                let d = params.delay(seed, r, total, link, attempt) * scale;
                tokio::time::sleep(Duration::from_secs_f64(d)).await;
                if s.write_all(b"A").await.is_err() {
                    return;
                }
            }
        });
    }
}

struct Sender {
    link: Link,
    conn: Option<TcpStream>,
    to: std::net::SocketAddr,
}

async fn attempt_on(conn: &mut TcpStream, msg: &[u8]) -> std::io::Result<()> {
    conn.write_all(msg).await?;
    let mut ack = [0u8; 1];
    conn.read_exact(&mut ack).await?;
    Ok(())
}

fn message(r: usize, link: usize, attempt: usize, payload: usize) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEADER + payload);
    for v in [r, link, attempt, payload] {
        m.extend_from_slice(&(v as u32).to_be_bytes());
    }
    m.resize(HEADER + payload, 0x5a);
    m
}

async fn connect(to: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(to).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// One send with cancel–reconnect–resend (and hedging's second copy); returns the attempts
/// made and whether it was abandoned.
async fn send(s: &mut Sender, r: usize, link: usize, scale: f64, payload: usize) -> (usize, bool) {
    s.link.start();
    let mut attempts = 0;
    let mut next = 0;
    if let Some(h) = s.link.hedge_at_s() {
        let t = s.link.timeout_s();
        if h < t {
            let start = Instant::now();
            let mut first = match s.conn.take() {
                Some(c) => c,
                None => match connect(s.to).await {
                    Ok(c) => c,
                    Err(_) => return (1, true),
                },
            };
            attempts = 1;
            let m0 = message(r, link, 0, payload);
            let mut a0 = Box::pin(attempt_on(&mut first, &m0));
            let timeout = Duration::from_secs_f64(t * scale);
            let early = tokio::select! {
                res = &mut a0 => Some(res.is_ok()),
                _ = tokio::time::sleep(Duration::from_secs_f64(h * scale)) => None,
            };
            match early {
                Some(true) => {
                    s.link.succeeded(start.elapsed().as_secs_f64() / scale);
                    drop(a0);
                    s.conn = Some(first);
                    return (attempts, false);
                }
                Some(false) => {
                    // The connection failed before h: an attempt that timed out at once.
                    drop(a0);
                    s.link.timed_out(start.elapsed().as_secs_f64() / scale);
                    next = 1;
                }
                None => {
                    // No answer by h: a second copy on a new connection, the first not
                    // cancelled; each copy under its own timeout from its own start, and
                    // the first answer wins (as `Link::send` in virtual time).
                    s.link.hedged();
                    attempts = 2;
                    next = 2;
                    let hedge_start = Instant::now();
                    let mut second = connect(s.to).await.ok();
                    let m1 = message(r, link, 1, payload);
                    let mut a1 = Box::pin(async {
                        match second.as_mut() {
                            Some(c) => attempt_on(c, &m1).await,
                            None => Err(std::io::ErrorKind::NotConnected.into()),
                        }
                    });
                    let (mut alive0, mut alive1) = (true, true);
                    let first_due = tokio::time::Instant::from_std(start + timeout);
                    let second_due = tokio::time::Instant::from_std(hedge_start + timeout);
                    let mut winner = None;
                    while alive0 || alive1 {
                        tokio::select! {
                            res = &mut a0, if alive0 => {
                                alive0 = false;
                                if res.is_ok() {
                                    winner = Some(0);
                                    break;
                                }
                            }
                            res = &mut a1, if alive1 => {
                                alive1 = false;
                                if res.is_ok() {
                                    winner = Some(1);
                                    break;
                                }
                            }
                            _ = tokio::time::sleep_until(first_due), if alive0 => {
                                alive0 = false;
                                s.link.timed_out(t);
                            }
                            _ = tokio::time::sleep_until(second_due), if alive1 => {
                                alive1 = false;
                                s.link.timed_out(t);
                            }
                        }
                    }
                    drop(a0);
                    drop(a1);
                    match winner {
                        Some(0) => {
                            s.link.succeeded(start.elapsed().as_secs_f64() / scale);
                            s.conn = Some(first);
                            return (attempts, false);
                        }
                        Some(_) => {
                            if alive0 {
                                // Cancelled: the first copy took at least this long.
                                s.link.censored(start.elapsed().as_secs_f64() / scale);
                            }
                            s.link
                                .succeeded(hedge_start.elapsed().as_secs_f64() / scale);
                            s.conn = second;
                            return (attempts, false);
                        }
                        None => {}
                    }
                }
            }
        }
    }
    for a in next..ATTEMPTS {
        let t = s.link.timeout_s();
        attempts += 1;
        let start = Instant::now();
        let mut c = match s.conn.take() {
            Some(c) => c,
            None => match connect(s.to).await {
                Ok(c) => c,
                Err(_) => {
                    s.link.timed_out(t);
                    continue;
                }
            },
        };
        let m = message(r, link, a, payload);
        let res =
            tokio::time::timeout(Duration::from_secs_f64(t * scale), attempt_on(&mut c, &m)).await;
        match res {
            Ok(Ok(())) => {
                s.link.succeeded(start.elapsed().as_secs_f64() / scale);
                s.conn = Some(c);
                return (attempts, false);
            }
            // Timed out (or failed): cancel, and the next attempt reconnects.
            _ => {
                drop(c);
                s.link.timed_out(t);
            }
        }
    }
    (attempts, true)
}

/// Runs `per_set` reductions (numbered from `first`) under one policy on loopback.
async fn run_set(
    opts: &Options,
    senders: &[Arc<tokio::sync::Mutex<Sender>>],
    first: usize,
) -> SetResult {
    let mut out = SetResult::default();
    let t = tree(opts.params.procs);
    for r in first..first + opts.per_set {
        let start = Instant::now();
        // done[p]: p has everything from its subtree (leaves at once).
        let mut done: Vec<Option<tokio::sync::watch::Receiver<bool>>> = Vec::new();
        let mut txs = Vec::new();
        for _ in 0..opts.params.procs {
            let (tx, rx) = tokio::sync::watch::channel(false);
            txs.push(Some(tx));
            done.push(Some(rx));
        }
        let results = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for &(_, child, parent) in &t {
            let waits: Vec<tokio::sync::watch::Receiver<bool>> = t
                .iter()
                .filter(|x| x.2 == child)
                .map(|x| done[x.1].clone().expect("rx"))
                .collect();
            let sender = senders[child].clone();
            let tx = txs[child].take().expect("one send per child");
            let results = results.clone();
            let (scale, payload) = (opts.scale, opts.payload);
            debug_assert!(parent < child);
            tasks.push(tokio::spawn(async move {
                for mut w in waits {
                    let _ = w.wait_for(|v| *v).await;
                }
                let mut s = sender.lock().await;
                let hedges = s.link.hedges;
                let (attempts, abandoned) = send(&mut s, r, child, scale, payload).await;
                let hedged = s.link.hedges > hedges;
                results
                    .lock()
                    .expect("results")
                    .push((attempts, abandoned, hedged));
                let _ = tx.send(true);
            }));
        }
        let root_waits: Vec<_> = t
            .iter()
            .filter(|x| x.2 == 0)
            .map(|x| done[x.1].clone().expect("rx"))
            .collect();
        for mut w in root_waits {
            let _ = w.wait_for(|v| *v).await;
        }
        out.times.push(start.elapsed().as_secs_f64() / opts.scale);
        for task in tasks {
            let _ = task.await;
        }
        for &(a, ab, hedged) in results.lock().expect("results").iter() {
            out.add_send(a, ab);
            if hedged {
                out.add_hedge();
            }
        }
    }
    out
}

/// Runs the experiment: `sets` sets of `per_set` reductions, interleaved across policies.
/// Returns each policy's row and the raw sets.
pub fn run(opts: &Options) -> std::io::Result<(Vec<Row>, Vec<Vec<SetResult>>)> {
    let total = opts.sets * opts.per_set;
    let mut sets: Vec<Vec<SetResult>> = vec![Vec::new(); opts.policies.len()];
    if opts.virtual_time {
        let mut csv =
            match &opts.sends_csv {
                Some(path) => {
                    let f = std::fs::File::create(path)
                        .map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?;
                    let mut w = std::io::BufWriter::new(f);
                    writeln!(
                    w,
                    "policy,set,reduction,level,link,parent,attempts,abandoned,time_s,hedge_at_s,\
                     reduction_s,{},{},{}",
                    (0..ATTEMPTS).map(|a| format!("timeout{a}_s")).collect::<Vec<_>>().join(","),
                    (0..ATTEMPTS).map(|a| format!("own{a}_s")).collect::<Vec<_>>().join(","),
                    (0..ATTEMPTS).map(|a| format!("stall{a}_s")).collect::<Vec<_>>().join(",")
                )?;
                    Some(w)
                }
                None => None,
            };
        let shape = tree(opts.params.procs);
        let mut links: Vec<Vec<Link>> = opts
            .policies
            .iter()
            .map(|&p| (0..opts.params.procs).map(|_| Link::new(p)).collect())
            .collect();
        for k in 0..opts.sets {
            for (i, _) in opts.policies.iter().enumerate() {
                let mut set = SetResult::default();
                for r in k * opts.per_set..(k + 1) * opts.per_set {
                    let (t, sends) = reduce(&opts.params, opts.seed, r, total, &mut links[i]);
                    set.times.push(t);
                    if let Some(w) = csv.as_mut() {
                        for (s, &(level, link, parent)) in sends.iter().zip(&shape) {
                            let parts: Vec<(f64, f64)> = (0..ATTEMPTS)
                                .map(|a| opts.params.delay_parts(opts.seed, r, total, link, a))
                                .collect();
                            let join = |v: Vec<String>| v.join(",");
                            writeln!(
                                w,
                                "{},{k},{r},{level},{link},{parent},{},{},{},{},{t},{},{},{}",
                                opts.policies[i].name(),
                                s.attempts,
                                s.abandoned,
                                s.time_s,
                                s.hedge_at_s.map_or(String::new(), |h| h.to_string()),
                                join(s.timeouts_s.iter().map(|x| x.to_string()).collect()),
                                join(parts.iter().map(|p| p.0.to_string()).collect()),
                                join(parts.iter().map(|p| p.1.to_string()).collect()),
                            )?;
                        }
                    }
                    for s in sends {
                        set.add_send(s.attempts, s.abandoned);
                        if s.hedge_at_s.is_some() {
                            set.add_hedge();
                        }
                    }
                }
                sets[i].push(set);
            }
        }
        if let Some(mut w) = csv {
            w.flush()?;
        }
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        rt.block_on(async {
            let params = Arc::new(opts.params.clone());
            let mut addrs = Vec::new();
            for _ in 0..opts.params.procs {
                let l = TcpListener::bind("127.0.0.1:0").await?;
                addrs.push(l.local_addr()?);
                tokio::spawn(serve(l, params.clone(), opts.seed, total, opts.scale));
            }
            let parent_of = |c: usize| {
                tree(opts.params.procs)
                    .into_iter()
                    .find(|x| x.1 == c)
                    .map_or(0, |x| x.2)
            };
            // One sender per (policy, process): its link to its parent and its timeouts.
            let senders: Vec<Vec<Arc<tokio::sync::Mutex<Sender>>>> = opts
                .policies
                .iter()
                .map(|&p| {
                    (0..opts.params.procs)
                        .map(|c| {
                            Arc::new(tokio::sync::Mutex::new(Sender {
                                link: Link::new(p),
                                conn: None,
                                to: addrs[parent_of(c)],
                            }))
                        })
                        .collect()
                })
                .collect();
            for k in 0..opts.sets {
                for i in 0..opts.policies.len() {
                    let set = run_set(opts, &senders[i], k * opts.per_set).await;
                    sets[i].push(set);
                }
            }
            Ok::<(), std::io::Error>(())
        })?;
    }
    let rows = opts
        .policies
        .iter()
        .zip(&sets)
        .map(|(p, s)| row(&p.name(), s))
        .collect();
    Ok((rows, sets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_loopback_every_send_is_accounted_and_hedges_go_out() {
        // Stalls on a third of the attempts (short ones), so that the candidate's hedges and
        // cancels both happen within a few reductions; 4 processes, 3 links.
        let params = Params {
            procs: 4,
            stall_p: 0.3,
            stall_cap_s: 10.0,
            ..Params::default()
        };
        let opts = Options {
            params,
            seed: 5,
            sets: 2,
            per_set: 12,
            scale: 0.002,
            policies: vec![Policy::Static(15.0), Policy::CANDIDATE],
            virtual_time: false,
            payload: 256,
            sends_csv: None,
        };
        let (rows, sets) = run(&opts).expect("loopback run");
        assert_eq!(rows.len(), 2);
        for (row, sets) in rows.iter().zip(&sets) {
            assert_eq!(row.reductions, 24, "{}", row.policy);
            assert_eq!(sets.iter().map(|s| s.sends).sum::<u64>(), 24 * 3);
            assert!(row.min.value > 0.0 && row.max.value >= row.p95.value);
        }
        // The candidate hedges (on a second connection), and its hedged sends count as
        // retried; static 15 s never hedges.
        assert_eq!(rows[0].hedged_pct.value, 0.0);
        assert!(rows[1].hedged_pct.value > 0.0, "{:?}", rows[1]);
        assert!(rows[1].retried_pct.value >= rows[1].hedged_pct.value);
    }
}
