//! `nowcast proxy`: a reverse proxy (HTTP/1.1, and HTTP/2 from clients) that sends each unit
//! of work to the replica forecast to be fastest (Zangrilli & Lowekamp §4–5). The decisions
//! are the core [`policy`] (with [`budget`]'s retry budget, sticky table and sizes of
//! requests, and [`metrics`]' text); the edges are the server ([`server`], with what it does
//! to header fields in `headers` and its per-client cap in `clients`), the upstream
//! connections ([`upstream`]), the bodies both carry ([`body`]) and the live capture of
//! those connections for Wren ([`capture`]).

pub mod body;
pub mod budget;
pub mod capture;
mod clients;
mod headers;
pub mod metrics;
pub mod policy;
pub mod server;
pub mod upstream;
