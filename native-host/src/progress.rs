//! A one-line progress bar on stderr: shown only when stderr is a terminal or `--progress`
//! forces it, so logs and pipes stay clean.

use pt2web::archive::source::{ByteSource, FileSource};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;
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

/// A `.pt2` file read on demand ([`pt2web::archive::source::FileSource`]) with a progress bar
/// by bytes read (large archives take seconds: their weights are read as the session takes
/// them). The bar ends when the source is dropped.
pub struct ProgressFile {
    file: FileSource,
    bar: Mutex<(Progress, u64)>,
}

impl ProgressFile {
    pub fn open(path: &Path, force: bool) -> Result<ProgressFile, String> {
        let file = FileSource::open(path).map_err(|e| e.to_string())?;
        let mut bar = Progress::new(force, "reading", file.len(), "B");
        // Small files need no bar.
        if file.len() < 64 << 20 && !force {
            bar.on = false;
        }
        Ok(ProgressFile {
            file,
            bar: Mutex::new((bar, 0)),
        })
    }
}

impl ByteSource for ProgressFile {
    fn len(&self) -> u64 {
        self.file.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file.read_at(offset, buf)?;
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        bar.1 = bar.1.saturating_add(buf.len() as u64).min(self.file.len());
        let done = bar.1;
        bar.0.set(done);
        Ok(())
    }
}

impl Drop for ProgressFile {
    fn drop(&mut self) {
        self.bar
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .finish();
    }
}
