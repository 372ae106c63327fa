//! What `nowcast campaign check` prints for people fits in 100 columns, and a mistyped
//! subcommand is a usage error (status 2), as README's exit statuses say.

use crate::common;

use common::{nowcast, text};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn check_of_the_example_fits_in_100_columns() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/campaign.toml");
    let out = nowcast(&["campaign", "check", example], LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for l in shown.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
        assert_eq!(l, l.trim_end(), "trailing spaces");
    }
    assert!(
        shown.starts_with("campaign slac-like: 2 targets, 11 probes, 15 jobs;"),
        "{shown}"
    );
    let rtt = shown
        .lines()
        .position(|l| l.starts_with("  caltech/rtt "))
        .unwrap();
    let lines: Vec<&str> = shown.lines().collect();
    assert!(lines[rtt].ends_with("sanity check"), "{shown}");
    assert!(
        lines[rtt + 1].starts_with("      every 5m + slip < 30s, bound 10s, first "),
        "{shown}"
    );
}

#[test]
fn a_mistyped_subcommand_is_a_usage_error() {
    let out = nowcast(&["campaign", "chek", "c.toml"], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("'chek' is not a subcommand of campaign (status or check)"),
        "{}",
        text(&out.stderr)
    );
}
