//! `nowcast campaign`: scheduled measurements to many targets, IEPM-BW's way (Cottrell,
//! Logg and Mei, §II.A): a monitoring host runs several probe types against its targets on a
//! schedule, times out and kills every probe, checks each target's sanity before the heavy
//! probes, and logs everything, here into the archive ([`crate::archive`]).
//!
//! Cores: [`plan`] (the campaign as data), [`cron`], [`scheduler`] (what to start, kill and
//! log, from the plan, the time and what finished; its run log is [`crate::runlog`]),
//! [`status`], [`metrics`].
//! Edges: [`config`] (the TOML file), [`probes`] (one module per probe type), [`runner`]
//! (the loop, threads, signals, `/metrics`).

pub mod config;
pub mod cron;
pub mod metrics;
pub mod plan;
pub mod probes;
pub mod runner;
pub mod scheduler;
pub mod status;
