//! The probes' pure cores: the wire protocol, the bandwidth arithmetic, UDP accounting, the
//! forecast series with their timeouts, and the output they feed.

pub mod bandwidth;
pub mod report;
pub mod series_set;
pub mod udp;
pub mod wire;
