//! `nowcast tcp`: the NWS TCP probe (JavaNws §2.1.1). The session is a deterministic state
//! machine ([`session`]) whose rate arithmetic is the core's (`nowcast_core::transfer`, shared
//! with the page), and [`io`] is the thin loop that does its socket work and runs sessions on a schedule.

pub mod io;
pub mod session;

pub use session::{Config, Granted, ProbeSize, Session};
