//! `nowcast bench timeouts`: Allen, Wolski & Plank's adaptive-timeout experiment, scaled in
//! time. [`model`] (the tree, the seeded delays, the policies) and [`stats`] (Tables 1 and 2
//! with confidence intervals) are cores; [`run`] runs it on loopback.

pub mod model;
pub mod run;
pub mod stats;
