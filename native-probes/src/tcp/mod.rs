//! `nowcast tcp`: the NWS TCP probe (JavaNws §2.1.1). The session is a deterministic state
//! machine ([`session`]), its bandwidth arithmetic is [`bandwidth`], and [`io`] is the thin
//! loop that does its socket work and runs sessions on a schedule.

pub mod bandwidth;
pub mod io;
pub mod session;

pub use session::{Config, Granted, Session};
