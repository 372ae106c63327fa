//! FOBS: bulk transfer over UDP with selective acknowledgements, the HighSpeed TCP
//! response, and the Bayesian classifier that tells CPU loss from network loss (Dickens,
//! "A Lightweight, High Performance Communication Protocol for Grid Computing", §2–§5).
//!
//! Deterministic cores in quinn-proto's shape ([`sender`], [`receiver`], [`wire`],
//! [`congestion`]): bytes and nanosecond times in, bytes, file writes and timers out; no
//! sockets, no clock, no files; [`record`] writes a transfer's records. The thin edge ([`io`]) owns the UDP and TCP sockets, the
//! files, the hash and the clock. Tests run both cores together in a simulator with one
//! clock and scripted loss (`sim`).

pub mod congestion;
pub mod io;
pub mod memory;
pub mod receiver;
pub mod record;
pub mod sender;
pub mod wire;

#[cfg(test)]
mod sim;

pub use wire::Nanos;
