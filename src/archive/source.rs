//! Random access to an archive's bytes ([`ByteSource`]): an in-memory buffer (the browser's
//! `ArrayBuffer`, `ArchiveReader::new`), a native file read with positioned reads (no whole-file
//! read, no mmap), or the ranges a streaming load was handed ([`super::stream`]).
//!
//! The zip reader only ever reads what it asks for: the end-of-central-directory records and
//! the central directory when it opens, then each entry's local header and data on demand. So
//! an archive need not fit in memory, and weights can go from the source straight to their
//! destination ([`crate::tensor::Storage::deferred`]).

use crate::error::{Error, Result};
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

/// Bytes that can be read at any offset. Implementations must check `offset + buf.len()`
/// against their length and fail with an I/O error rather than panic.
pub trait ByteSource: Send + Sync {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// Fill `buf` with the bytes at `offset` (all of them, or an error).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// Whether the source is a whole in-memory copy: then entries are read at open as
    /// before (the copy is what the caller already paid for), and nothing holds it after.
    fn in_memory(&self) -> bool {
        false
    }
    /// A hint that the bytes of the entry whose data is `offset..offset + len` will not be
    /// read again (its session holds them now): a source holding pushed pieces frees them.
    fn release(&self, _offset: u64, _len: u64) {}
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The out-of-range error of every source.
pub(crate) fn out_of_range(offset: u64, want: usize, len: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!("read of {want} bytes at offset {offset} is past the end ({len} bytes)"),
    )
}

/// `offset..offset + want` as indices into a buffer of `len` bytes, or the range error.
pub(crate) fn checked_range(
    offset: u64,
    want: usize,
    len: u64,
) -> std::io::Result<std::ops::Range<usize>> {
    let end = offset
        .checked_add(want as u64)
        .filter(|&e| e <= len)
        .ok_or_else(|| out_of_range(offset, want, len))?;
    Ok(offset as usize..end as usize)
}

/// A whole archive in memory (today's path: `ArchiveReader::new(bytes)`).
pub struct MemSource(pub Arc<[u8]>);

impl ByteSource for MemSource {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let r = checked_range(offset, buf.len(), self.len())?;
        buf.copy_from_slice(&self.0[r]);
        Ok(())
    }
    fn in_memory(&self) -> bool {
        true
    }
}

/// A native file read with positioned reads (`pread`): shared by every reader of the archive
/// without a seek position to agree on.
#[cfg(any(unix, windows))]
pub struct FileSource {
    file: std::fs::File,
    len: u64,
}

#[cfg(any(unix, windows))]
impl FileSource {
    pub fn open(path: &std::path::Path) -> Result<FileSource> {
        let shown = path.display().to_string();
        let file = std::fs::File::open(path)
            .map_err(|e| Error::archive(&shown, format!("cannot open: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| Error::archive(&shown, format!("cannot read its size: {e}")))?
            .len();
        Ok(FileSource { file, len })
    }
}

#[cfg(any(unix, windows))]
impl ByteSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        checked_range(offset, buf.len(), self.len)?;
        #[cfg(unix)]
        {
            std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
        }
        #[cfg(windows)]
        {
            let mut done = 0;
            while done < buf.len() {
                let n = std::os::windows::fs::FileExt::seek_read(
                    &self.file,
                    &mut buf[done..],
                    offset + done as u64,
                )?;
                if n == 0 {
                    return Err(out_of_range(offset, buf.len(), self.len));
                }
                done += n;
            }
            Ok(())
        }
    }
}

/// A `Read + Seek` view of a shared source for the zip crate (cheap to clone: each clone has
/// its own position).
#[derive(Clone)]
pub(crate) struct SourceCursor {
    src: Arc<dyn ByteSource>,
    pos: u64,
}

impl SourceCursor {
    pub(crate) fn new(src: Arc<dyn ByteSource>) -> Self {
        SourceCursor { src, pos: 0 }
    }
}

impl Read for SourceCursor {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.src.len().saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        self.src.read_at(self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for SourceCursor {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let base = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.src.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = base.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.pos)
    }
}

/// One stored (uncompressed) entry's bytes, read from its source when a session asks for
/// them (see [`crate::tensor::Storage::deferred`]).
pub struct EntryBytes {
    pub(crate) src: Arc<dyn ByteSource>,
    /// The archive's name in errors.
    pub(crate) archive: String,
    pub(crate) entry: String,
    /// Where the entry's data starts in the source.
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

impl EntryBytes {
    /// Read `buf.len()` bytes at `at` within the entry.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> Result<()> {
        let inside = at
            .checked_add(buf.len() as u64)
            .is_some_and(|e| e <= self.len);
        let offset = self.offset.checked_add(at).filter(|_| inside);
        let offset = offset.ok_or_else(|| {
            Error::archive(
                &self.archive,
                format!(
                    "entry '{}': a read of {} bytes at {at} is past its {} bytes",
                    self.entry,
                    buf.len(),
                    self.len
                ),
            )
        })?;
        self.src
            .read_at(offset, buf)
            .map_err(|e| Error::archive(&self.archive, format!("entry '{}': {e}", self.entry)))
    }

    /// Tell the source this entry will not be read again ([`ByteSource::release`]).
    pub fn release(&self) {
        self.src.release(self.offset, self.len)
    }

    /// The whole entry (one allocation of its declared size, bounded by the reader's limits
    /// when the entry was listed).
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let len = usize::try_from(self.len).map_err(|_| {
            Error::archive(
                &self.archive,
                format!(
                    "entry '{}' ({} bytes) does not fit in memory",
                    self.entry, self.len
                ),
            )
        })?;
        let mut out = vec![0u8; len];
        self.read_at(0, &mut out)?;
        Ok(out)
    }
}

impl std::fmt::Debug for EntryBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EntryBytes({}: {} bytes)", self.entry, self.len)
    }
}
