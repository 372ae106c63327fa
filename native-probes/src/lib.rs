//! Library behind the `nowcast` command, one module per concept. The deterministic cores
//! take bytes and times as arguments and give decisions and records (no sockets, no clock,
//! no printing): [`tcp::session`], [`tcp::bandwidth`], [`udp::burst`], [`wire`],
//! [`schedule`], [`series`], [`evaluate`] and [`series_input`] (any reader). The edges beside
//! them do the I/O: [`tcp::io`], [`udp::io`], [`periodic`], [`serve`], [`delay`], [`net`],
//! [`clock`], [`stop`], [`forecast`], and [`output`]'s record sinks.

pub mod classify;
pub mod clock;
pub mod delay;
pub mod evaluate;
pub mod fobs;
pub mod forecast;
pub mod net;
pub mod output;
pub mod periodic;
pub mod schedule;
pub mod series;
pub mod series_input;
pub mod serve;
pub mod stop;
pub mod tcp;
pub mod udp;
pub mod wire;
