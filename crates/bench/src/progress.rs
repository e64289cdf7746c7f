//! The live progress line: ops/s, errors, retries and p99 of the last second, redrawn in place on a terminal (indicatif),
//! or printed as one line per second when stderr is not a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::TimelinePoint;

pub(crate) struct Progress {
    phase: &'static str,
    bar: Option<ProgressBar>,
    plain: bool,
}

impl Progress {
    pub(crate) fn new(phase: &'static str, quiet: bool) -> Progress {
        if quiet {
            return Progress { phase, bar: None, plain: false };
        }
        if !std::io::stderr().is_terminal() {
            return Progress { phase, bar: None, plain: true };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        Progress { phase, bar: Some(bar), plain: false }
    }

    pub(crate) fn update(&mut self, elapsed: Duration, p: &TimelinePoint, total_ops: u64, warming: bool) {
        let line = format!(
            "{:<4} {:>6.1} s{} {:>11.0} ops/s  errors {:<6} retries {:<6} p99 {:>8.1} µs  total {}",
            self.phase,
            elapsed.as_secs_f64(),
            if warming { " (warm-up)" } else { "" },
            p.ops_per_sec,
            p.errors,
            p.retries,
            p.p99_us,
            total_ops
        );
        if let Some(bar) = &self.bar {
            bar.set_message(line);
            bar.tick();
        } else if self.plain {
            eprintln!("{line}");
        }
    }

    pub(crate) fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
