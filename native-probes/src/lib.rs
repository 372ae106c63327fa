//! Library behind the `nowcast` command, one module per concept. The deterministic cores
//! take bytes and times as arguments and give decisions and records (no sockets, no clock,
//! no printing): [`tcp::session`], [`udp::burst`], [`wire`],
//! [`schedule`], [`series`], [`evaluate`], [`series_input`] (any reader) and the passive
//! analysis in [`pcap`] (decode, tcp, samples, analysis). The edges beside them do the I/O:
//! [`tcp::io`], [`udp::io`], [`periodic`], [`serve`], [`delay`], [`net`], [`clock`],
//! [`stop`], [`forecast`], [`input`] (a file named on the command line, or standard input),
//! [`output`]'s record sinks, and [`pcap`]'s reader and loop.
//!
//! Campaigns, their archive and their reports: [`campaign`] (the plan, the cron form, the
//! scheduler, the run log, status and metrics as cores; the configuration reader, the probe
//! types and the runner as edges), [`archive`] (SQLite and ClickHouse behind a spool; one more
//! record sink) and [`report`] (IEPM-BW's analysis and its table, JSON and HTML). [`when`] and
//! [`format`] write times and numbers for people.
//!
//! [`proxy`]: `nowcast proxy` (the selection policy, retry budget, sticky table and metrics
//! as cores; the hyper server and upstream pool as edges). [`timeouts`]: `nowcast bench
//! timeouts` (the reduction tree's model and tables as cores, the loopback run as an edge).
//! [`rng`]: the seeded generator the cores take their randomness from.

/// A line on standard error that cannot end the run. `eprintln!` panics when standard error
/// is a pipe whose reader has gone (`nowcast pcap x.pcap 2>&1 | head`: exit 101 and a panic
/// message); a warning that cannot be shown is lost, and the run goes on.
#[macro_export]
macro_rules! warn_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod archive;
pub mod campaign;
pub mod classify;
pub mod clock;
pub mod config_file;
pub mod delay;
pub mod evaluate;
pub mod fobs;
pub mod forecast;
pub mod format;
pub mod input;
pub mod net;
pub mod output;
pub mod pcap;
pub mod periodic;
pub mod proxy;
pub mod report;
pub mod rng;
pub mod runlog;
pub mod schedule;
pub mod series;
pub mod series_input;
pub mod serve;
pub mod stop;
pub mod tcp;
pub mod timeouts;
pub mod udp;
pub mod when;
pub mod wire;
