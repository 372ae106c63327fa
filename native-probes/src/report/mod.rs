//! `nowcast report`: IEPM-BW's analysis of the archive ([`analysis`]), as tables for a
//! terminal ([`text`]), JSON, or one self-contained HTML file with inline SVG plots
//! ([`html`]). All three are deterministic cores; the command reads the archive and writes.

pub mod analysis;
pub mod html;
pub mod svg;
pub mod text;
