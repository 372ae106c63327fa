//! Library behind the `nowcast` command.
