//! `nowcast report` as its readers see it: archives written by the test in a temporary
//! directory (removed when the test ends), read by the built command into its HTML page and
//! its terminal tables. The top must say which target is best and worst now and what to
//! expect next with its range; values are scaled as every table of nowcast shows them; the
//! series of two sources to one target stay apart; failed probes and their reasons are shown,
//! not averaged away; what is missing is said; the page is well formed, self-contained and
//! fits a phone; and hostile target names drive neither the page nor the terminal.

use crate::common;

use common::{nowcast, text, TempDir};
use nowcast::archive::sqlite::Sqlite;
use nowcast::rng::Rng;
use nowcast::runlog::{Outcome, RunLog};
use nowcast_core::record::{Metric, Record, Status};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T0: f64 = 1_767_225_600_000.0; // 2026-01-01T00:00:00Z, a Thursday
const MIN: f64 = 60_000.0;

/// A test's directory, removed when the test ends (passed or failed).
fn temp(name: &str) -> TempDir {
    TempDir::new(&format!("report-{name}"))
}

fn ok(t: f64, source: &str, metric: Metric, v: f64, to: &str) -> Record {
    Record::new(t, source, metric, v, to)
}

fn failed(t: f64, source: &str, metric: Metric, to: &str, status: Status, why: &str) -> Record {
    let mut r = Record::new(t, source, metric, 0.0, to);
    r.value = None;
    r.status = status;
    if status == Status::Timeout {
        r.timeout_ms = Some(5000.0);
    }
    r.error = Some(why.to_string());
    r
}

fn run(job: &str, outcome: Outcome, reason: Option<&str>) -> RunLog {
    RunLog {
        id: 1,
        campaign: "c".into(),
        job: job.into(),
        target: job.split('/').next().unwrap().into(),
        probe: "rtt".into(),
        nominal_ms: T0 as i64,
        due_ms: T0 as i64,
        started_ms: Some(T0 as i64),
        ended_ms: T0 as i64 + 10,
        outcome,
        reason: reason.map(str::to_string),
        slots: 1,
        gate_check: false,
    }
}

/// Writes an archive of `records` (put in time order) and `runs` in `dir`.
fn archive(dir: &Path, mut records: Vec<Record>, runs: &[RunLog]) -> PathBuf {
    records.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
    for r in &records {
        r.validate().unwrap();
    }
    let db = dir.join("a.sqlite");
    Sqlite::open(&db)
        .unwrap()
        .write(&records, runs, None, T0 as i64)
        .unwrap();
    db
}

/// The HTML page, the terminal tables and the JSON of the report of `db`.
fn report(db: &Path) -> (String, String, serde_json::Value) {
    let page = db.with_extension("html");
    let a = db.to_str().unwrap();
    let out = nowcast(
        &["report", "--archive", a, "--html", page.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    let out = nowcast(&["report", "--archive", a], Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tables = text(&out.stdout);
    let out = nowcast(
        &["report", "--archive", a, "--json"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    (html, tables, serde_json::from_slice(&out.stdout).unwrap())
}

/// Every element closed, in order (HTML's void elements and SVG's `/>` aside).
fn well_formed(html: &str) -> Result<(), String> {
    const VOID: [&str; 6] = ["meta", "br", "img", "input", "link", "hr"];
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').ok_or("a tag is not closed")?;
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if name.is_empty() {
            return Err(format!("not a tag: <{tag}>"));
        }
        if let Some(closing) = tag.strip_prefix('/') {
            let _ = closing;
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        } else if !tag.ends_with('/') && !VOID.contains(&name.as_str()) {
            stack.push(name);
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(format!("never closed: {stack:?}"))
    }
}

/// The longest line of the terminal tables, in characters.
fn widest(tables: &str) -> (usize, String) {
    tables
        .lines()
        .map(|l| (l.chars().count(), l.to_string()))
        .max()
        .unwrap_or_default()
}

/// A day of measurements every 10 minutes to three mirrors (iperf3 throughput and TCP RTT),
/// one of them faster than 1 Gbit/s, and UDP loss.
fn three_mirrors() -> Vec<Record> {
    let mut n = Rng::new(7);
    let mut out = Vec::new();
    for k in 0..144 {
        let t = T0 + k as f64 * 10.0 * MIN;
        for (to, rate, rtt) in [
            ("fast.example.org:5201", 2400.0, 12.0),
            ("mid.example.org:5201", 610.0, 48.0),
            ("slow.example.org:5201", 8.5, 190.0),
        ] {
            out.push(ok(
                t,
                "iperf3",
                Metric::Throughput,
                rate * (1.0 + 0.03 * n.symmetric()),
                to,
            ));
            let host = to.replace(":5201", ":8060");
            out.push(ok(
                t + 1000.0,
                "nowcast tcp",
                Metric::Rtt,
                rtt * (1.0 + 0.02 * n.symmetric()),
                &host,
            ));
            out.push(ok(
                t + 2000.0,
                "nowcast udp",
                Metric::Loss,
                0.002 * (1.0 + n.symmetric()),
                &host,
            ));
        }
    }
    out
}

#[test]
fn the_top_says_which_target_is_best_and_worst_now_and_what_to_expect() {
    let dir = temp("now");
    let db = archive(&dir, three_mirrors(), &[]);
    let (html, tables, json) = report(&db);

    // The page: "Now" comes first, with the best and the worst throughput and their ranges.
    let now = html.find("<h2>Now</h2>").expect("a Now section");
    let overview = html.find("<h2>Overview</h2>").expect("the overview");
    assert!(now < overview);
    let top = &html[now..overview];
    let fast = top
        .find("fast.example.org:5201")
        .expect("the best throughput");
    let slow = top
        .find("slow.example.org:5201")
        .expect("the worst throughput");
    assert!(fast < slow, "best first: {top}");
    assert!(top.contains("Gbit/s") && top.contains("Mbit/s"), "{top}");
    // The forecast's range, as "(low–high)", beside each.
    let range = |from: usize| {
        let s = &top[from..];
        let open = s.find('(').unwrap();
        let close = s[open..].find(')').unwrap() + open;
        s[open + 1..close].to_string()
    };
    let r = range(top[fast..].find("<b>").unwrap() + fast);
    let (lo, hi) = r.split_once('–').unwrap_or_else(|| panic!("a range: {r}"));
    let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
    assert!(lo < 2.4 && 2.4 < hi && hi - lo < 1.0, "{r} (Gbit/s)");
    // RTT: lower is better, so the fast mirror is best there too.
    assert!(top.contains("lower is better") && top.contains("higher is better"));

    // The terminal says the same at its top.
    let head: String = tables.lines().take(14).collect::<Vec<_>>().join("\n");
    let best = head
        .lines()
        .find(|l| l.contains("best") && l.contains("fast.example.org:5201"))
        .unwrap_or_else(|| panic!("{tables}"));
    assert!(best.contains("Gbit/s (") && best.contains('–'), "{best}");
    assert!(
        head.lines()
            .any(|l| l.contains("worst") && l.contains("slow.example.org:5201")),
        "{tables}"
    );
    let (w, line) = widest(&tables);
    assert!(w <= 80, "{w} columns: {line}\n{tables}");

    // And the JSON, for a program.
    let tp = json["now"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metric"] == "throughput")
        .unwrap();
    let order: Vec<&str> = tp["ranked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "fast.example.org:5201",
            "mid.example.org:5201",
            "slow.example.org:5201"
        ]
    );
}

/// A mirror added an hour ago with three lucky values is not the best mirror yet: it is
/// listed apart until it has enough values for its forecast to be known.
#[test]
fn a_target_with_a_few_values_is_not_ranked_until_it_has_enough() {
    let dir = temp("few");
    let mut records = three_mirrors();
    for k in 0..3 {
        let t = T0 + (141 + k) as f64 * 10.0 * MIN + 500.0;
        records.push(ok(
            t,
            "iperf3",
            Metric::Throughput,
            9_000.0,
            "new.example.org:5201",
        ));
    }
    let db = archive(&dir, records, &[]);
    let (html, tables, json) = report(&db);

    let top = &html[html.find("<h2>Now</h2>").unwrap()..html.find("<h2>Overview</h2>").unwrap()];
    let not_yet = top
        .find("Not ranked yet (fewer than 10 values)")
        .unwrap_or_else(|| panic!("{top}"));
    assert!(top[not_yet..].contains("new.example.org:5201"), "{top}");
    let best = top.find(">best<").unwrap();
    assert!(
        top[best..].find("fast.example.org:5201") < top[best..].find("new.example.org:5201"),
        "{top}"
    );
    assert!(top.contains("4 targets"), "{top}");

    let head: String = tables.lines().take(16).collect::<Vec<_>>().join("\n");
    assert!(
        head.lines()
            .any(|l| l.contains("best") && l.contains("fast.example.org:5201")),
        "{tables}"
    );
    assert!(
        head.contains("not ranked yet (fewer than 10 values): new.example.org:5201"),
        "{tables}"
    );

    let tp = json["now"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metric"] == "throughput")
        .unwrap();
    assert_eq!(tp["ranked"][0]["target"], "fast.example.org:5201");
    assert_eq!(tp["unranked"][0]["target"], "new.example.org:5201");
    assert_eq!(tp["unranked"][0]["ok"], 3);
}

#[test]
fn values_are_scaled_and_loss_is_in_percent() {
    let dir = temp("units");
    let db = archive(&dir, three_mirrors(), &[]);
    let (html, tables, _) = report(&db);
    for shown in [&html, &tables] {
        assert!(!shown.contains("fraction"), "loss is shown in percent");
        assert!(!shown.contains("2400") && !shown.contains("2399"), "scaled");
    }
    // 2.4 Gbit/s, 0.2 % loss: the row of `metric` under the target's heading, and its median.
    let row_of = |target: &str, metric: &str| -> (String, f64) {
        let row = tables
            .lines()
            .skip_while(|l| !l.starts_with(target))
            .find(|l| l.trim_start().starts_with(metric))
            .unwrap();
        let median = row.split_whitespace().nth(4).unwrap().parse().unwrap();
        (row.to_string(), median)
    };
    let (row, median) = row_of("fast.example.org:5201", "throughput");
    assert!(
        row.contains("Gbit/s") && (2.3..2.5).contains(&median),
        "{row}"
    );
    let (row, median) = row_of("fast.example.org:8060 (nowcast udp)", "loss");
    assert!(
        row.contains("loss %") && (0.1..0.3).contains(&median),
        "{row}"
    );
    assert!(html.contains(r#"loss <span class="small">%</span>"#));
}

#[test]
fn the_series_of_two_sources_to_one_target_stay_apart() {
    // `nowcast tcp` and `nowcast udp` both measure rtt to one host; as in the archive,
    // they are two series, never one average.
    let dir = temp("sources");
    let mut records = Vec::new();
    for k in 0..50 {
        let t = T0 + k as f64 * MIN;
        records.push(ok(t, "nowcast tcp", Metric::Rtt, 0.23, "h:8060"));
        records.push(ok(t + 500.0, "nowcast udp", Metric::Rtt, 0.04, "h:8060"));
    }
    let db = archive(&dir, records, &[]);
    let (html, _, json) = report(&db);
    let series = json["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{series:?}");
    for (s, median) in series.iter().zip([0.23, 0.04]) {
        assert_eq!(s["sources"].as_array().unwrap().len(), 1);
        assert!((s["stats"]["median"].as_f64().unwrap() - median).abs() < 1e-9);
        // A constant series is forecast exactly.
        assert!(s["forecasts"][2]["relative_error"].as_f64().unwrap() < 1e-9);
    }
    // Two cards, with two anchors.
    assert_eq!(
        html.matches(r#"<section class="card" id="s-h-8060-rtt"#)
            .count(),
        2
    );
}

#[test]
fn failed_probes_are_shown_with_their_reasons_not_averaged_away() {
    let dir = temp("failures");
    let mut records = three_mirrors();
    for k in 0..30 {
        let t = T0 + k as f64 * 10.0 * MIN;
        records.push(failed(
            t,
            "nowcast tcp",
            Metric::Rtt,
            "dead.example.org:8060",
            Status::Error,
            "connect: Connection refused (os error 111)",
        ));
    }
    // The slow mirror's throughput timed out now and then, and last.
    records.retain(|r| {
        !(r.to == "slow.example.org:5201" && r.timestamp_ms >= T0 + 143.0 * 10.0 * MIN)
    });
    for k in [20.0, 60.0, 143.0] {
        records.push(failed(
            T0 + k * 10.0 * MIN + 5.0,
            "iperf3",
            Metric::Throughput,
            "slow.example.org:5201",
            Status::Timeout,
            "iperf3: the server did not answer",
        ));
    }
    let db = archive(&dir, records, &[]);
    let (html, tables, json) = report(&db);

    let top = &html[html.find("<h2>Now</h2>").unwrap()..html.find("<h2>Overview</h2>").unwrap()];
    assert!(top.contains("Failing now: 2 targets"), "{top}");
    assert!(top.contains("dead.example.org:8060"), "{top}");
    assert!(
        top.contains("connect: Connection refused (os error 111)"),
        "{top}"
    );
    assert!(top.contains("none ok in this period"), "{top}");
    assert!(top.contains("iperf3: the server did not answer"), "{top}");
    assert!(
        top.contains("last probe failed"),
        "the slow mirror is ranked, marked: {top}"
    );
    // The dead target's card says why it has no plot.
    let card = &html[html.find(r#"id="s-dead-example-org-8060-rtt"#).unwrap()..];
    let card = &card[..card.find("</section>").unwrap()];
    assert!(card.contains("No successful measurement"), "{card}");
    assert!(card.contains("30 failed records"), "{card}");
    // The slow, flaky mirror's plot marks its failures.
    let card = &html[html
        .find(r#"id="s-slow-example-org-5201-throughput"#)
        .unwrap()..];
    let card = &card[..card.find("</section>").unwrap()];
    assert_eq!(card.matches(r#"<path class="marks""#).count(), 1, "{card}");
    assert_eq!(card.matches("v9").count(), 3, "three marks");
    assert!(card.contains("failed (timeout)"), "{card}");
    // The overview gives their share.
    assert!(html.contains("3 · 0</span> <span class=\"small\">2.1 %</span>"));

    // The terminal too.
    let failing = tables
        .split("failing now (the newest records failed):")
        .nth(1)
        .unwrap_or_else(|| panic!("{tables}"));
    assert!(failing.contains("dead.example.org:8060"), "{tables}");
    assert!(failing.contains("Connection refused"), "{tables}");
    assert!(failing.contains("none ok in this period"), "{tables}");
    let s = json["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["target"] == "slow.example.org:5201")
        .unwrap();
    assert_eq!(s["failing"], 1);
    assert_eq!(s["last_error"], "iperf3: the server did not answer");
    assert_eq!(s["failures"].as_array().unwrap().len(), 3);
}

#[test]
fn what_is_missing_is_said_not_left_blank() {
    let dir = temp("missing");
    // No records at all.
    let empty = archive(&dir, Vec::new(), &[]);
    let (html, tables, _) = report(&empty);
    assert!(html.contains("No records"), "{html}");
    assert!(!html.contains("<h2>Overview</h2>"), "no empty table");
    assert!(tables.contains("no records"), "{tables}");
    well_formed(&html).unwrap();

    // Three values on a Thursday morning: too few for a daily fit, and said so.
    let dir = temp("short");
    let records: Vec<Record> = (0..3)
        .map(|k| {
            ok(
                T0 + k as f64 * 3_600_000.0,
                "nowcast tcp",
                Metric::Rtt,
                12.5,
                "new:8060",
            )
        })
        .collect();
    let db = archive(&dir, records, &[]);
    let (html, tables, _) = report(&db);
    assert!(
        html.contains(
            "weekdays: no fit (3 values; it needs at least 4, in at least 18 of the day's 24 hours, UTC)"
        ),
        "{html}"
    );
    assert!(html.contains("weekends: no fit (0 values"), "{html}");
    assert!(tables.contains("-: too few values"), "{tables}");
    // One target: the top says it is the only one.
    assert!(html.contains(r#"<span class="lab">only</span>"#), "{html}");
}

#[test]
fn the_page_is_well_formed_self_contained_and_fits_a_phone() {
    let dir = temp("page");
    let mut records = three_mirrors();
    records.push(failed(
        T0 + 5.0,
        "nowcast tcp",
        Metric::Rtt,
        "dead.example.org:8060",
        Status::Error,
        "refused",
    ));
    let runs = [
        run("fast/rtt", Outcome::Ok, None),
        run("dead/rtt", Outcome::Failed, Some("connect: refused")),
    ];
    let db = archive(&dir, records, &runs);
    let (html, _, _) = report(&db);
    well_formed(&html).unwrap();
    // Nothing to fetch, no script.
    for bad in ["src=", "href=\"http", "url(", "@import", "<script", "<link"] {
        assert!(!html.contains(bad), "{bad}");
    }
    // Every table scrolls within itself on a narrow screen: the page never does.
    let tables = html.matches("<table").count();
    assert!(tables >= 5);
    assert_eq!(
        html.matches(r#"<div class="wrap"><table"#).count(),
        tables,
        "every table in a scrolling box"
    );
    assert!(html.contains("width=device-width"));
    // Dark mode: the page declares both schemes and redefines its colours, the plots'
    // included.
    assert!(html.contains("color-scheme:light dark"));
    let dark = &html[html.find("prefers-color-scheme:dark").unwrap()..];
    assert!(dark[..dark.find("}}").unwrap()].contains("--fitwd"));
    assert!(html.contains("style=\"stroke:var(--fitwd)\""));
    // Plots say their unit and time.
    assert!(html.contains("throughput (Gbit/s) and the forecast made before each value, UTC"));
}

#[test]
fn hostile_target_names_drive_neither_the_page_nor_the_terminal() {
    let dir = temp("hostile");
    let names = [
        "<script>alert(1)</script>",
        "\"><img src=x onerror=alert(1)>",
        "\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}[31mred:8060",
        "x\u{202e}gnp.txt:8060",
    ];
    let mut records = Vec::new();
    for (i, to) in names.iter().enumerate() {
        for k in 0..6 {
            records.push(ok(
                T0 + k as f64 * MIN + i as f64,
                "nowcast tcp",
                Metric::Rtt,
                10.0 + i as f64 + k as f64,
                to,
            ));
        }
        records.push(failed(
            T0 + 10.0 * MIN + i as f64,
            "nowcast tcp",
            Metric::Rtt,
            to,
            Status::Error,
            "<b>bold</b> \u{1b}[2J",
        ));
    }
    let runs = [run(
        "\u{1b}[2Jjob/rtt",
        Outcome::Failed,
        Some("<script>x</script>\u{1b}[1A"),
    )];
    let db = archive(&dir, records, &runs);
    let (html, tables, _) = report(&db);
    well_formed(&html).unwrap();
    assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("<b>bold"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!html.contains('\u{1b}') && !html.contains('\u{7}') && !html.contains('\u{202e}'));
    // Shown escaped, as the terminal shows them.
    assert!(html.contains("\\u{1b}]0;owned\\u{7}"));
    assert!(html.contains("x\\u{202e}gnp.txt:8060"));
    // Anchors are plain and unique.
    let mut ids: Vec<&str> = html
        .split(" id=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert!(ids
        .iter()
        .all(|i| i.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')));
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n);
    // The terminal gets no escape sequence, bell or bidirectional override, only their
    // escaped forms.
    assert!(
        !tables.contains('\u{1b}') && !tables.contains('\u{7}') && !tables.contains('\u{202e}'),
        "{tables:?}"
    );
    assert!(tables.contains("\\u{1b}]0;owned\\u{7}"), "{tables}");
    assert!(tables.contains("x\\u{202e}gnp.txt:8060"), "{tables}");
}

/// A target whose newest records failed is not the best now, however good its values were
/// before: the answering targets are ranked, and it comes after them, said to be failing.
#[test]
fn a_target_failing_now_is_ranked_after_those_that_answer() {
    let dir = temp("failing-best");
    let mut records = Vec::new();
    for k in 0..20 {
        let t = T0 + k as f64 * MIN;
        for (to, rtt) in [
            ("down.example.org:8060", 0.07),
            ("near.example.org:8060", 1.0),
            ("far.example.org:8060", 40.0),
        ] {
            if to.starts_with("down") && k >= 17 {
                records.push(failed(
                    t,
                    "nowcast tcp",
                    Metric::Rtt,
                    to,
                    Status::Error,
                    "connect: Connection refused (os error 111)",
                ));
            } else {
                let v = rtt * (1.0 + 0.01 * (k % 3) as f64);
                records.push(ok(t, "nowcast tcp", Metric::Rtt, v, to));
            }
        }
    }
    let db = archive(&dir, records, &[]);
    let (html, tables, json) = report(&db);
    // The terminal: best and worst among those that answer, then the failing one.
    let now = tables
        .split("\n\n")
        .find(|b| b.starts_with("now:"))
        .unwrap_or_else(|| panic!("{tables}"));
    let line = |label: &str| {
        now.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label}: {now}"))
    };
    assert!(line("best ").contains("near.example.org:8060"), "{now}");
    assert!(line("worst ").contains("far.example.org:8060"), "{now}");
    assert!(
        line("failing ").contains("down.example.org:8060")
            && line("failing ").contains("(failing now)"),
        "{now}"
    );
    // The page: "best" names the answering target, the failing one is marked.
    let top = &html[html.find("<h2>Now</h2>").unwrap()..html.find("<h2>Overview</h2>").unwrap()];
    let best = top.find(r#"<span class="lab">best</span>"#).unwrap();
    let rest = &top[best..];
    assert!(
        rest.find("near.example.org:8060") < rest.find("down.example.org:8060"),
        "{top}"
    );
    assert!(top.contains(r#"<span class="lab">failing</span>"#), "{top}");
    // The JSON: the failing target last.
    let ranked: Vec<(&str, bool)> = json["now"][0]["ranked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["target"].as_str().unwrap(),
                r["failing"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ranked,
        [
            ("near.example.org:8060", false),
            ("far.example.org:8060", false),
            ("down.example.org:8060", true)
        ]
    );
}

#[test]
fn slots_that_did_not_run_are_not_failures_of_the_path() {
    // A campaign's skipped and missed slots leave records that stand for them (status error,
    // the run log's reason): they were counted as the series' failed probes, and the newest
    // of them was quoted as why the target was failing, hiding the probe's own failure.
    let dir = temp("not-run");
    let toml = "name = \"c\"\n\n[[targets]]\nname = \"m\"\nhost = \"127.0.0.1\"\nport = 8060\n\n\
                [[probes]]\nname = \"rtt\"\nkind = \"tcp\"\nevery = \"10m\"\n";
    let plan = nowcast::campaign::config::parse(toml, &dir.0, "c")
        .unwrap()
        .plan;
    let to = "127.0.0.1:8060";
    let mut records = Vec::new();
    let mut runs = Vec::new();
    let mut slot = |k: u64, outcome: Outcome, reason: &str| {
        let mut r = run("m/rtt", outcome, Some(reason));
        r.id = k;
        r.nominal_ms = (T0 + k as f64 * 10.0 * MIN) as i64;
        r.due_ms = r.nominal_ms;
        r.started_ms = None;
        r.ended_ms = r.nominal_ms + 1;
        // A tcp probe's stand-ins: one per metric (rtt, handshake, …); the series of the
        // others are made of nothing else.
        let stand_ins = plan.records_for_run(&r, 0, None);
        assert!(stand_ins.len() > 1);
        records.extend(stand_ins);
        runs.push(r);
    };
    for k in 0..6 {
        slot(k, Outcome::Missed, "the campaign was not running");
    }
    let mut records_ok = Vec::new();
    for k in 6..30 {
        records_ok.push(ok(
            T0 + k as f64 * 10.0 * MIN,
            "nowcast tcp",
            Metric::Rtt,
            20.0 + (k % 3) as f64,
            to,
        ));
    }
    records_ok.push(failed(
        T0 + 30.0 * 10.0 * MIN,
        "nowcast tcp",
        Metric::Rtt,
        to,
        Status::Error,
        "connect: Connection refused (os error 111)",
    ));
    for k in 31..34 {
        slot(k, Outcome::Skipped, "its sanity check failed");
    }
    records.extend(records_ok);
    let db = archive(&dir, records, &runs);
    let (html, tables, json) = report(&db);

    let series = json["series"].as_array().unwrap();
    let s = series
        .iter()
        .find(|s| s["metric"] == "rtt")
        .unwrap_or_else(|| panic!("{json}"));
    // A series of stand-ins alone keeps its source and its period (its heading read
    // "target ()", and two such series shared an anchor).
    let handshake = series
        .iter()
        .find(|s| s["metric"] == "handshake_rtt")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(handshake["sources"], serde_json::json!(["nowcast tcp"]));
    assert_eq!(
        (&handshake["ok"], &handshake["not_run"]),
        (&0.into(), &9.into())
    );
    assert!(handshake["first_ms"].is_number() && handshake["last_ms"].is_number());
    assert!(html.contains("9 slots not run from"), "{html}");
    assert_eq!(
        (&s["ok"], &s["errors"], &s["not_run"], &s["failing"]),
        (&24.into(), &1.into(), &9.into(), &1.into()),
        "{s}"
    );
    // Why the target fails now is the probe's own failure, not the skips after it.
    assert_eq!(
        s["last_error"],
        "connect: Connection refused (os error 111)"
    );
    let failing = tables
        .split("failing now (the newest records failed):")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_else(|| panic!("{tables}"));
    assert!(failing.contains("1 record failed"), "{failing}");
    assert!(failing.contains("connect: Connection"), "{failing}");
    assert!(!failing.contains("skipped"), "{failing}");
    // The series table: 1 failed (4.0 % of 25 probes), 9 not run.
    let row = tables
        .lines()
        .find(|l| l.trim_start().starts_with("rtt ms"))
        .unwrap_or_else(|| panic!("{tables}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[2..6], ["24", "1", "(4.0%)", "9"], "{row}");
    assert!(html.contains(">9 not run</span>"), "{html}");
    assert!(html.contains("0 timeouts · 1 error (4.0 %)"), "{html}");

    // The run log's outcomes are told apart in its own table still.
    assert!(tables.contains("skipped"), "{tables}");

    // Without the run log (the same records in a file), they stay errors, as they read.
    let file = dir.0.join("records.ndjson");
    let out = nowcast(
        &["archive", "export", "--archive", db.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(&file, &out.stdout).unwrap();
    let out = nowcast(
        &["report", file.to_str().unwrap(), "--json"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rtt = json["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "rtt")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!((&rtt["errors"], &rtt["not_run"]), (&10.into(), &0.into()));
}

#[test]
fn a_campaign_the_archive_does_not_have_is_refused_naming_those_it_has() {
    let dir = temp("no-campaign");
    let records: Vec<Record> = (0..5)
        .map(|k| ok(T0 + k as f64 * MIN, "nowcast tcp", Metric::Rtt, 20.0, "a:1"))
        .collect();
    let db = archive(&dir, records, &[run("a/rtt", Outcome::Ok, None)]);
    let a = db.to_str().unwrap();
    let out = nowcast(
        &["report", "--archive", a, "--campaign", "nosuch"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("--campaign 'nosuch': no such campaign") && err.contains("it has 'c'"),
        "{err}"
    );
    // The campaign it has: read, its runs table shown.
    let out = nowcast(
        &["report", "--archive", a, "--campaign", "c"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("a/rtt"), "{}", text(&out.stdout));
    // Files have no run log to read.
    let file = dir.0.join("r.ndjson");
    std::fs::write(&file, "").unwrap();
    let out = nowcast(
        &["report", file.to_str().unwrap(), "--campaign", "c"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("NDJSON files have none"));
}
