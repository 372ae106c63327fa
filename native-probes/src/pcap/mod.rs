//! `nowcast pcap`: passive analysis of TCP traffic from capture files or a live interface.
//!
//! Cores (deterministic: frames and capture times in, reports and records out):
//! [`decode`] (one frame to a TCP segment), [`tcp`] (one direction's counts, segment kinds and
//! RTT samples), [`samples`] (bounded quantiles), `sides` (where the capture was taken, per
//! address), [`analysis`] (the flow table, Wren per flow through `nowcast_core::wren`,
//! IEPM-BW transfers through `nowcast_core::iepm`) with `reports` (what it reports, and the
//! records made of them).
//! Edges: [`read`] (pcap and pcapng files, streamed, and live capture with libpcap), [`run`]
//! (the loop from a reader to the analyser and the record sink) and `tables` (what it prints).
//! [`timeline`]: the capture's clock as the analysis reads it, never going back (a core).

pub mod analysis;
pub mod decode;
pub mod read;
mod reports;
pub mod run;
pub mod samples;
mod sides;
mod tables;
pub mod tcp;
pub mod timeline;
