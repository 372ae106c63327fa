//! Library behind the `nowcast` command: reading measurement series, evaluating forecasters
//! over them, and (in later modules) the network probes and their server.

pub mod evaluate;
pub mod series_input;
