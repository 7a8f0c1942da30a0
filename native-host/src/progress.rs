//! A one-line progress bar on stderr: shown only when stderr is a terminal or `--progress`
//! forces it, so logs and pipes stay clean.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::time::Instant;

pub struct Progress {
    on: bool,
    label: String,
    total: u64,
    unit: &'static str,
    last: Option<Instant>,
    /// The last value drawn.
    shown: Option<u64>,
    start: Instant,
}

impl Progress {
    /// A bar for `total` steps of `unit` (`"B"` prints sizes in MiB).
    pub fn new(force: bool, label: &str, total: u64, unit: &'static str) -> Progress {
        Progress {
            on: force || std::io::stderr().is_terminal(),
            label: label.to_string(),
            total,
            unit,
            last: None,
            shown: None,
            start: Instant::now(),
        }
    }

    fn fmt(&self, n: u64) -> String {
        if self.unit == "B" {
            format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
        } else {
            format!("{n}")
        }
    }

    /// Show `done` of the total (redrawn at most every 50 ms, and always at the end).
    pub fn set(&mut self, done: u64) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        if done < self.total && self.last.is_some_and(|t| (now - t).as_millis() < 50) {
            return;
        }
        self.last = Some(now);
        self.shown = Some(done);
        let width = 30;
        let frac = if self.total == 0 {
            1.0
        } else {
            (done as f64 / self.total as f64).min(1.0)
        };
        let fill = (frac * width as f64).round() as usize;
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r{:<14} [{}{}] {}/{} {} {:.1}s ",
            self.label,
            "#".repeat(fill),
            " ".repeat(width - fill),
            self.fmt(done),
            self.fmt(self.total),
            if self.unit == "B" { "" } else { self.unit },
            self.start.elapsed().as_secs_f64()
        );
        let _ = err.flush();
    }

    /// End the line.
    pub fn finish(&mut self) {
        if self.on {
            if self.shown != Some(self.total) {
                self.set(self.total);
            }
            eprintln!();
        }
    }
}

/// Read a file with a progress bar by bytes (large archives take seconds).
pub fn read_with_progress(path: &Path, force: bool) -> Result<Vec<u8>, String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    // Small files need no bar.
    let mut bar = Progress::new(force, "reading", len, "B");
    if len < 64 << 20 && !force {
        bar.on = false;
    }
    let mut out = Vec::with_capacity(len as usize);
    let mut buf = vec![0u8; 4 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        bar.set(out.len() as u64);
    }
    bar.finish();
    Ok(out)
}
