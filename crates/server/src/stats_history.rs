//! The node's statistics history, as Couchbase's console and `/pools/default/buckets/<b>/stats` read it: a
//! sample of each bucket's counters and gauges every second, kept at Couchbase's zoom levels (a minute at 1 s, an
//! hour at 4 s, a day at 1 min, a week at 10 min, a month at 30 min, a year at 6 h). A running total (ops, hits)
//! is kept as its per-second rate since the tier's previous sample, which over a coarse tier is the average rate
//! of its interval, as Couchbase shows it.
//!
//! Sans-IO: [`History::record`] takes the time and the values; the sampler task that reads the node lives in
//! `stats_sampler`. Memory: one `f32` per series per sample, about 26 KiB per series when every tier is full
//! (6,504 samples), so about 0.75 MiB for a bucket's 30 statistics.

use std::collections::{BTreeMap, VecDeque};

/// One zoom level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tier {
    /// Couchbase's `zoom` name.
    pub zoom: &'static str,
    pub interval_ms: u64,
    pub samples: usize,
}

/// Couchbase's zoom levels, finest first.
pub const TIERS: [Tier; 6] = [
    Tier { zoom: "minute", interval_ms: 1_000, samples: 60 },
    Tier { zoom: "hour", interval_ms: 4_000, samples: 900 },
    Tier { zoom: "day", interval_ms: 60_000, samples: 1_440 },
    Tier { zoom: "week", interval_ms: 600_000, samples: 1_152 },
    Tier { zoom: "month", interval_ms: 1_800_000, samples: 1_488 },
    Tier { zoom: "year", interval_ms: 21_600_000, samples: 1_464 },
];

impl Tier {
    /// The tier of a `zoom` name (Couchbase's default: `minute`).
    pub fn named(zoom: Option<&str>) -> Option<Tier> {
        let zoom = zoom.unwrap_or("minute");
        TIERS.iter().find(|t| t.zoom == zoom).copied()
    }

    /// The finest tier whose span covers `span_ms` back from now (the coarsest if none does).
    pub fn covering(span_ms: u64) -> Tier {
        TIERS.iter().find(|t| t.interval_ms * t.samples as u64 >= span_ms).copied().unwrap_or(TIERS[TIERS.len() - 1])
    }
}

/// A series: a bucket (empty for node-wide ones) and a statistic's Couchbase name. A statistics section other
/// than a bucket's starts with `@` (Couchbase's `@xdcr-<bucket>`); a key under a section names its item after a
/// `/` (`@xdcr-<bucket>/replications/<uuid>/<source>/<target>`), and its series is read as
/// `<item>/<statistic>`, as Couchbase names XDCR's per-replication statistics.
pub type SeriesKey = (String, &'static str);

/// One tier's samples: the times, and per series one value per time (NaN where the series had none).
#[derive(Default)]
struct TierData {
    last_slot: Option<u64>,
    /// The running totals of the [`Shown::Rate`] series at the last sample, and its time.
    last_totals: BTreeMap<SeriesKey, (u64, f64)>,
    times: VecDeque<u64>,
    series: BTreeMap<SeriesKey, VecDeque<f32>>,
}

/// What a reader gets for one tier: sample times (Unix ms) and each series' values (None where absent).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    pub times: Vec<u64>,
    pub series: BTreeMap<String, Vec<Option<f64>>>,
}

/// How a reader shows a sampled statistic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// As sampled (items, bytes, queue lengths).
    Gauge,
    /// A running total shown as its per-second rate between neighbouring samples (ops, hits, misses).
    Rate,
    /// A percentage: averaged, not summed, across nodes.
    Ratio,
    /// A mean (a latency): averaged, not summed, across nodes.
    Average,
}

/// The statistics sampled for every bucket (and `curr_connections` for the node), under Couchbase's names.
pub const STATS: &[(&str, Shown)] = &[
    ("ops", Shown::Rate),
    ("cmd_get", Shown::Rate),
    ("cmd_set", Shown::Rate),
    ("get_hits", Shown::Rate),
    ("get_misses", Shown::Rate),
    ("delete_hits", Shown::Rate),
    ("delete_misses", Shown::Rate),
    ("incr_hits", Shown::Rate),
    ("incr_misses", Shown::Rate),
    ("decr_hits", Shown::Rate),
    ("decr_misses", Shown::Rate),
    ("cas_hits", Shown::Rate),
    ("cas_misses", Shown::Rate),
    ("cas_badval", Shown::Rate),
    ("ep_num_value_ejects", Shown::Rate),
    ("ep_bg_fetched", Shown::Rate),
    ("ep_tmp_oom_errors", Shown::Rate),
    ("curr_items", Shown::Gauge),
    ("curr_items_tot", Shown::Gauge),
    ("vb_replica_curr_items", Shown::Gauge),
    ("mem_used", Shown::Gauge),
    ("ep_max_size", Shown::Gauge),
    ("ep_mem_low_wat", Shown::Gauge),
    ("ep_mem_high_wat", Shown::Gauge),
    ("ep_queue_size", Shown::Gauge),
    ("disk_write_queue", Shown::Gauge),
    ("vb_active_num", Shown::Gauge),
    ("vb_replica_num", Shown::Gauge),
    ("vb_pending_num", Shown::Gauge),
    ("curr_connections", Shown::Gauge),
    ("vb_active_resident_items_ratio", Shown::Ratio),
    ("ep_resident_items_rate", Shown::Ratio),
];

/// The statistics sampled for every replication this node runs (section `@xdcr-<source bucket>`), under the
/// names ns_server gives them (`replications/<uuid>/<source>/<target>/<name>`; Prometheus `xdcr_<name>_total`),
/// and `replication_changes_left`, the bucket's sum. The counts are running totals shown as they are, as Couchbase
/// shows them; `rate_*` are the same totals shown per second, and `bandwidth_usage` is `data_replicated` (bytes) per
/// second, as ns_server derives it.
pub const XDCR_STATS: &[(&str, Shown)] = &[
    ("changes_left", Shown::Gauge),
    ("docs_checked", Shown::Gauge),
    ("docs_received_from_dcp", Shown::Gauge),
    ("docs_written", Shown::Gauge),
    ("docs_filtered", Shown::Gauge),
    ("docs_failed_cr_source", Shown::Gauge),
    ("set_docs_written", Shown::Gauge),
    ("deletion_docs_written", Shown::Gauge),
    ("expiry_docs_written", Shown::Gauge),
    ("set_failed_cr_source", Shown::Gauge),
    ("deletion_failed_cr_source", Shown::Gauge),
    ("expiry_failed_cr_source", Shown::Gauge),
    ("set_received_from_dcp", Shown::Gauge),
    ("deletion_received_from_dcp", Shown::Gauge),
    ("expiry_received_from_dcp", Shown::Gauge),
    ("data_replicated", Shown::Gauge),
    ("docs_rep_queue", Shown::Gauge),
    ("size_rep_queue", Shown::Gauge),
    ("num_checkpoints", Shown::Gauge),
    ("rate_replicated", Shown::Rate),
    ("rate_received_from_dcp", Shown::Rate),
    ("bandwidth_usage", Shown::Rate),
    ("wtavg_docs_latency", Shown::Average),
    ("replication_changes_left", Shown::Gauge),
];

/// How `name` is shown (a name outside [`STATS`] and [`XDCR_STATS`] as a gauge); a section's `<item>/<stat>` by
/// its statistic.
pub fn shown(name: &str) -> Shown {
    let stat = name.rsplit('/').next().unwrap_or(name);
    STATS.iter().chain(XDCR_STATS).find(|(n, _)| *n == stat).map_or(Shown::Gauge, |(_, s)| *s)
}

#[derive(Default)]
pub struct History {
    tiers: [TierData; TIERS.len()],
}

impl History {
    /// Records the values of one sampling at `now_ms` (Unix ms) in every tier whose interval has moved on since
    /// its last sample. A series seen for the first time reads as absent before; one no longer reported gets
    /// absent values, and goes once none of its values is left.
    pub fn record(&mut self, now_ms: u64, values: &BTreeMap<SeriesKey, f64>) {
        for (tier, data) in TIERS.iter().zip(self.tiers.iter_mut()) {
            let slot = now_ms / tier.interval_ms;
            if data.last_slot.is_some_and(|last| last >= slot) {
                continue;
            }
            data.last_slot = Some(slot);
            let len = data.times.len();
            data.times.push_back(now_ms);
            for key in values.keys() {
                data.series.entry(key.clone()).or_insert_with(|| std::iter::repeat_n(f32::NAN, len).collect());
            }
            for (key, column) in data.series.iter_mut() {
                let value = match values.get(key) {
                    Some(total) if shown(key.1) == Shown::Rate => {
                        let last = data.last_totals.insert(key.clone(), (now_ms, *total));
                        match last {
                            Some((t, before)) if *total >= before && now_ms > t => {
                                ((total - before) * 1000.0 / (now_ms - t) as f64) as f32
                            }
                            _ => f32::NAN,
                        }
                    }
                    Some(v) => *v as f32,
                    None => {
                        data.last_totals.remove(key);
                        f32::NAN
                    }
                };
                column.push_back(value);
            }
            if data.times.len() > tier.samples {
                data.times.pop_front();
                for column in data.series.values_mut() {
                    column.pop_front();
                }
                data.series.retain(|_, column| column.iter().any(|v| !v.is_nan()));
            }
        }
    }

    /// The newest value of `bucket`'s statistic `stat`, if it has one.
    pub fn latest(&self, bucket: &str, stat: &'static str) -> Option<f64> {
        let column = self.tiers[0].series.get(&(bucket.to_owned(), stat))?;
        column.iter().rev().find(|v| !v.is_nan()).map(|v| f64::from(*v))
    }

    /// `bucket`'s series (and the node-wide ones, bucket "", for a bucket) in `tier`, from the samples after
    /// `since_ms`; for a section (`@...`) also its items' series, named `<item>/<statistic>`.
    pub fn samples(&self, tier: Tier, bucket: &str, since_ms: Option<u64>) -> Samples {
        let Some(at) = TIERS.iter().position(|t| *t == tier) else { return Samples::default() };
        let data = &self.tiers[at];
        let skip = since_ms.map_or(0, |since| data.times.iter().take_while(|t| **t <= since).count());
        let mut out = Samples { times: data.times.iter().skip(skip).copied().collect(), ..Samples::default() };
        let section = bucket.starts_with('@');
        for ((b, name), column) in &data.series {
            let item = b.strip_prefix(bucket).and_then(|rest| rest.strip_prefix('/')).filter(|_| section);
            let name = match item {
                Some(item) => format!("{item}/{name}"),
                None if b == bucket || (b.is_empty() && !section) => (*name).to_owned(),
                None => continue,
            };
            let values = column.iter().skip(skip).map(|v| (!v.is_nan()).then_some(f64::from(*v))).collect();
            out.series.insert(name, values);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(entries: &[(&str, &'static str, f64)]) -> BTreeMap<SeriesKey, f64> {
        entries.iter().map(|(b, n, v)| (((*b).to_owned(), *n), *v)).collect()
    }

    /// Proves each tier keeps one sample per interval and at most its length, oldest dropped first.
    #[test]
    fn tiers_sample_once_per_interval_and_keep_their_length() {
        let mut h = History::default();
        for s in 0..200u64 {
            h.record(s * 1_000 + 10, &values(&[("b", "curr_items", s as f64)]));
        }
        let minute = h.samples(Tier::named(None).unwrap(), "b", None);
        assert_eq!(minute.times.len(), 60);
        assert_eq!(minute.series["curr_items"].first(), Some(&Some(140.0)));
        assert_eq!(minute.times.first(), Some(&140_010));
        assert_eq!(minute.series["curr_items"].last(), Some(&Some(199.0)));
        let hour = h.samples(Tier::named(Some("hour")).unwrap(), "b", None);
        assert_eq!(hour.times.len(), 50, "one sample per 4 s over 200 s");
        assert_eq!(hour.series["curr_items"][1], Some(4.0));
        assert_eq!(h.samples(Tier::named(Some("day")).unwrap(), "b", None).times.len(), 4);
    }

    /// A bucket reads its own series and the node-wide ones, absent before a series first appeared and after it
    /// stopped; `since` keeps only later samples; a series with no value left is forgotten.
    #[test]
    fn series_come_and_go_and_readers_see_their_bucket_only() {
        let mut h = History::default();
        h.record(1_000, &values(&[("a", "mem_used", 1.0), ("", "curr_connections", 5.0)]));
        h.record(2_000, &values(&[("a", "mem_used", 2.0), ("b", "mem_used", 7.0), ("", "curr_connections", 6.0)]));
        h.record(3_000, &values(&[("b", "mem_used", 8.0)]));
        let a = h.samples(TIERS[0], "a", None);
        assert_eq!(a.times, vec![1_000, 2_000, 3_000]);
        assert_eq!(a.series["mem_used"], vec![Some(1.0), Some(2.0), None]);
        assert_eq!(a.series["curr_connections"], vec![Some(5.0), Some(6.0), None]);
        let b = h.samples(TIERS[0], "b", Some(1_500));
        assert_eq!(b.times, vec![2_000, 3_000]);
        assert_eq!(b.series["mem_used"], vec![Some(7.0), Some(8.0)]);
        for s in 4..70u64 {
            h.record(s * 1_000, &values(&[("b", "mem_used", s as f64)]));
        }
        assert!(!h.samples(TIERS[0], "a", None).series.contains_key("mem_used"), "bucket a's series is gone");
    }

    /// A section (`@xdcr-<bucket>`) reads its own series and its items' as `<item>/<stat>`, not the node-wide
    /// ones nor another section's; a bucket does not read its section's; a section item's statistic is shown by
    /// its last name.
    #[test]
    fn a_section_reads_its_items_series_under_their_names() {
        let mut h = History::default();
        let item = "@xdcr-b/replications/u/b/t";
        h.record(
            1_000,
            &values(&[
                (item, "docs_written", 4.0),
                ("@xdcr-b", "replication_changes_left", 2.0),
                ("@xdcr-bb/replications/u/bb/t", "docs_written", 9.0),
                ("b", "curr_items", 1.0),
                ("", "curr_connections", 5.0),
            ]),
        );
        let section = h.samples(TIERS[0], "@xdcr-b", None);
        let names: Vec<&str> = section.series.keys().map(String::as_str).collect();
        assert_eq!(names, ["replication_changes_left", "replications/u/b/t/docs_written"]);
        assert!(!h.samples(TIERS[0], "b", None).series.keys().any(|n| n.contains("docs_written")));
        assert_eq!(shown("replications/u/b/t/rate_replicated"), Shown::Rate);
        assert_eq!(shown("replications/u/b/t/wtavg_docs_latency"), Shown::Average);
    }

    /// Running totals read as per-second rates; gauges as sampled; a reset (restart) reads as absent.
    #[test]
    fn rates_come_from_neighbouring_totals() {
        let mut h = History::default();
        for (t, ops) in [(1_000, 10.0), (2_000, 30.0), (4_000, 50.0), (5_000, 0.0)] {
            h.record(t, &values(&[("b", "ops", ops), ("b", "curr_items", ops)]));
        }
        let shown = h.samples(TIERS[0], "b", None);
        assert_eq!(shown.series["ops"], vec![None, Some(20.0), Some(10.0), None]);
        assert_eq!(shown.series["curr_items"], vec![Some(10.0), Some(30.0), Some(50.0), Some(0.0)]);
    }

    /// The tier for a range covers it with the finest resolution that reaches back far enough.
    #[test]
    fn the_covering_tier_is_the_finest_long_enough() {
        assert_eq!(Tier::covering(60_000).zoom, "minute");
        assert_eq!(Tier::covering(61_000).zoom, "hour");
        assert_eq!(Tier::covering(u64::MAX).zoom, "year");
        assert_eq!(Tier::named(Some("fortnight")), None);
    }
}
