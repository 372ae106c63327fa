//! `nowcast udp`: bursts of numbered UDP probes echoed by `nowcast serve`. Each burst gives
//! the median RTT, the jitter and the loss (with reordering and duplicates counted);
//! periodic bursts are forecast like the TCP series. The burst is a deterministic core
//! ([`burst`]); [`io`] is the thin loop that sends, stamps and waits.

pub mod burst;
pub mod io;
