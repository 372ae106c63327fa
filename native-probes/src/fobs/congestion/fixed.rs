//! A constant rate, whatever happens: congestion control disabled, as in the paper's
//! signature collection and overhead runs (Dickens §3.1.4, §5). For emulated-link
//! experiments only; never the default.

use super::{Controller, WindowReport};

pub struct Fixed {
    rate: f64,
    packet: f64,
    rtt: f64,
}

impl Fixed {
    /// `rate` bytes/s of `packet`-byte payloads.
    pub fn new(rate: f64, packet: f64) -> Self {
        Self {
            rate,
            packet,
            rtt: 0.0,
        }
    }
}

impl Controller for Fixed {
    fn on_window(&mut self, report: &WindowReport) {
        self.rtt = report.rtt;
    }
    fn rate(&self) -> f64 {
        self.rate
    }
    fn window(&self) -> f64 {
        self.rate * self.rtt / self.packet
    }
    fn loss_rate(&self) -> f64 {
        0.0
    }
    fn set_cap(&mut self, max: f64) {
        self.rate = self.rate.min(max);
    }
}
