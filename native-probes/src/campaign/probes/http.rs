//! A campaign's `http` run: a timed download of the target's URL (`bandwidth_down`), at
//! most `max_bytes` read, the whole request within the bound. The time runs from the request
//! to the last byte, so it includes the connection and the server's first byte, as a user's
//! download does.

use crate::campaign::plan::{HttpParams, Target};
use crate::series::SeriesSet;
use crate::when::Ms;
use nowcast_core::probed::Outcome;
use nowcast_core::record::{Metric, Probe, Record, Transport};
use std::io::Read;
use std::time::{Duration, Instant};

pub fn run(p: &HttpParams, target: &Target, bound_ms: Ms, set: &mut SeriesSet) -> Vec<Record> {
    let url = p.url_for(target);
    let started_wall = crate::clock::wall_ms();
    let result = download(
        &url,
        p.max_bytes,
        Duration::from_millis(bound_ms.max(1) as u64),
    );
    let probe = Probe {
        transport: Some(Transport::Http),
        payload_bytes: result.as_ref().ok().map(|r| r.0),
        raw_ms: result.as_ref().ok().map(|r| r.1),
        ..Probe::default()
    };
    super::observe(
        set,
        &[Metric::BandwidthDown],
        started_wall,
        bound_ms,
        probe,
        result.map(|(bytes, ms)| {
            vec![(
                Metric::BandwidthDown,
                Outcome::Measured {
                    value: bytes as f64 * 8.0 / (ms.max(1e-3) * 1e3),
                    duration_ms: Some(ms),
                },
            )]
        }),
    )
}

/// Bytes read and the time taken, ms.
fn download(url: &str, max_bytes: u64, bound: Duration) -> Result<(u64, f64), String> {
    if url.is_empty() {
        return Err("no URL: give the target a url or the probe a url".into());
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(bound))
        .http_status_as_error(false)
        .build()
        .into();
    let start = Instant::now();
    let resp = agent
        .get(url)
        .header("Accept-Encoding", "identity")
        .header("Cache-Control", "no-cache")
        .call()
        .map_err(|e| format!("{url}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("{url}: HTTP {}", resp.status()));
    }
    let mut body = resp.into_body().into_reader().take(max_bytes);
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) => return Err(format!("{url}: after {total} bytes: {e}")),
        }
    }
    if total == 0 {
        return Err(format!("{url}: an empty body"));
    }
    Ok((total, start.elapsed().as_secs_f64() * 1e3))
}
