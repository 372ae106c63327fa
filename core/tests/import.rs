//! The reader of measurement files (core/src/import) on the files the tools write
//! (tests/import/, made by tests/import/make-fixtures.sh running iperf3, ping, mtr, irtt and
//! sockperf), on the page's sample files and on hand-made ones. What it reads is checked
//! against figures taken from the same files by other means: the tools' own summaries, and
//! serde_json walking the documents.

use nowcast_core::import::{
    export_csv, read_text, Clock, Column, Format, Imported, Options, Problem, Reader, Select,
    SeriesInfo, Sink, EXPORT_HEADER, MAX_LINE,
};
use nowcast_core::json::SerdeJson;
use nowcast_core::record::{Metric, Record, Transport, Unit};
use std::path::PathBuf;

fn dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(sub)
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(dir("tests/import").join(name)).unwrap()
}

fn sample(name: &str) -> String {
    std::fs::read_to_string(dir("../public/samples").join(name)).unwrap()
}

fn read(text: &str) -> Imported {
    read_text(text, SerdeJson)
}

/// Records as NDJSON lines.
fn ndjson(records: &[Record]) -> String {
    records
        .iter()
        .map(Record::to_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

/// The series named `name`.
fn series<'a>(r: &'a Imported, name: &str) -> &'a (SeriesInfo, Vec<f64>, Vec<f64>) {
    r.series
        .iter()
        .find(|s| s.0.name == name)
        .unwrap_or_else(|| panic!("no series {name} in {:?}", names(r)))
}

fn names(r: &Imported) -> Vec<&str> {
    r.series.iter().map(|s| s.0.name.as_str()).collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn min(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

fn clean(r: &Imported) {
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.unsupported, None);
}

#[test]
fn iperf3_tcp_one_point_per_interval_in_mbit_s() {
    let text = fixture("iperf3-tcp.json");
    let r = read(&text);
    clean(&r);
    assert_eq!(r.format, Some(Format::Iperf3));
    let doc = json(&text);
    let t0 = doc["start"]["timestamp"]["timesecs"].as_f64().unwrap();
    let intervals = doc["intervals"].as_array().unwrap();
    let (info, t, v) = series(&r, "iperf3 bandwidth_up to 10.231.82.2:5201");
    assert_eq!(
        (info.metric, info.unit, info.transport, info.clock),
        (
            Some(Metric::BandwidthUp),
            Some(Unit::MbitPerS),
            Some(Transport::Tcp),
            Clock::Epoch
        )
    );
    assert_eq!(v.len(), intervals.len());
    for (i, iv) in intervals.iter().enumerate() {
        assert_eq!(t[i], (t0 + iv["sum"]["end"].as_f64().unwrap()) * 1000.0);
        assert_eq!(v[i], iv["sum"]["bits_per_second"].as_f64().unwrap() / 1e6);
    }
    // iperf3's own summary: the mean of equal intervals is the whole test's rate.
    let sent = doc["end"]["sum_sent"]["bits_per_second"].as_f64().unwrap() / 1e6;
    assert!(
        (mean(v) - sent).abs() / sent < 0.02,
        "{} vs {sent}",
        mean(v)
    );
}

#[test]
fn iperf3_bidir_reads_each_direction_as_the_client_saw_it() {
    let text = fixture("iperf3-tcp-bidir.json");
    let r = read(&text);
    clean(&r);
    let doc = json(&text);
    let up = series(&r, "iperf3 bandwidth_up to 10.231.82.2:5201");
    let down = series(&r, "iperf3 bandwidth_down to 10.231.82.2:5201");
    let rate = |key: &str| -> Vec<f64> {
        doc["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|iv| iv[key]["bits_per_second"].as_f64().unwrap() / 1e6)
            .collect()
    };
    assert_eq!(up.2, rate("sum"));
    assert_eq!(down.2, rate("sum_bidir_reverse"));
}

#[test]
fn iperf3_udp_jitter_and_loss_where_packets_were_received() {
    // -R: the client received, and its own intervals carry jitter and loss.
    let text = fixture("iperf3-udp-reverse.json");
    let r = read(&text);
    clean(&r);
    let doc = json(&text);
    let ivs = doc["intervals"].as_array().unwrap();
    let field = |k: &str, per: f64| -> Vec<f64> {
        ivs.iter()
            .map(|iv| iv["sum"][k].as_f64().unwrap() / per)
            .collect()
    };
    let to = "to 10.231.82.2:5201";
    assert_eq!(
        series(&r, &format!("iperf3 bandwidth_down {to}")).2,
        field("bits_per_second", 1e6)
    );
    assert_eq!(
        series(&r, &format!("iperf3 jitter {to}")).2,
        field("jitter_ms", 1.0)
    );
    let loss = &series(&r, &format!("iperf3 loss {to}")).2;
    assert_eq!(*loss, field("lost_percent", 100.0));
    assert!(
        loss.iter().any(|&l| l > 0.0),
        "the fixture's path drops packets"
    );
    assert_eq!(
        series(&r, &format!("iperf3 loss {to}")).0.unit,
        Some(Unit::Fraction)
    );

    // Forward: the server's intervals (--get-server-output, server -J) carry them.
    let text = fixture("iperf3-udp.json");
    let r = read(&text);
    clean(&r);
    let doc = json(&text);
    let server = doc["server_output_json"]["intervals"].as_array().unwrap();
    let jitter = &series(&r, &format!("iperf3 jitter {to}")).2;
    assert_eq!(jitter.len(), server.len());
    assert_eq!(jitter[0], server[0]["sum"]["jitter_ms"].as_f64().unwrap());
    assert_eq!(series(&r, &format!("iperf3 bandwidth_up {to}")).2.len(), 4);

    // Without the server's intervals, the summary gives one point each.
    let mut doc = json(&fixture("iperf3-udp.json"));
    doc.as_object_mut().unwrap().remove("server_output_json");
    let r = read(&doc.to_string());
    clean(&r);
    let jitter = &series(&r, &format!("iperf3 jitter {to}")).2;
    assert_eq!(
        *jitter,
        [doc["end"]["sum_received"]["jitter_ms"].as_f64().unwrap()]
    );
}

#[test]
fn iperf3_errors_are_said_once() {
    let r = read(&fixture("iperf3-refused.json"));
    assert!(r.series.is_empty());
    assert_eq!(r.error_count, 1);
    assert_eq!(r.errors[0].field.as_deref(), Some("error"));
    assert!(
        r.errors[0].message.contains("Connection refused"),
        "{:?}",
        r.errors
    );
    // Cut short: one error, not one per line.
    let text = fixture("iperf3-tcp.json");
    let r = read(&text[..text.len() / 2]);
    assert_eq!((r.error_count, r.series.len()), (1, 0));
    assert!(
        r.errors[0].message.starts_with("not valid JSON"),
        "{:?}",
        r.errors
    );
    // A value beyond the unit's range is refused, the others kept.
    let mut doc = json(&text);
    doc["intervals"][1]["sum"]["bits_per_second"] = serde_json::json!(1e200);
    let r = read(&doc.to_string());
    assert_eq!(r.error_count, 1);
    assert_eq!(
        r.errors[0].field.as_deref(),
        Some("intervals[1].sum.bits_per_second")
    );
    assert_eq!(r.series[0].2.len(), 3);
}

#[test]
fn the_page_sample_of_iperf3_still_reads() {
    let r = read(&sample("iperf3-reverse.json"));
    clean(&r);
    assert_eq!(names(&r), ["iperf3 bandwidth_down to 10.231.0.2:5201"]);
    assert_eq!(r.series[0].2.len(), 30);
}

/// ping's own summary line: `rtt min/avg/max/mdev = a/b/c/d ms`.
fn ping_summary(text: &str) -> [f64; 3] {
    let line = text
        .lines()
        .find(|l| l.starts_with("rtt min/avg/max"))
        .unwrap();
    let nums: Vec<f64> = line
        .split(" = ")
        .nth(1)
        .unwrap()
        .trim_end_matches(" ms")
        .split('/')
        .map(|x| x.parse().unwrap())
        .collect();
    [nums[0], nums[1], nums[2]]
}

#[test]
fn ping_replies_with_and_without_timestamps() {
    for (file, clock) in [
        ("ping.txt", Clock::Count),
        ("ping-timestamps.txt", Clock::Epoch),
    ] {
        let text = fixture(file);
        let r = read(&text);
        clean(&r);
        assert_eq!(r.format, Some(Format::Ping), "{file}");
        let (info, t, v) = series(&r, "ping rtt to 10.231.82.2");
        assert_eq!((info.metric, info.clock), (Some(Metric::Rtt), clock));
        let received: usize = text
            .lines()
            .find(|l| l.contains("packets transmitted"))
            .and_then(|l| l.split(", ").nth(1)?.split(' ').next()?.parse().ok())
            .unwrap();
        assert_eq!(v.len(), received, "{file}");
        // ping prints a reply's time to three significant digits, its summary to 1 µs.
        let [lo, avg, hi] = ping_summary(&text);
        let near = |a: f64, b: f64| (a - b).abs() <= 0.0015 + 0.005 * b;
        assert!(
            near(min(v), lo) && near(max(v), hi),
            "{file}: {v:?} vs {lo}..{hi}"
        );
        assert!(near(mean(v), avg), "{file}: {} vs {avg}", mean(v));
        if clock == Clock::Epoch {
            assert!(t.windows(2).all(|w| w[1] > w[0]) && t[0] > 1.7e12, "{t:?}");
        } else {
            assert_eq!(t[..3], [0.0, 1000.0, 2000.0]);
        }
    }
}

#[test]
fn mtr_reads_the_last_hop_one_point_per_report() {
    let text = fixture("mtr.json");
    let r = read(&text);
    clean(&r);
    assert_eq!(r.format, Some(Format::Mtr));
    let doc = json(&text);
    let last = doc["report"]["hubs"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        series(&r, "mtr rtt to 10.231.82.2").2,
        [last["Avg"].as_f64().unwrap()]
    );
    assert_eq!(
        series(&r, "mtr loss to 10.231.82.2").2,
        [last["Loss%"].as_f64().unwrap() / 100.0]
    );
    // One report a line: one point each.
    let text = fixture("mtr-lines.ndjson");
    let r = read(&text);
    clean(&r);
    assert_eq!(r.format, Some(Format::Mtr));
    let avgs: Vec<f64> = text
        .lines()
        .map(|l| json(l)["report"]["hubs"][1]["Avg"].as_f64().unwrap())
        .collect();
    let (info, t, v) = series(&r, "mtr rtt to 10.231.82.2");
    assert_eq!(
        (v, t, info.clock),
        (&avgs, &vec![0.0, 1000.0], Clock::Count)
    );
    assert!(
        r.notes.iter().any(|n| n.contains("gives no times")),
        "{:?}",
        r.notes
    );
}

#[test]
fn irtt_rtt_jitter_and_loss_per_round_trip() {
    let text = fixture("irtt.json");
    let r = read(&text);
    clean(&r);
    assert_eq!(r.format, Some(Format::Irtt));
    let doc = json(&text);
    let stats = &doc["stats"];
    let to = "to 10.231.82.2:2112";
    let rtt = &series(&r, &format!("irtt rtt {to}")).2;
    let loss = &series(&r, &format!("irtt loss {to}")).2;
    let jitter = &series(&r, &format!("irtt jitter {to}")).2;
    let sent = stats["packets_sent"].as_f64().unwrap();
    let received = stats["packets_received"].as_f64().unwrap();
    assert_eq!(loss.len() as f64, sent);
    assert_eq!(rtt.len() as f64, received);
    assert!(received < sent, "the fixture's path drops packets");
    let rate = loss.iter().sum::<f64>() / loss.len() as f64;
    let percent = stats["packet_loss_percent"].as_f64().unwrap();
    assert!(
        (rate * 100.0 - percent).abs() < 1e-9,
        "{rate} vs {percent} %"
    );
    // irtt's own RTT statistics, in ns.
    assert_eq!(min(rtt), stats["rtt"]["min"].as_f64().unwrap() / 1e6);
    assert_eq!(max(rtt), stats["rtt"]["max"].as_f64().unwrap() / 1e6);
    assert!((mean(rtt) - stats["rtt"]["mean"].as_f64().unwrap() / 1e6).abs() < 1e-6);
    assert!(!jitter.is_empty() && jitter.iter().all(|&j| j >= 0.0));
}

#[test]
fn sockperf_full_logs_in_ms_of_round_trip() {
    // sockperf's own figures, before the samples: <MIN> and <MAX> observation, in µs.
    let observed = |text: &str, what: &str| -> f64 {
        let line = text.lines().find(|l| l.contains(what)).unwrap();
        line.rsplit('=').next().unwrap().trim().parse().unwrap()
    };
    for (file, half) in [("sockperf-rtt.csv", false), ("sockperf-latency.csv", true)] {
        let text = fixture(file);
        let r = read(&text);
        clean(&r);
        assert_eq!(r.format, Some(Format::Sockperf), "{file}");
        let (info, t, v) = series(&r, "sockperf rtt");
        assert_eq!(info.clock, Clock::Relative);
        let factor = if half { 2e-3 } else { 1e-3 };
        // sockperf rounds its summary and its log apart: within a thousandth of a µs.
        for (got, what) in [(min(v), "<MIN> observation"), (max(v), "<MAX> observation")] {
            let want = observed(&text, what) * factor;
            assert!(
                (got - want).abs() <= 1.01e-3 * factor,
                "{file}: {got} vs {want}"
            );
        }
        assert!(t.windows(2).all(|w| w[1] > w[0]));
        let samples = text
            .lines()
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
            .count();
        assert_eq!(v.len(), samples);
    }
}

#[test]
fn records_one_series_per_metric_transport_and_target() {
    let r = read(&sample("rtt-browser.ndjson"));
    clean(&r);
    assert_eq!(names(&r), ["rtt/websocket to nowcast.example:443"]);
    assert_eq!(r.series[0].2.len(), 298);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("2 records without a value")),
        "{:?}",
        r.notes
    );

    let r = read(&sample("broken.ndjson"));
    assert_eq!(r.series[0].2.len(), 5);
    let faults: Vec<(u64, Option<&str>)> = r
        .errors
        .iter()
        .map(|e| (e.line, e.field.as_deref()))
        .collect();
    assert_eq!(
        faults,
        [
            (3, None),
            (5, Some("schema_version")),
            (6, Some("metric")),
            (8, Some("value"))
        ]
    );

    let examples = std::fs::read_to_string(dir("../public/schema/examples/valid.ndjson")).unwrap();
    let r = read(&examples);
    clean(&r);
    // Two records without a value, two pairs of the same series, two from nowcast pcap
    // (a Wren lower bound and a timestamp RTT of one flow) and two from nowcast fobs: a
    // transfer's goodput, a series, and a congestion event's loss, which is none (a
    // window's loss, not the transfer's) and is counted in a note.
    assert_eq!(r.series.len(), 9, "{:?}", names(&r));
    assert!(names(&r).contains(&"throughput/fobs to 10.231.0.2:8070"));
    assert!(!names(&r).contains(&"loss/fobs to 10.231.0.2:8070"));
    assert!(names(&r).contains(&"avail_bw_lower_bound/pcap to 198.51.100.2:35753"));
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("1 FOBS congestion events")),
        "{:?}",
        r.notes
    );
}

/// A FOBS transfer's records: the congestion events' window losses stay out of the loss
/// series, which holds the transfers' own loss.
#[test]
fn fobs_congestion_events_are_not_values_of_the_loss_series() {
    let rec = |t: u64, metric: &str, value: f64, congestion: bool| {
        let c = if congestion {
            r#","congestion":{"signature_loss_rate":0.0061,"classifier_metric":"complexity","metric_value":0.3011,"p_cpu":0.998,"action":"no_corrective_action","long_term_loss_rate":2e-05,"loss_count":"events","rate_mbit_s":940.5}"#
        } else {
            ""
        };
        let unit = if metric == "loss" {
            "fraction"
        } else {
            "Mbit/s"
        };
        format!(
            r#"{{"schema_version":"1.2","timestamp_ms":{t},"source":"nowcast fobs","metric":"{metric}","value":{value},"unit":"{unit}","to":"h:8070","probe":{{"transport":"fobs"}}{c}}}"#
        )
    };
    let mut lines = Vec::new();
    for transfer in 0..3u64 {
        let t = 1_700_000_000_000 + transfer * 60_000;
        lines.push(rec(t, "loss", 0.3, true));
        lines.push(rec(t + 1, "loss", 0.25, true));
        lines.push(rec(t + 2, "throughput", 900.0, false));
        lines.push(rec(t + 3, "loss", 0.001, false));
    }
    let r = read(&(lines.join("\n") + "\n"));
    assert_eq!(r.error_count, 0, "{:?}", r.errors);
    let loss = r
        .series
        .iter()
        .find(|s| s.0.name == "loss/fobs to h:8070")
        .unwrap();
    assert_eq!(loss.2, [0.001; 3]);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("6 FOBS congestion events")),
        "{:?}",
        r.notes
    );
}

#[test]
fn a_first_record_cut_short_loses_only_itself() {
    let good = r#"{"schema_version":"1.0","timestamp_ms":1,"source":"s","metric":"rtt","value":2,"unit":"ms","to":"x"}"#;
    let text = format!("{}\n{good}\n{good}\n", &good[..40]);
    let r = read(&text);
    assert_eq!(r.format, Some(Format::Ndjson));
    assert_eq!((r.error_count, r.errors[0].line), (1, 1));
    assert_eq!(r.series[0].2.len(), 2);
    // One record, pretty-printed: a document.
    let pretty = serde_json::to_string_pretty(&json(good)).unwrap();
    let r = read(&pretty);
    clean(&r);
    assert_eq!(r.series[0].2, [2.0]);
}

#[test]
fn csv_columns_and_times() {
    let r = read("time,rtt,loss,host\n2023-11-14T22:13:20Z,10,0,a\n1700000001000,12,,b\n# note\nyesterday,1,1,c\n1700000003000,n/a,0.5,d\n");
    assert_eq!(r.format, Some(Format::Csv));
    assert_eq!(names(&r), ["rtt", "loss"]);
    let rtt = series(&r, "rtt");
    assert_eq!(
        (rtt.1.clone(), rtt.2.clone()),
        (vec![1.7e12, 1.700000001e12], vec![10.0, 12.0])
    );
    assert_eq!(series(&r, "loss").2, [0.0, 0.5]);
    let faults: Vec<(u64, Option<&str>)> = r
        .errors
        .iter()
        .map(|e| (e.line, e.field.as_deref()))
        .collect();
    assert_eq!(faults, [(5, Some("time")), (6, Some("rtt"))]);
    assert_eq!(
        r.notes,
        [
            "column(s) of text not read: host",
            "1 empty field (no value) in the columns read, on line 3"
        ]
    );

    // Without a header: time, then columns by index.
    let r = read("1000,5,6\n2000,7,8\n");
    assert_eq!(names(&r), ["column 1", "column 2"]);
    assert_eq!(series(&r, "column 2").1, [1000.0, 2000.0]);
    // Tabs, and one number a line (with a one-word header).
    let r = read("0.0\t5\n0.5\t6\n");
    assert_eq!(
        (r.format, r.series[0].2.clone()),
        (Some(Format::Tsv), vec![5.0, 6.0])
    );
    let r = read("rtt_ms\n1\n2\n");
    assert_eq!((r.format, names(&r)), (Some(Format::Csv), vec!["rtt_ms"]));
    let r = read("1\n2.5\n\n-3e2\n");
    assert_eq!(
        (r.format, r.series[0].2.clone()),
        (Some(Format::Plain), vec![1.0, 2.5, -300.0])
    );
}

#[test]
fn a_time_column_in_seconds_since_1970_is_read_as_seconds() {
    // `date +%s` times, 5 s apart: they were read as ms, 40 values within 0.2 s of January
    // 1970, with no word.
    let r = read("timestamp,rtt_ms\n1700000000,10\n1700000005,11\n1700000010.5,12\n");
    let rtt = series(&r, "rtt_ms");
    assert_eq!(rtt.1, [1.7e12, 1.700000005e12, 1.7000000105e12]);
    assert_eq!(
        r.notes,
        ["time column 'timestamp': read as seconds since 1970 (as ms, its values would be in 1970)"]
    );
    // Without a header too; and ms stay ms.
    let r = read("1700000000,10\n1700000005,11\n");
    assert_eq!(r.series[0].1, [1.7e12, 1.700000005e12]);
    let r = read("time,rtt\n1700000000000,10\n1700000005000,11\n");
    assert_eq!(
        (r.series[0].1.clone(), r.notes.len()),
        (vec![1.7e12, 1.700000005e12], 0)
    );
    // A column named for ms is ms, whatever its values.
    let r = read("timestamp_ms,rtt\n1700000000,10\n");
    assert_eq!((r.series[0].1.clone(), r.notes.len()), (vec![1.7e9], 0));
    // A time that is not one names its unit.
    let r = read("time,rtt\n1700000000,10\nsoon,11\n");
    assert_eq!(
        r.errors[0].message,
        "'soon' is not a time (s since 1970, or an ISO 8601 date)"
    );
}

#[test]
fn columns_sharing_a_name_are_told_apart_by_their_index() {
    // Two columns named rtt_ms: both read, named with their index; asked by name, the
    // reader says which indices choose them (it took the first, and listed `--column
    // "rtt_ms"` as the way to the second).
    let text = "time,rtt_ms,rtt_ms\n1000,10,5\n2000,11,6\n";
    let r = read(text);
    assert_eq!(names(&r), ["rtt_ms (column 1)", "rtt_ms (column 2)"]);
    assert_eq!(series(&r, "rtt_ms (column 2)").2, [5.0, 6.0]);
    assert_eq!(
        series(&r, "rtt_ms (column 2)").0.column.as_deref(),
        Some("2")
    );
    let by_index = Select {
        column: Some(Column::Index(2)),
        ..Select::default()
    };
    assert_eq!(one(text, by_index).0, [5.0, 6.0]);
    let by_name = Select {
        column: Some(Column::Name("rtt_ms".into())),
        ..Select::default()
    };
    let (v, _, problems) = one(text, by_name);
    assert!(v.is_empty());
    assert!(
        matches!(&problems[..], [Problem::Usage(m)]
            if m == "2 columns are named 'rtt_ms': choose one by its index (--column 1, --column 2)"),
        "{problems:?}"
    );
}

#[test]
fn a_line_with_more_fields_than_columns_is_an_error_unless_they_are_empty() {
    // "1,10,99" under a header of two: which column 99 or 10 belongs to is not known (it was
    // read as 10). A trailing comma is no field.
    let r = read("time,rtt\n1000,10,99\n2000,11,\n3000,12\n");
    assert_eq!(series(&r, "rtt").2, [11.0, 12.0]);
    let faults: Vec<(u64, &str)> = r
        .errors
        .iter()
        .map(|e| (e.line, e.message.as_str()))
        .collect();
    assert_eq!(faults, [(2, "3 fields where the first line has 2")]);
}

#[test]
fn times_out_of_order_are_put_in_order_for_the_page_and_named_for_the_cli() {
    // Two runs concatenated, the later first: the page's import puts each series in time
    // order (a stable sort: one time keeps the file's order) and says so.
    let text = "time,rtt\n3000,30\n4000,40\n1000,10\n2000,20\n2000,21\n5000,50\n";
    let r = read(text);
    let rtt = series(&r, "rtt");
    assert_eq!(rtt.1, [1000.0, 2000.0, 2000.0, 3000.0, 4000.0, 5000.0]);
    assert_eq!(rtt.2, [10.0, 20.0, 21.0, 30.0, 40.0, 50.0]);
    assert_eq!(
        r.notes,
        ["rtt: 3 values are earlier than a value before them in the file (shown and forecast in time order)"]
    );
    // One chosen series streams in the file's order, and the note says that instead.
    let (v, reader, _) = one(text, Select::default());
    assert_eq!(v, [30.0, 40.0, 10.0, 20.0, 21.0, 50.0]);
    assert_eq!(
        reader.notes(),
        ["rtt: 3 values are earlier than a value before them in the file (forecast in the file's order)"]
    );
    // In order (equal times included), nothing is said.
    let r = read("time,rtt\n1000,1\n1000,2\n2000,3\n");
    assert_eq!(
        (r.series[0].2.clone(), r.notes.len()),
        (vec![1.0, 2.0, 3.0], 0)
    );
}

#[test]
fn the_export_reads_back_into_its_series() {
    let mut rtt = Record::new(1000.0, "browser", Metric::Rtt, 20.5, "h:443");
    rtt.probe = Some(nowcast_core::record::Probe {
        transport: Some(Transport::Websocket),
        ..Default::default()
    });
    let mut timeout = rtt.clone();
    (timeout.status, timeout.value, timeout.timeout_ms) =
        (nowcast_core::record::Status::Timeout, None, Some(3000.0));
    let down = Record::new(2000.0, "browser", Metric::BandwidthDown, 93.25, "h:443");
    let text = export_csv([
        ("RTT, WebSocket", &[rtt.clone(), timeout][..]),
        ("Download", std::slice::from_ref(&down)),
    ]);
    assert!(text.starts_with(EXPORT_HEADER));
    let r = read(&text);
    clean(&r);
    assert_eq!(
        names(&r),
        ["rtt/websocket to h:443", "bandwidth_down to h:443"]
    );
    assert_eq!(r.series[0].2, [20.5]);
    assert_eq!(r.series[1].0.unit, Some(Unit::MbitPerS));
    // The same records as NDJSON make the same series.
    let nd = read(&format!("{}\n{}\n", rtt.to_line(), down.to_line()));
    assert_eq!(names(&nd), names(&r));
    // A loss above 1 in an export is refused like in a record.
    let r = read(&format!(
        "{EXPORT_HEADER}\n1,1.5,loss,fraction,udp,h,x,s,\n"
    ));
    assert_eq!(r.errors[0].field.as_deref(), Some("value"));
    // An export before the source column reads as it did, and one before the from column.
    let r = read("time,value,metric,unit,transport,to,series\n1,2,rtt,ms,tcp,h,x\n");
    clean(&r);
    assert_eq!(names(&r), ["rtt/tcp to h"]);
    let r = read("time,value,metric,unit,transport,to,series,source\n1,2,rtt,ms,tcp,h,x,s\n");
    clean(&r);
    assert_eq!(names(&r), ["rtt/tcp to h"]);
}

/// `nowcast pcap` names a download's receiver, a client, by its address alone: what one
/// client received from two services is two series, named with the service each came from,
/// in NDJSON and through the export alike; an upload to a service stays one series whatever
/// client port sent it. Before 2026-12-08 a client's downloads from every service it reached
/// were one series.
#[test]
fn a_client_s_downloads_from_two_services_are_two_series() {
    let rec = |t: f64, v: f64, to: &str, from: &str| {
        let mut r = Record::new(t, "nowcast pcap", Metric::Throughput, v, to);
        r.from = Some(from.into());
        r
    };
    let records = [
        rec(1000.0, 90.0, "10.0.0.5", "10.0.0.1:80"),
        rec(2000.0, 5.0, "10.0.0.5", "10.0.0.2:443"),
        rec(3000.0, 91.0, "10.0.0.5", "10.0.0.1:80"),
        rec(4000.0, 1.0, "10.0.0.1:80", "10.0.0.5:40001"),
        rec(5000.0, 2.0, "10.0.0.1:80", "10.0.0.5:40002"),
    ];
    let nd = read(&ndjson(&records));
    clean(&nd);
    let want = [
        "throughput to 10.0.0.5 from 10.0.0.1:80",
        "throughput to 10.0.0.5 from 10.0.0.2:443",
        "throughput to 10.0.0.1:80",
    ];
    assert_eq!(names(&nd), want);
    assert_eq!(nd.series[0].2, [90.0, 91.0]);
    assert_eq!(nd.series[0].0.to.as_deref(), Some("10.0.0.5"));
    assert_eq!(nd.series[0].0.from.as_deref(), Some("10.0.0.1:80"));
    assert_eq!(nd.series[2].0.from, None);
    assert_eq!(nd.series[2].2, [1.0, 2.0]);
    let csv = read(&export_csv([("x", &records[..])]));
    clean(&csv);
    assert_eq!(names(&csv), want);
    assert_eq!(csv.series[1].2, [5.0]);
    // Chosen by the target its name gives, or by the address (the first of its series).
    let text = export_csv([("x", &records[..])]);
    let pick = |target: &str| {
        one(
            &text,
            Select {
                target: Some(target.into()),
                ..Select::default()
            },
        )
        .0
    };
    assert_eq!(pick("10.0.0.5 from 10.0.0.2:443"), [5.0]);
    assert_eq!(pick("10.0.0.5"), [90.0, 91.0]);
}

/// Two sources stay two series through the export, and a FOBS congestion event (a loss
/// record of one window, no value of the loss series) is left out of it, as the reader
/// leaves it out of the records' series: the NDJSON and the CSV of the same records read
/// back alike.
#[test]
fn the_export_keeps_sources_apart_and_congestion_events_out() {
    let mut a = Record::new(1000.0, "pcap", Metric::Rtt, 10.0, "h:80");
    a.probe = Some(nowcast_core::record::Probe {
        transport: Some(Transport::Tcp),
        ..Default::default()
    });
    let mut b = a.clone();
    (b.source, b.value) = ("pcap timestamps".into(), Some(11.0));
    let line = r#"{"schema_version":"1.2","timestamp_ms":1795219209100,"source":"nowcast fobs","metric":"loss","value":0.0123,"unit":"fraction","to":"10.231.0.2:8070","seq":17,"probe":{"transport":"fobs","payload_bytes":1400},"congestion":{"signature_loss_rate":0.0061,"classifier_metric":"complexity","metric_value":0.3011,"p_cpu":0.998,"action":"no_corrective_action","long_term_loss_rate":0.00002,"loss_count":"events","rate_mbit_s":940.5}}"#;
    let event = Record::parse(line).unwrap();
    let records = [a, b, event];
    let text = export_csv([("x", &records[..])]);
    assert_eq!(text.lines().count(), 3, "{text}");
    let csv = read(&text);
    clean(&csv);
    let nd = read(&ndjson(&records));
    assert_eq!(
        names(&csv),
        ["rtt/tcp to h:80", "rtt/tcp to h:80 (pcap timestamps)"]
    );
    assert_eq!(names(&nd), names(&csv));
    assert_eq!(csv.series[1].2, [11.0]);
}

#[test]
fn values_out_of_range_are_refused_at_the_line() {
    let r = read("time,value\n1,1e200\n2,5\n3,-1e101\n4,inf\n");
    assert_eq!(series(&r, "value").2, [5.0]);
    let lines: Vec<u64> = r.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 4, 5]);
    assert!(r.errors.iter().all(|e| e.field.as_deref() == Some("value")));
}

#[test]
fn crlf_and_lf_count_lines_alike() {
    let lf = "time,value\n1,2\n\n2,x\n3,4\n";
    let crlf = lf.replace('\n', "\r\n");
    let (a, b) = (read(lf), read(&crlf));
    assert_eq!(a.series, b.series);
    assert_eq!(a.errors[0].line, 4);
    assert_eq!(b.errors[0].line, 4);
    let ping = fixture("ping.txt").replace('\n', "\r\n");
    clean(&read(&ping));
}

#[test]
fn an_unsupported_file_gets_one_message() {
    for text in [
        "\u{fffd}PNG\r\n\u{1a}\n\0\0\0IHDR\n".to_string(),
        "Dear reader,\nthis is a letter.\nIt has many lines.\n".to_string(),
        "hello world\nmore words\n".to_string(),
        "[1, 2, 3]\n".to_string(),
        "{\"a\": 1}\n{\"b\": 2}\n".to_string(),
        "{\n  \"a\": 1\n}\n".to_string(),
        "just some words here\n".repeat(1000),
    ] {
        let r = read(&text);
        let m = r
            .unsupported
            .as_deref()
            .unwrap_or_else(|| panic!("{text:?}: {r:?}"));
        assert!(
            m.contains("Nowcast reads NDJSON measurement records"),
            "{m}"
        );
        assert!(m.len() < 600, "{m}");
        assert_eq!(r.error_count, 0, "{text:?}: {:?}", r.errors);
    }
}

/// The message reads as one sentence: a binary file is said to be unreadable as text (not
/// "line 1 is not UTF-8 text is in no format"), and a line that is not the format asked for
/// is said to be not that format (not "in no format Nowcast reads", followed by a list of
/// formats that holds the one the line is in).
#[test]
fn an_unsupported_file_is_said_in_one_sentence_and_a_forced_format_is_named() {
    let mut reader = Reader::new(SerdeJson, Options::default());
    #[derive(Default)]
    struct Problems(Vec<Problem>);
    impl Sink for Problems {
        fn point(&mut self, _: usize, _: f64, _: f64) {}
        fn problem(&mut self, p: Problem) {
            self.0.push(p);
        }
    }
    let mut out = Problems::default();
    reader.line(
        1,
        b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0\x01\0\0\0\xa0\xff",
        &mut out,
    );
    let said = format!("{:?}", out.0);
    assert!(
        said.contains("the input (line 1 is not UTF-8 text (at byte 24)) is in no format"),
        "{said}"
    );
    let opts = Options {
        format: Some(Format::Ndjson),
        ..Options::default()
    };
    let mut reader = Reader::new(SerdeJson, opts);
    let mut out = Problems::default();
    reader.line(1, b"time,host,rtt_ms", &mut out);
    reader.line(2, b"1,a,2", &mut out);
    let said = format!("{:?}", out.0);
    assert!(
        said.contains(
            "line 1 ('time,host,rtt_ms') is not ndjson (the format asked for): a JSON object \
             was expected"
        ),
        "{said}"
    );
    assert!(!said.contains("CSV"), "{said}");
    assert_eq!(out.0.len(), 1, "said once: {said}");
}

#[test]
fn long_lines_are_refused_unread_in_linear_time() {
    let long = "1".repeat(MAX_LINE + 1);
    let start = std::time::Instant::now();
    let r = read(&format!("1\n{long}\n3\n"));
    assert_eq!(series(&r, "value").2, [1.0, 3.0]);
    assert_eq!(
        (r.errors[0].line, r.errors[0].text.chars().count()),
        (2, 80)
    );
    // 50 M characters in one field of a record line, and 200 lines of 1 MiB of commas.
    let field = format!(
        r#"{{"schema_version":"1.0","timestamp_ms":1,"source":"s","metric":"rtt","value":2,"unit":"ms","to":"{}"}}"#,
        "x".repeat(50_000_000)
    );
    let r = read(&field);
    assert_eq!(r.error_count, 1);
    let commas = format!(
        "a,b\n1,2\n{}",
        format!("{}\n", ",".repeat(MAX_LINE - 1)).repeat(200)
    );
    let r = read(&commas);
    assert_eq!((r.error_count, series(&r, "b").2.clone()), (0, vec![2.0]));
    assert!(start.elapsed().as_secs_f64() < 5.0, "{:?}", start.elapsed());
}

/// One series chosen, as `nowcast forecast` reads: the values, and what was chosen.
fn one(text: &str, select: Select) -> (Vec<f64>, Reader<SerdeJson>, Vec<Problem>) {
    #[derive(Default)]
    struct Values(Vec<f64>, Vec<Problem>);
    impl Sink for Values {
        fn point(&mut self, _: usize, _: f64, v: f64) {
            self.0.push(v);
        }
        fn problem(&mut self, p: Problem) {
            self.1.push(p);
        }
    }
    let opts = Options {
        select: Some(select),
        ..Options::default()
    };
    let mut reader = Reader::new(SerdeJson, opts);
    let mut out = Values::default();
    for (i, line) in text.split('\n').enumerate() {
        reader.line(i as u64 + 1, line.as_bytes(), &mut out);
    }
    reader.finish(&mut out);
    (out.0, reader, out.1)
}

#[test]
fn one_series_chosen_by_metric_target_transport_or_column() {
    let rec = |metric: &str, unit: &str, to: &str, v: f64| {
        format!(
            r#"{{"schema_version":"1.0","timestamp_ms":1,"source":"s","metric":"{metric}","value":{v},"unit":"{unit}","to":"{to}"}}"#
        )
    };
    let text = [
        rec("rtt", "ms", "a", 1.0),
        rec("bandwidth_down", "Mbit/s", "a", 90.0),
        rec("rtt", "ms", "b", 2.0),
        rec("rtt", "ms", "a", 3.0),
    ]
    .join("\n");
    let (v, r, _) = one(&text, Select::default());
    assert_eq!(v, [1.0, 3.0]);
    assert_eq!(r.series()[r.chosen().unwrap()].name, "rtt to a");
    assert_eq!(r.counts(), [2, 1, 1]);
    let (v, _, _) = one(
        &text,
        Select {
            target: Some("b".into()),
            ..Select::default()
        },
    );
    assert_eq!(v, [2.0]);
    let (v, _, _) = one(
        &text,
        Select {
            metric: Some(Metric::BandwidthDown),
            ..Select::default()
        },
    );
    assert_eq!(v, [90.0]);

    let csv = "time,a,value,b\n1,1,2,3\n2,4,5,6\n";
    assert_eq!(one(csv, Select::default()).0, [2.0, 5.0]);
    let col = |c: Column| Select {
        column: Some(c),
        ..Select::default()
    };
    assert_eq!(one(csv, col(Column::Name("b".into()))).0, [3.0, 6.0]);
    assert_eq!(one(csv, col(Column::Index(1))).0, [1.0, 4.0]);
    // The time column, asked for, is a series of its own.
    assert_eq!(one(csv, col(Column::Index(0))).0, [1.0, 2.0]);
    let (_, _, problems) = one(csv, col(Column::Name("zz".into())));
    assert!(matches!(&problems[..], [Problem::Usage(m)] if m.contains("no column named 'zz'")));
    let (_, _, problems) = one("1\n2\n", col(Column::Index(0)));
    assert!(matches!(&problems[..], [Problem::Usage(m)] if m.contains("--column applies to CSV")));
    // The page's export, one metric of it.
    let export = format!("{EXPORT_HEADER}\n1,20,rtt,ms,websocket,h,R,browser,\n1,90,bandwidth_down,Mbit/s,websocket,h,D,browser,\n2,21,rtt,ms,websocket,h,R,browser,\n");
    assert_eq!(one(&export, Select::default()).0, [20.0, 21.0]);
    let (v, _, _) = one(
        &export,
        Select {
            metric: Some(Metric::BandwidthDown),
            ..Select::default()
        },
    );
    assert_eq!(v, [90.0]);
}

/// Nowcast's own output that holds no measurements (a report of `nowcast forecast` or
/// `nowcast classify`, as JSON or as their tables, or a file of loss signatures) is named as
/// what it is, with what to read instead, not "in no format Nowcast reads" followed by a list
/// of formats. Measurements in each format still read.
#[test]
fn nowcast_s_own_reports_are_named_as_what_they_are() {
    let forecast_json = r#"{"input":{"format":"csv","series":"value","values":300},"mode":"both","report":{"next":[]},"unit":null}"#;
    let diagnosis = r#"{"diagnosis":"cpu","file":"s.sig","label":"cpu","loss_rate":0.19,"metric":"complexity","p_cpu":1.0,"packets":16384,"value":0.39}"#;
    for (text, said) in [
        (
            format!("{forecast_json}\n"),
            "line 1 is nowcast forecast's report on a series",
        ),
        (
            "rtt.csv: 300 values (csv), column value; the file names no unit\n\nNext value: the \
             forecast ± 2·error\n"
                .to_string(),
            "line 1 is nowcast forecast's report on a series",
        ),
        (
            format!("{diagnosis}\n{diagnosis}\n"),
            "line 1 is nowcast classify's diagnosis",
        ),
        (
            "cause    in range   correct     wrong  inconclusive  out of range\n".to_string(),
            "line 1 is nowcast classify's diagnosis",
        ),
        (
            "cpu 16384 245-260 509-543 5304\nnetwork 16384 17\n".to_string(),
            "line 1 is a file of packet-loss signatures",
        ),
        (
            "? 4096\n".to_string(),
            "line 1 is a file of packet-loss signatures",
        ),
    ] {
        let r = read(&text);
        let m = r
            .unsupported
            .as_deref()
            .unwrap_or_else(|| panic!("{text:?}: {r:?}"));
        assert!(m.starts_with(said), "{text:?}: {m}");
        assert!(!m.contains("no format"), "{m}");
    }
    let record = r#"{"schema_version":"1.2","timestamp_ms":1796544974058.9,"source":"nowcast tcp","metric":"rtt","status":"ok","value":0.02,"unit":"ms","to":"h:1"}"#;
    for text in [
        format!("{record}\n{record}\n"),
        "time,value\n1,2\n".to_string(),
        "12.5\n13\n".to_string(),
        "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.05 ms\n".to_string(),
    ] {
        let r = read(&text);
        assert!(r.unsupported.is_none(), "{text:?}: {r:?}");
    }
}

/// A line that is not JSON is named by the file's line, and the parser's place in it by its
/// column only: serde_json counts the one line it was given as "line 1".
#[test]
fn a_broken_json_line_is_placed_by_its_column() {
    let record = r#"{"schema_version":"1.2","timestamp_ms":1,"source":"s","metric":"rtt","status":"ok","value":2,"unit":"ms","to":"h"}"#;
    let r = read(&format!(
        "{record}\n{{\"schema_version\":1, oops}}\n{record}\n"
    ));
    assert_eq!(r.errors[0].line, 2, "{r:?}");
    assert!(
        r.errors[0].message.contains("at column 22") && !r.errors[0].message.contains("line 1"),
        "{}",
        r.errors[0].message
    );
}

/// A document of several lines that is not JSON is named by the file's line it goes wrong on
/// and the column in that line, not by the parser's count of the document's lines; one cut
/// short, just after its last character; a line that is not UTF-8 keeps its place.
#[test]
fn a_broken_json_document_is_placed_by_the_file_s_line_and_column() {
    let doc = "# iperf3 -J, edited\n\n{\n  \"start\": {},\n  \"intervals\": [\n    {\"sum\": oops}\n  ]\n}\n";
    let cut = "{\n  \"intervals\": [\n    {\"sum\": 1}\n";
    let binary: &[&[u8]] = &[b"{", b"  \"title\": \"\xff\",", b"  \"end\": oops", b"}"];
    for (lines, line, message) in [
        (
            doc.split('\n').map(str::as_bytes).collect::<Vec<_>>(),
            6,
            "not valid JSON (expected value at column 13)",
        ),
        (
            cut.split('\n').map(str::as_bytes).collect(),
            3,
            "not valid JSON (EOF while parsing a list at column 15)",
        ),
        (
            binary.to_vec(),
            3,
            "not valid JSON (expected value at column 10)",
        ),
    ] {
        let mut reader = Reader::new(SerdeJson, Options::default());
        let mut r = Imported::default();
        for (i, l) in lines.iter().enumerate() {
            reader.line(i as u64 + 1, l, &mut r);
        }
        reader.finish(&mut r);
        let e = r
            .errors
            .last()
            .unwrap_or_else(|| panic!("{lines:?}: {r:?}"));
        assert_eq!((e.line, e.message.as_str()), (line, message), "{r:?}");
    }
}

/// Two tools' records of the same metric, transport and target are two series, as the
/// archive keeps them (`nowcast pcap`'s two RTT estimators, its three IEPM-BW methods were one
/// series, interleaved); the second is named with its source, and `source` chooses either.
#[test]
fn records_of_two_sources_are_two_series() {
    let rec = |t: u64, source: &str, v: f64| {
        format!(
            r#"{{"schema_version":"1.2","timestamp_ms":{t},"source":"{source}","metric":"rtt","status":"ok","value":{v},"unit":"ms","to":"h:80","probe":{{"transport":"tcp"}}}}"#
        )
    };
    let text = [
        rec(1, "pcap", 10.0),
        rec(1, "pcap timestamps", 11.0),
        rec(2, "pcap", 12.0),
        rec(2, "pcap timestamps", 13.0),
    ]
    .join("\n");
    let r = read(&text);
    clean(&r);
    assert_eq!(
        names(&r),
        ["rtt/tcp to h:80", "rtt/tcp to h:80 (pcap timestamps)"]
    );
    assert_eq!(series(&r, "rtt/tcp to h:80").2, [10.0, 12.0]);
    assert_eq!(
        series(&r, "rtt/tcp to h:80 (pcap timestamps)").2,
        [11.0, 13.0]
    );
    assert_eq!(r.series[1].0.source.as_deref(), Some("pcap timestamps"));
}

/// A number written with thousands separators (`"1,200"`, quoted in CSV) is the line's error,
/// naming the field and saying why, not a column of text (the file was "no column of
/// numbers" although it had `value`); unquoted, `1,200` is two columns.
#[test]
fn thousands_separators_are_named_on_their_line() {
    let r = read("time,value\n1,\"1,200\"\n2,\"1,300\"\n");
    assert_eq!(r.unsupported, None);
    assert_eq!(r.error_count, 2, "{:?}", r.errors);
    let e = &r.errors[0];
    assert_eq!((e.line, e.field.as_deref()), (2, Some("value")));
    assert_eq!(
        e.message,
        "'1,200' is not a number (thousands separators? write it without them: 1200)"
    );
    // Without a header: the quoted field is not a header name.
    let r = read("1,\"1,200\"\n2,\"1,300.5\"\n");
    assert_eq!((r.unsupported.as_ref(), r.errors[0].line), (None, 1));
    assert!(r.errors[1].message.contains(": 1300.5)"), "{:?}", r.errors);
    // Unquoted: two columns, a time and a value.
    let r = read("1,200\n2,300\n");
    clean(&r);
    assert_eq!(series(&r, "column 1").2, [200.0, 300.0]);
    // A column named value that holds text, alone: each line says so.
    let r = read("time,value\n1,abc\n2,7\n");
    assert_eq!(r.unsupported, None);
    assert_eq!(
        (r.errors[0].line, r.errors[0].message.as_str()),
        (2, "'abc' is not a number")
    );
    assert_eq!(series(&r, "value").2, [7.0]);
    // Beside a column of numbers, a column of text is left out, as before.
    let r = read("time,value,rtt\n1,abc,5\n2,def,6\n");
    clean(&r);
    assert_eq!(names(&r), ["rtt"]);
    // Not thousands: a decimal comma, groups of other sizes.
    let r = read("time,value\n1,\"1,5\"\n");
    assert_eq!(r.errors[0].message, "'1,5' is not a number");
}

/// An empty field is no value, counted with the records without one, and said in a note.
#[test]
fn empty_fields_are_counted() {
    let (v, r, p) = one("time,value\n1,5\n2,\n3,7\n4,8\n", Select::default());
    assert_eq!((v, p), (vec![5.0, 7.0, 8.0], vec![]));
    assert_eq!(r.without_value(), 1);
    assert!(
        r.notes()
            .contains(&"1 empty field (no value) in the columns read, on line 3".to_string()),
        "{:?}",
        r.notes()
    );
    // Only the columns read: an empty field of another is not the series' concern.
    let (v, r, _) = one("time,a,value\n1,,5\n2,3,\n3,,6\n", Select::default());
    assert_eq!((v, r.without_value()), (vec![5.0, 6.0], 1));
    // The page reads every column: every empty field counts.
    let r = read("time,a,b\n1,,5\n2,3,\n");
    assert!(r.notes.contains(
        &"2 empty fields (no value) in the columns read, the first on line 2".to_string()
    ));
    // The export: an empty value of the series read.
    let text = "time,value,metric,unit\n1,,rtt,ms\n2,5,rtt,ms\n3,,loss,fraction\n4,6,rtt,ms\n";
    let (v, r, _) = one(text, Select::default());
    assert_eq!((v, r.without_value()), (vec![5.0, 6.0], 1));
}

/// A compressed file is named as such with the command that reads it, as `nowcast pcap`
/// names one, not "line 1 is not UTF-8 text"; a file of `;`-separated fields is told how to
/// convert it.
#[test]
fn compressed_and_semicolon_files_are_told_what_they_are() {
    let stop = |bytes: &[u8]| {
        let mut reader = Reader::new(SerdeJson, Options::default());
        let mut r = Imported::default();
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            reader.line(i as u64 + 1, line, &mut r);
        }
        reader.finish(&mut r);
        r.unsupported.unwrap_or_default()
    };
    for (bytes, name) in [
        (
            &b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x33\xe4\x02\x00"[..],
            "gzip",
        ),
        (b"\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4\x46", "xz"),
        (b"\x28\xb5\x2f\xfd\x24\x02\x11\x00", "zstd"),
        (b"BZh91AY&SY\x4e\xec\xe8\x36\x00\x00\x01", "bzip2"),
    ] {
        let m = stop(bytes);
        assert!(
            m.starts_with(&format!("the input is {name}-compressed (it starts with "))
                && m.contains(&format!("`{name} -dc FILE | nowcast forecast -`")),
            "{m}"
        );
    }
    // A packet capture is pointed to `nowcast pcap` (a user's review, 2026-12-08).
    let mut capture = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    capture.extend_from_slice(&[0xff; 40]);
    let m = stop(&capture);
    assert!(
        m.contains("packet capture (pcap)") && m.contains("`nowcast pcap FILE`"),
        "{m}"
    );
    // A text file starting with "BZh" is text.
    let r = read("BZh\n1\n2\n");
    assert_eq!(
        (&r.unsupported, &series(&r, "BZh").2),
        (&None, &vec![1.0, 2.0])
    );

    for text in [
        "time;value\n1;5\n2;6\n",
        "1;5,2\n2;6,1\n",
        "\"t\";\"v\"\n1;2\n",
    ] {
        let m = read(text).unsupported.unwrap_or_default();
        assert!(
            m.contains("separated by ';'") && m.contains("sed 's/,/./g; s/;/,/g' FILE"),
            "{text:?}: {m}"
        );
    }
    // A ';' inside a CSV field is not a separator.
    let r = read("time,note\n1,\"a;b\"\n");
    assert!(!r.unsupported.unwrap_or_default().contains("separated by"));
    let r = read("\"x;y\",value\n1,2\n");
    clean(&r);
}

/// A record without its `schema_version` is named for what it lacks, not called "no format
/// Nowcast reads" (a user's review, 2026-12-08).
#[test]
fn a_record_without_its_version_is_named_for_it() {
    let r = read("{\"metric\":\"rtt\",\"value\":5,\"unit\":\"ms\"}\n");
    assert_eq!(r.unsupported, None, "{r:?}");
    assert_eq!(
        r.errors[0].field.as_deref(),
        Some("schema_version"),
        "{r:?}"
    );
}
