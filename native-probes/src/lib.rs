//! Library behind the `nowcast` command: reading measurement series, evaluating forecasters
//! over them, the network probes' cores and the server they talk to.

pub mod delay;
pub mod evaluate;
pub mod net;
pub mod probe;
pub mod series_input;
pub mod serve;
pub mod stop;
