//! Congestion control of a FOBS sender: one trait, one file per controller (quinn-proto's
//! `congestion.rs` shape). A controller sees one report per acknowledged transmission window
//! and sets the pacing rate of what follows. Whether a window's loss counts as congestion
//! is decided before the controller sees it, by the classifier (Dickens §2.2): loss
//! diagnosed as CPU contention with P(CPU) ≥ 0.95 arrives here as `congestion: false`.

mod fixed;
mod highspeed;

pub use fixed::Fixed;
pub use highspeed::{response, HighSpeed, DRAIN, LOW_WINDOW, PROBE_GAIN};
/// How a window's lost packets enter the long-term loss rate ([`HighSpeed`]'s docs): one
/// interval per window with counted loss (TFRC's loss-event rate), or one per lost packet, at
/// most 8 a window (the packet loss rate). The record's type, so that a congestion event says
/// which it was.
pub use nowcast_core::record::LossCount;

/// Windows per round trip the sender opens while the controller is in slow start (one
/// afterwards); the controller's full-pipe check counts its rounds in them. Slow
/// start doubles the rate at most to twice the arrival rate of the window just acknowledged
/// (RFC 5348 §4.3), and that window was sent a window's length plus a round trip earlier:
/// with windows a round trip long the rate doubles only every second round trip (measured
/// on the bench's 1 Gbit/s, 30 ms link: 20 Mbit/s to full rate in ~0.35 s). With quarter
/// windows it doubles every 1.25 round trips, and it still never exceeds twice what the
/// path delivered (TCP's slow start, clocked by its acknowledgements, has the same bound).
pub const SLOW_START_WINDOWS: f64 = 4.0;

/// What one acknowledged window tells the controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowReport {
    /// Packets in the window.
    pub packets: u64,
    /// Packets of the window the receiver did not get.
    pub lost: u64,
    /// Whether the loss is to be answered as network congestion.
    pub congestion: bool,
    /// The window was sent before the last answer took effect (within one RTT of it): its
    /// loss is part of the congestion already answered, and the rate holds (RFC 5348 §5.2's
    /// loss events; TCP's one reduction per window of data, RFC 5681 §3.2).
    pub hold: bool,
    /// The receiver's arrival rate over the window, bytes/s (`None`: fewer than 2 arrivals).
    pub receive_rate: Option<f64>,
    /// The smoothed round-trip time, seconds.
    pub rtt: f64,
    /// This window's own round-trip sample (its end to its acknowledgement, less the
    /// receiver's hold), seconds: above the path's least, the bottleneck's queue.
    pub rtt_sample: f64,
}

/// A rate controller.
pub trait Controller: Send {
    /// Takes one acknowledged window.
    fn on_window(&mut self, report: &WindowReport);
    /// The pacing rate now, bytes/s.
    fn rate(&self) -> f64;
    /// The congestion window the rate stands for, packets per RTT.
    fn window(&self) -> f64;
    /// The long-term loss rate the controller uses (0 before any counted loss).
    fn loss_rate(&self) -> f64;
    /// What the long-term loss rate counts, when the controller keeps one.
    fn loss_count(&self) -> Option<LossCount> {
        None
    }
    /// Lowers the highest rate the controller may set (the receiver's limit), bytes/s.
    fn set_cap(&mut self, max: f64);
    /// Whether the controller is still in slow start (no counted loss yet, and the path not
    /// yet found full).
    fn in_slow_start(&self) -> bool {
        false
    }
}
