//! Loading an archive from pieces the caller fetches (the browser: HTTP range requests or a
//! streamed response), without one buffer of the whole file.
//!
//! 1. The caller reads the file's last bytes (64 KiB is plenty for torch archives) and asks
//!    [`directory_range`] where the zip's central directory starts (zip64 too).
//! 2. [`StreamingLoad::open`] takes the bytes from there to the end and lists the entries.
//! 3. [`StreamingLoad::needed_ranges`] says which byte ranges to fetch (each entry's local
//!    header and data); the caller hands them over in any order and in any pieces with
//!    [`StreamingLoad::push_chunk`].
//! 4. [`StreamingLoad::finish`] opens the archive on what was pushed: its weights are
//!    deferred storages read when a session takes them.
//!
//! A caller may also keep ranges itself ([`StreamingLoad::hold_outside`] and
//! [`StreamingLoad::push_held`]): the load then reads those bytes from the caller's source
//! when a session takes them and tells it when they can go. The browser keeps a WebGPU
//! model's weights in JS memory (or a cached file) that way, so that wasm memory, which never
//! shrinks, holds about one weight at a time rather than the whole archive.
//!
//! Every offset and length from the caller or the file is checked; nothing is trusted.

use super::source::{checked_range, ByteSource};
use super::ArchiveReader;
use crate::error::{Error, Result};
use crate::limits::Limits;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A byte range of the archive file the caller must fetch for the entry `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeededRange {
    pub name: String,
    pub offset: u64,
    pub len: u64,
}

/// Where the central directory starts: the range `(offset, len)` from it to the end of the
/// file, found from the end-of-central-directory record (and the zip64 one) in `tail`, the
/// last `tail.len()` bytes of a file of `total_len` bytes.
pub fn directory_range(source: &str, tail: &[u8], total_len: u64) -> Result<(u64, u64)> {
    let bad = |why: String| Error::archive(source, why);
    let tail_start = total_len.checked_sub(tail.len() as u64).ok_or_else(|| {
        bad(format!(
            "{} tail bytes of a {total_len}-byte file",
            tail.len()
        ))
    })?;
    let u16_at = |i: usize| tail.get(i..i + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |i: usize| {
        tail.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |i: usize| {
        tail.get(i..i + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    // The last end-of-central-directory signature whose comment runs exactly to the end.
    let eocd = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| {
            u32_at(i) == Some(0x0605_4b50)
                && u16_at(i + 20).is_some_and(|c| i + 22 + c as usize == tail.len())
        })
        .ok_or_else(|| {
            bad(format!(
                "no end-of-central-directory record in the last {} bytes: not a zip archive, \
                 or fetch more of its end",
                tail.len()
            ))
        })?;
    let mut cd_offset = u32_at(eocd + 16).unwrap_or(0) as u64;
    if cd_offset == u32::MAX as u64 {
        // zip64: the locator just before points at the zip64 end record.
        let locator = eocd.checked_sub(20).ok_or_else(|| {
            bad(format!(
                "zip64 archive: its end-of-directory locator is before the last {} bytes; \
                 fetch more of the end",
                tail.len()
            ))
        })?;
        if u32_at(locator) != Some(0x0706_4b50) {
            return Err(bad(
                "zip64 archive without its end-of-directory locator".into()
            ));
        }
        let record = u64_at(locator + 8).unwrap_or(u64::MAX);
        let at = record
            .checked_sub(tail_start)
            .map(|r| r as usize)
            .filter(|&r| u32_at(r) == Some(0x0606_4b50))
            .ok_or_else(|| {
                bad(format!(
                    "the zip64 end-of-directory record (offset {record}) is not in the last {} \
                     bytes; fetch more of the end",
                    tail.len()
                ))
            })?;
        cd_offset = u64_at(at + 48).unwrap_or(u64::MAX);
    }
    if cd_offset >= total_len {
        return Err(bad(format!(
            "the central directory offset {cd_offset} is past the end ({total_len} bytes)"
        )));
    }
    Ok((cd_offset, total_len - cd_offset))
}

/// The pieces of an archive pushed so far, at their file offsets.
struct Chunks {
    len: u64,
    /// Non-overlapping pieces by start offset.
    pieces: Mutex<BTreeMap<u64, Vec<u8>>>,
    /// Free an entry's pieces once a session holds it ([`StreamingLoad::free_as_taken`]).
    free_taken: AtomicBool,
    /// While the directory is parsed, bytes not pushed read as zeros: the zip reader scans
    /// the end of the file in 1 KiB windows that may start before the directory.
    opening: AtomicBool,
    /// Ranges the caller holds (start → length), read from `outside`.
    held: Mutex<BTreeMap<u64, u64>>,
    outside: Mutex<Option<Arc<dyn ByteSource>>>,
}

impl Chunks {
    fn pieces(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Vec<u8>>> {
        self.pieces.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ByteSource for Chunks {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        checked_range(offset, buf.len(), self.len)?;
        let pieces = self.pieces();
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let piece = pieces.range(..=at).next_back().and_then(|(&start, p)| {
                let skip = (at - start) as usize;
                p.get(skip..).filter(|rest| !rest.is_empty())
            });
            let Some(piece) = piece else {
                if let Some(n) = self.read_held(at, &mut buf[done..])? {
                    done += n;
                    continue;
                }
                if self.opening.load(Ordering::Relaxed) {
                    let next = pieces.range(at..).next().map_or(u64::MAX, |(&s, _)| s);
                    let n =
                        (next.saturating_sub(at).max(1)).min((buf.len() - done) as u64) as usize;
                    buf[done..done + n].fill(0);
                    done += n;
                    continue;
                }
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("bytes at offset {at} were not pushed yet"),
                ));
            };
            let n = piece.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&piece[..n]);
            done += n;
        }
        Ok(())
    }
    fn release(&self, offset: u64, len: u64) {
        if !self.free_taken.load(Ordering::Relaxed) {
            return;
        }
        // Pieces never straddle two entries (push_chunk keeps each inside its entry's range),
        // so every piece that overlaps the entry's data is the entry's.
        let end = offset.saturating_add(len);
        let mut pieces = self.pieces();
        let gone: Vec<u64> = pieces
            .range(..end)
            .filter(|(&s, p)| s + p.len() as u64 > offset)
            .map(|(&s, _)| s)
            .collect();
        for s in gone {
            pieces.remove(&s);
        }
        drop(pieces);
        if let Some(outside) = self.outside() {
            outside.release(offset, len);
        }
    }
}

impl Chunks {
    fn outside(&self) -> Option<Arc<dyn ByteSource>> {
        self.outside
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Fill the start of `buf` from the caller's source when `at` is in a range it holds:
    /// the bytes read (up to that range's end), or `None` when it holds none there.
    fn read_held(&self, at: u64, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(end) = held
            .range(..=at)
            .next_back()
            .map(|(&s, &n)| s + n)
            .filter(|&e| e > at)
        else {
            return Ok(None);
        };
        drop(held);
        let Some(outside) = self.outside() else {
            return Ok(None);
        };
        let n = ((end - at).min(buf.len() as u64)) as usize;
        outside.read_at(at, &mut buf[..n])?;
        Ok(Some(n))
    }
}

/// Whether `offset..end` (not empty) overlaps a range of `ranges` (start → value of length
/// `len(value)`), ranges that do not overlap each other.
fn overlaps<V>(ranges: &BTreeMap<u64, V>, len: impl Fn(&V) -> u64, offset: u64, end: u64) -> bool {
    let before = ranges
        .range(..=offset)
        .next_back()
        .is_some_and(|(&s, v)| s + len(v) > offset);
    before || ranges.range(offset..end).next().is_some()
}

/// An archive arriving in pieces (see the module doc).
pub struct StreamingLoad {
    source: String,
    chunks: Arc<Chunks>,
    limits: Limits,
    /// Each entry's byte range in the file (local header and data), by record name.
    ranges: BTreeMap<String, (u64, u64)>,
    /// Bytes pushed per entry.
    received: BTreeMap<String, u64>,
}

impl StreamingLoad {
    /// Start a load from `directory`: the file's bytes from the offset [`directory_range`]
    /// gave to its end (`total_len` bytes in all).
    pub fn open(
        source: &str,
        directory: Vec<u8>,
        total_len: u64,
        limits: Limits,
    ) -> Result<StreamingLoad> {
        let start = total_len
            .checked_sub(directory.len() as u64)
            .ok_or_else(|| {
                Error::archive(
                    source,
                    format!(
                        "{} directory bytes of a {total_len}-byte file",
                        directory.len()
                    ),
                )
            })?;
        let chunks = Arc::new(Chunks {
            len: total_len,
            pieces: Mutex::new(BTreeMap::from([(start, directory)])),
            free_taken: AtomicBool::new(false),
            opening: AtomicBool::new(true),
            held: Mutex::new(BTreeMap::new()),
            outside: Mutex::new(None),
        });
        let reader = ArchiveReader::from_source(source, chunks.clone(), limits);
        chunks.opening.store(false, Ordering::Relaxed);
        let reader = reader?;
        let mut starts: Vec<(u64, String)> = Vec::new();
        for name in reader.file_names() {
            starts.push((reader.header_start(&name)?, name));
        }
        starts.sort();
        // An entry's range runs from its local header to the next one (or the directory):
        // its data, and the local header whose length only the file says.
        let mut ranges = BTreeMap::new();
        for (i, (at, name)) in starts.iter().enumerate() {
            let end = starts.get(i + 1).map_or(start, |(next, _)| *next);
            if *at >= end {
                return Err(Error::archive(
                    source,
                    format!("entry '{name}' starts at {at}, inside another entry or the directory"),
                ));
            }
            ranges.insert(name.clone(), (*at, end - at));
        }
        Ok(StreamingLoad {
            source: source.to_string(),
            chunks,
            limits,
            received: ranges.keys().map(|n| (n.clone(), 0)).collect(),
            ranges,
        })
    }

    /// The byte ranges still to fetch, one per entry, in file order.
    pub fn needed_ranges(&self) -> Vec<NeededRange> {
        let mut out: Vec<NeededRange> = self
            .ranges
            .iter()
            .filter(|(n, (_, len))| self.received.get(*n) != Some(len))
            .map(|(n, &(offset, len))| NeededRange {
                name: n.clone(),
                offset,
                len,
            })
            .collect();
        out.sort_by_key(|r| r.offset);
        out
    }

    /// Hand over `bytes` found at the file offset `offset`, part of the range of entry
    /// `name`. Pieces may come in any order but must not overlap.
    pub fn push_chunk(&mut self, name: &str, offset: u64, bytes: Vec<u8>) -> Result<()> {
        if self.claim(name, offset, bytes.len() as u64)? {
            self.chunks.pieces().insert(offset, bytes);
        }
        Ok(())
    }

    /// Say that the caller holds `len` bytes at file offset `offset` of entry `name` and
    /// serves them from the source given to [`StreamingLoad::hold_outside`] (checked as
    /// [`StreamingLoad::push_chunk`] checks a piece).
    pub fn push_held(&mut self, name: &str, offset: u64, len: u64) -> Result<()> {
        if self.chunks.outside().is_none() {
            return Err(Error::archive(
                &self.source,
                format!(
                    "bytes of entry '{name}' held outside before hold_outside gave their source"
                ),
            ));
        }
        if self.claim(name, offset, len)? {
            self.chunks
                .held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(offset, len);
        }
        Ok(())
    }

    /// Where ranges given by [`StreamingLoad::push_held`] are read. It is told (`release`)
    /// when a range's entry was taken by a session and will not be read again, when the load
    /// frees entries as taken ([`StreamingLoad::free_as_taken`]).
    pub fn hold_outside(&mut self, source: Arc<dyn ByteSource>) {
        *self
            .chunks
            .outside
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(source);
    }

    /// Check that `len` bytes at `offset` lie inside entry `name`'s range and overlap nothing
    /// pushed or held before, and count them as received: whether there is anything to keep.
    fn claim(&mut self, name: &str, offset: u64, len: u64) -> Result<bool> {
        let &(start, entry_len) = self.ranges.get(name).ok_or_else(|| {
            Error::archive(&self.source, format!("no entry '{name}' in the archive"))
        })?;
        let end = offset.checked_add(len).filter(|&e| e <= start + entry_len);
        let Some(end) = end.filter(|_| offset >= start) else {
            return Err(Error::archive(
                &self.source,
                format!(
                    "a chunk of {len} bytes at {offset} is outside entry '{name}' (bytes {start}..{})",
                    start + entry_len
                ),
            ));
        };
        if len == 0 {
            return Ok(false);
        }
        let pieces = self.chunks.pieces();
        let held = self.chunks.held.lock().unwrap_or_else(|e| e.into_inner());
        if overlaps(&pieces, |p| p.len() as u64, offset, end)
            || overlaps(&held, |&n| n, offset, end)
        {
            return Err(Error::archive(
                &self.source,
                format!("a chunk at {offset} of entry '{name}' overlaps one pushed before"),
            ));
        }
        drop((pieces, held));
        *self.received.entry(name.to_string()).or_default() += len;
        Ok(true)
    }

    /// Free each weight's pieces as soon as a session holds it, so that a load on the GPU
    /// ends with the weights only there. The archive then serves one session: a second one
    /// made from it fails on the freed weights.
    pub fn free_as_taken(&mut self) {
        self.chunks.free_taken.store(true, Ordering::Relaxed);
    }

    /// The archive file's length.
    pub fn total_len(&self) -> u64 {
        self.chunks.len
    }

    /// Bytes of pushed pieces held now.
    pub fn held_bytes(&self) -> u64 {
        self.chunks.pieces().values().map(|p| p.len() as u64).sum()
    }

    /// The archive, once every range was pushed. Its weights are read from the pushed pieces
    /// when a session takes them ([`crate::tensor::Storage::deferred`]).
    pub fn finish(self) -> Result<crate::program::Pt2Archive> {
        self.archive()
    }

    /// [`StreamingLoad::finish`] that keeps the load, so that the archive can be opened again
    /// on the same pieces: a caller whose held ranges may lack bytes (read from the network
    /// as they are needed) opens it again once it has fetched what a first open missed.
    pub fn archive(&self) -> Result<crate::program::Pt2Archive> {
        if let Some(r) = self.needed_ranges().first() {
            return Err(Error::archive(
                &self.source,
                format!(
                    "entry '{}' is incomplete: bytes {}..{} were not all pushed",
                    r.name,
                    r.offset,
                    r.offset + r.len
                ),
            ));
        }
        self.partial()
    }

    /// The archive opened on what was pushed so far, complete or not: enough to list its
    /// programs and extra files once their records are pushed (a record not pushed fails to
    /// read, naming its offset). `openArchive(url)` reads only those by range requests.
    pub fn partial(&self) -> Result<crate::program::Pt2Archive> {
        // The zip reader scans the file's end in windows that may start before the directory
        // (see `Chunks::opening`); the records are then read with every byte checked.
        self.chunks.opening.store(true, Ordering::Relaxed);
        let reader = ArchiveReader::from_source(&self.source, self.chunks.clone(), self.limits);
        self.chunks.opening.store(false, Ordering::Relaxed);
        crate::program::Pt2Archive::from_reader(reader?)
    }
}
