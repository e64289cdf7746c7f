//! `settee bench plot`: result files rendered as one SVG, written by hand (no plotting dependency). Three panels:
//! throughput over time, latency by percentile (HdrHistogram's classic chart: a "nines" x axis and a logarithmic
//! latency axis), and the run's ops/s per file as bars.

use std::fmt::Write as _;

use crate::cli::PlotArgs;
use crate::report::BenchResult;
use crate::{read_result, BenchError};

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 300.0;
const MARGIN_LEFT: f64 = 90.0;
const MARGIN_RIGHT: f64 = 230.0;
const MARGIN_TOP: f64 = 40.0;
const MARGIN_BOTTOM: f64 = 50.0;
const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
/// The percentile axis ends at five nines; the maximum is drawn there too.
const NINES_MAX: f64 = 5.0;

/// One file's run phase, as drawn.
pub(crate) struct Series {
    pub name: String,
    pub timeline: Vec<(f64, f64)>,
    pub percentiles: Vec<(f64, f64)>,
    pub ops_per_sec: f64,
}

pub(crate) fn plot_files(args: &PlotArgs) -> Result<(), BenchError> {
    let results: Vec<BenchResult> = args.files.iter().map(|f| read_result(f)).collect::<Result<_, _>>()?;
    let series = series_of(&results);
    if series.is_empty() {
        return Err(BenchError::Invalid("no file has a run phase to plot".into()));
    }
    let title = args.title.clone().unwrap_or_else(|| "settee bench".to_owned());
    std::fs::write(&args.output, svg(&title, &series))?;
    println!("wrote {}", args.output.display());
    Ok(())
}

pub(crate) fn series_of(results: &[BenchResult]) -> Vec<Series> {
    let same_case = results.windows(2).all(|w| w[0].case == w[1].case);
    results
        .iter()
        .filter_map(|r| {
            let run = r.run.as_ref()?;
            Some(Series {
                name: if same_case { r.label.clone() } else { format!("{} · {}", r.label, r.case) },
                timeline: run.timeline.iter().map(|p| (p.t_s, p.ops_per_sec)).collect(),
                percentiles: run.percentiles_us.iter().map(|[p, us]| (*p, *us)).collect(),
                ops_per_sec: run.ops_per_sec,
            })
        })
        .collect()
}

/// The x position of a percentile on the nines axis: 0 at 0%, 1 at 90%, 2 at 99%, ... capped at five nines.
fn nines(p: f64) -> f64 {
    if p >= 100.0 {
        return NINES_MAX;
    }
    (-(1.0 - p / 100.0).log10()).min(NINES_MAX)
}

/// A step of 1, 2 or 5 times a power of ten giving about `target` ticks over `0..max`.
fn nice_step(max: f64, target: f64) -> f64 {
    let raw = (max / target).max(f64::MIN_POSITIVE);
    let pow = 10f64.powf(raw.log10().floor());
    let f = raw / pow;
    pow * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn human(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A panel's plotting area.
struct Area {
    x0: f64,
    y0: f64,
    w: f64,
    h: f64,
}

impl Area {
    fn at(panel: usize) -> Area {
        Area {
            x0: MARGIN_LEFT,
            y0: panel as f64 * PANEL_HEIGHT + MARGIN_TOP + 30.0,
            w: WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
            h: PANEL_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM,
        }
    }
    fn frame(&self, out: &mut String, title: &str, x_label: &str, y_label: &str) {
        let _ = writeln!(
            out,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
            self.x0, self.y0, self.w, self.h
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" font-size="15" font-weight="bold">{}</text>"#,
            self.x0,
            self.y0 - 12.0,
            escape(title)
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>"#,
            self.x0 + self.w / 2.0,
            self.y0 + self.h + 38.0,
            escape(x_label)
        );
        let _ = writeln!(
            out,
            r#"<text transform="translate({},{}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>"#,
            self.x0 - 65.0,
            self.y0 + self.h / 2.0,
            escape(y_label)
        );
    }
    fn x_tick(&self, out: &mut String, frac: f64, label: &str) {
        let x = self.x0 + frac * self.w;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle" font-size="11">{}</text>"##,
            self.y0,
            self.y0 + self.h,
            self.y0 + self.h + 16.0,
            escape(label)
        );
    }
    fn y_tick(&self, out: &mut String, frac: f64, label: &str) {
        let y = self.y0 + self.h - frac * self.h;
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
            self.x0,
            self.x0 + self.w,
            self.x0 - 6.0,
            y + 4.0,
            escape(label)
        );
    }
    fn polyline(&self, out: &mut String, points: &[(f64, f64)], color: &str) {
        let pts: Vec<String> = points
            .iter()
            .map(|(fx, fy)| format!("{:.1},{:.1}", self.x0 + fx * self.w, self.y0 + self.h - fy * self.h))
            .collect();
        let _ =
            writeln!(out, r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#, pts.join(" "));
    }
}

fn legend(out: &mut String, panel: usize, series: &[Series]) {
    let area = Area::at(panel);
    for (i, s) in series.iter().enumerate() {
        let y = area.y0 + 10.0 + i as f64 * 18.0;
        let x = area.x0 + area.w + 15.0;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{}" font-size="12">{}</text>"#,
            y - 10.0,
            x + 18.0,
            y,
            escape(&s.name)
        );
    }
}

fn throughput_panel(out: &mut String, series: &[Series]) {
    let a = Area::at(0);
    a.frame(out, "Throughput over time", "seconds", "ops/s");
    let t_max = series.iter().flat_map(|s| s.timeline.iter().map(|p| p.0)).fold(1.0, f64::max);
    let y_max = series.iter().flat_map(|s| s.timeline.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.1;
    let (xs, ys) = (nice_step(t_max, 8.0), nice_step(y_max, 5.0));
    let mut t = 0.0;
    while t <= t_max + 1e-9 {
        a.x_tick(out, t / t_max, &format!("{t}"));
        t += xs;
    }
    let mut v = 0.0;
    while v <= y_max {
        a.y_tick(out, v / y_max, &human(v));
        v += ys;
    }
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.timeline.iter().map(|(t, v)| (t / t_max, v / y_max)).collect();
        a.polyline(out, &pts, COLORS[i % COLORS.len()]);
    }
    legend(out, 0, series);
}

fn latency_panel(out: &mut String, series: &[Series]) {
    let a = Area::at(1);
    a.frame(out, "Latency by percentile (all operations)", "percentile", "latency (µs, log scale)");
    let values = series.iter().flat_map(|s| s.percentiles.iter().map(|p| p.1)).filter(|v| *v > 0.0);
    let lo = values.clone().fold(f64::INFINITY, f64::min).max(0.1).log10().floor();
    let hi = values.fold(1.0, f64::max).log10().ceil().max(lo + 1.0);
    for (n, label) in [(0.0, "0%"), (1.0, "90%"), (2.0, "99%"), (3.0, "99.9%"), (4.0, "99.99%"), (5.0, "99.999%")] {
        a.x_tick(out, n / NINES_MAX, label);
    }
    let mut d = lo;
    while d <= hi {
        a.y_tick(out, (d - lo) / (hi - lo), &human(10f64.powf(d)));
        d += 1.0;
    }
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s
            .percentiles
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .map(|(p, v)| (nines(*p) / NINES_MAX, (v.log10() - lo) / (hi - lo)))
            .collect();
        a.polyline(out, &pts, COLORS[i % COLORS.len()]);
    }
    legend(out, 1, series);
}

fn bars_panel(out: &mut String, series: &[Series]) {
    let a = Area::at(2);
    a.frame(out, "Throughput (run phase)", "ops/s", "");
    let max = series.iter().map(|s| s.ops_per_sec).fold(1.0, f64::max) * 1.15;
    let step = nice_step(max, 6.0);
    let mut v = 0.0;
    while v <= max {
        a.x_tick(out, v / max, &human(v));
        v += step;
    }
    let slot = a.h / series.len() as f64;
    for (i, s) in series.iter().enumerate() {
        let y = a.y0 + i as f64 * slot + slot * 0.15;
        let w = s.ops_per_sec / max * a.w;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            out,
            r#"<rect x="{}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            a.x0,
            slot * 0.7,
            a.x0 + w + 4.0,
            y + slot * 0.35 + 4.0,
            escape(&format!("{} ({:.0} ops/s)", s.name, s.ops_per_sec))
        );
    }
}

pub(crate) fn svg(title: &str, series: &[Series]) -> String {
    let height = 3.0 * PANEL_HEIGHT + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ =
        writeln!(out, r#"<text x="{MARGIN_LEFT}" y="28" font-size="18" font-weight="bold">{}</text>"#, escape(title));
    throughput_panel(&mut out, series);
    latency_panel(&mut out, series);
    bars_panel(&mut out, series);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str) -> Series {
        Series {
            name: name.into(),
            timeline: vec![(1.0, 1000.0), (2.0, 1200.0)],
            percentiles: vec![(0.0, 10.0), (50.0, 20.0), (99.0, 90.0), (100.0, 400.0)],
            ops_per_sec: 1100.0,
        }
    }

    /// The chart is one well-formed SVG document with a line per series in both line panels and a bar each, and
    /// names are escaped.
    #[test]
    fn renders_every_series() {
        let s = svg("t <1>", &[series("a&b"), series("c")]);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 4);
        assert!(s.contains("a&amp;b (1100 ops/s)") && s.contains("t &lt;1&gt;"));
        assert!(!s.contains("NaN") && !s.contains("inf"));
    }

    /// The nines axis puts 90% at 1, 99.9% at 3 and the maximum at the end.
    #[test]
    fn nines_axis() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9 && (nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!((nines(0.0), nines(100.0)), (0.0, NINES_MAX));
        assert_eq!((nice_step(10.0, 5.0), nice_step(9000.0, 5.0), nice_step(1.0, 8.0)), (2.0, 2000.0, 0.2));
    }
}
