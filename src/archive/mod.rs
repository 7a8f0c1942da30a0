//! Reading `.pt2` archives: a bounded zip reader ([`ArchiveReader`], in the spirit of torch's
//! `PT2ArchiveReader`) and the interpretation of its entries ([`pt2`] for torch ≥ 2.6 archives,
//! [`legacy`] for the torch 2.5 layout).
//!
//! torch writes every entry under one root folder (`NAME/models/model.json`); like torch's
//! `PyTorchFileReader`, record names here are relative to that root.

pub mod legacy;
pub mod pt2;
pub mod source;
pub mod stream;

use crate::error::{Error, Result};
use crate::limits::Limits;
use source::{ByteSource, EntryBytes, MemSource, SourceCursor};
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

/// Paths inside the archive root (torch's `pt2_archive_constants`).
pub mod paths {
    pub const ARCHIVE_FORMAT: &str = "archive_format";
    pub const ARCHIVE_FORMAT_VALUE: &str = "pt2";
    pub const ARCHIVE_VERSION: &str = "archive_version";
    pub const BYTEORDER: &str = "byteorder";
    pub const MODELS_DIR: &str = "models/";
    pub const WEIGHTS_DIR: &str = "data/weights/";
    pub const CONSTANTS_DIR: &str = "data/constants/";
    pub const SAMPLE_INPUTS_DIR: &str = "data/sample_inputs/";
    pub const EXTRA_DIR: &str = "extra/";
    pub fn model_json(name: &str) -> String {
        format!("models/{name}.json")
    }
    pub fn weights_config(name: &str) -> String {
        format!("data/weights/{name}_weights_config.json")
    }
    pub fn constants_config(name: &str) -> String {
        format!("data/constants/{name}_constants_config.json")
    }
    pub fn sample_inputs(name: &str) -> String {
        format!("data/sample_inputs/{name}.pt")
    }
}

struct Entry {
    index: usize,
    size: u64,
}

/// A zip archive read from a [`ByteSource`] (in memory or a file), with every size checked
/// against [`Limits`].
pub struct ArchiveReader {
    zip: zip::ZipArchive<SourceCursor>,
    src: Arc<dyn ByteSource>,
    root: String,
    entries: BTreeMap<String, Entry>,
    limits: Limits,
    /// Uncompressed bytes handed out so far (bounded by `limits.max_total_bytes`).
    read_so_far: std::cell::Cell<u64>,
    source: String,
}

impl ArchiveReader {
    /// Open an archive held in memory. `source` names it in errors (a path, a URL,
    /// "<bytes>").
    pub fn new(source: &str, bytes: impl Into<Arc<[u8]>>, limits: Limits) -> Result<Self> {
        ArchiveReader::from_source(source, Arc::new(MemSource(bytes.into())), limits)
    }

    /// Open an archive on a random-access source: reads the end-of-central-directory records
    /// (zip64 too) and the central directory, nothing else until an entry is asked for.
    pub fn from_source(source: &str, src: Arc<dyn ByteSource>, limits: Limits) -> Result<Self> {
        // torch archives start at byte 0; a fixed offset also stops the zip crate from being
        // misled by the end-of-directory records of nested torch.save zips (sample inputs).
        let config = zip::read::Config {
            archive_offset: zip::read::ArchiveOffset::Known(0),
        };
        let zip = zip::ZipArchive::with_config(config, SourceCursor::new(src.clone()))
            .map_err(|e| Error::archive(source, format!("not a readable zip archive: {e}")))?;
        if zip.len() > limits.max_entries {
            return Err(Error::limit(
                format!("{source}: number of zip entries"),
                zip.len() as u64,
                limits.max_entries as u64,
            ));
        }
        // torch ≥ 2.6 writes every entry under one root folder (the first entry's first
        // component decides it, as in torch); the torch 2.5 layout has entries at the top.
        let mut names = Vec::with_capacity(zip.len());
        for i in 0..zip.len() {
            let name = zip
                .name_for_index(i)
                .and_then(|r| r.ok())
                .map(|n| n.to_string())
                .unwrap_or_default();
            if !name.is_empty() && !name.ends_with('/') {
                names.push((i, name));
            }
        }
        let root = match names.first().and_then(|(_, n)| n.split_once('/')) {
            Some((first, _))
                if names
                    .iter()
                    .all(|(_, n)| n.starts_with(&format!("{first}/"))) =>
            {
                first.to_string()
            }
            _ => String::new(),
        };
        let mut entries = BTreeMap::new();
        let mut declared_total: u64 = 0;
        for (i, name) in names {
            let rel = if root.is_empty() {
                name.clone()
            } else {
                name[root.len() + 1..].to_string()
            };
            let size = zip_entry_size(&zip, i, source, &name)?;
            if size > limits.max_entry_bytes {
                return Err(Error::limit(
                    format!("{source}: size of entry '{name}'"),
                    size,
                    limits.max_entry_bytes,
                ));
            }
            declared_total = declared_total.saturating_add(size);
            if entries.insert(rel, Entry { index: i, size }).is_some() {
                return Err(Error::archive(
                    source,
                    format!("entry '{name}' appears twice"),
                ));
            }
        }
        if declared_total > limits.max_total_bytes {
            return Err(Error::limit(
                format!("{source}: total uncompressed size"),
                declared_total,
                limits.max_total_bytes,
            ));
        }
        Ok(ArchiveReader {
            zip,
            src,
            root,
            entries,
            limits,
            read_so_far: 0.into(),
            source: source.to_string(),
        })
    }

    /// The archive's root folder name (torch uses the file stem or "archive").
    pub fn root(&self) -> &str {
        &self.root
    }
    /// The name used for this archive in errors.
    pub fn source(&self) -> &str {
        &self.source
    }
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Record names relative to the root, sorted.
    pub fn file_names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }
    pub fn has_record(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
    /// Declared uncompressed size of a record.
    pub fn record_size(&self, name: &str) -> Option<u64> {
        self.entries.get(name).map(|e| e.size)
    }

    /// Read one record. The bytes actually read must match the declared size.
    pub fn read_bytes(&self, name: &str) -> Result<Vec<u8>> {
        let entry = self.entry(name)?;
        let total = self.read_so_far.get().saturating_add(entry.size);
        if total > self.limits.max_total_bytes {
            return Err(Error::limit(
                format!("{}: total bytes read", self.source),
                total,
                self.limits.max_total_bytes,
            ));
        }
        // ZipArchive::by_index needs &mut; clone the (cheap, Arc-backed) archive handle.
        let mut zip = self.zip.clone();
        let mut f = zip
            .by_index(entry.index)
            .map_err(|e| Error::archive(&self.source, format!("entry '{name}': {e}")))?;
        let mut out = Vec::with_capacity(entry.size.min(self.limits.max_entry_bytes) as usize);
        (&mut f)
            .take(entry.size.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| Error::archive(&self.source, format!("entry '{name}': {e}")))?;
        if out.len() as u64 != entry.size {
            return Err(Error::archive(
                &self.source,
                format!(
                    "entry '{name}' declares {} bytes but holds {}",
                    entry.size,
                    out.len()
                ),
            ));
        }
        self.read_so_far.set(total);
        Ok(out)
    }

    /// Where a stored (uncompressed) record's bytes lie in the source, found from its local
    /// header; `None` for a compressed record (it must go through the decoder).
    pub fn stored_entry(&self, name: &str) -> Result<Option<EntryBytes>> {
        let entry = self.entry(name)?;
        let mut zip = self.zip.clone();
        let f = zip
            .by_index_raw(entry.index)
            .map_err(|e| Error::archive(&self.source, format!("entry '{name}': {e}")))?;
        if f.compression() != zip::CompressionMethod::Stored || f.compressed_size() != entry.size {
            return Ok(None);
        }
        let offset = f.data_start().ok_or_else(|| {
            Error::archive(&self.source, format!("entry '{name}': no local header"))
        })?;
        let end = offset.checked_add(entry.size);
        if end.is_none_or(|e| e > self.src.len()) {
            return Err(Error::archive(
                &self.source,
                format!(
                    "entry '{name}' ({} bytes at offset {offset}) runs past the end of the archive ({} bytes)",
                    entry.size,
                    self.src.len()
                ),
            ));
        }
        Ok(Some(EntryBytes {
            src: self.src.clone(),
            archive: self.source.clone(),
            entry: name.to_string(),
            offset,
            len: entry.size,
        }))
    }

    /// One record as a tensor storage. From a source other than memory a stored record is
    /// not read now: its storage reads it when a session takes it (file → tensor or GPU
    /// buffer, one copy, one record at a time). From memory, or compressed, it is read now.
    pub fn storage(&self, name: &str) -> Result<crate::tensor::Storage> {
        if !self.src.in_memory() {
            if let Some(e) = self.stored_entry(name)? {
                return Ok(crate::tensor::Storage::deferred(Arc::new(e)));
            }
        }
        Ok(crate::tensor::Storage::new(self.read_bytes(name)?))
    }

    /// Where a record's local header starts in the file (from the central directory).
    pub(crate) fn header_start(&self, name: &str) -> Result<u64> {
        let entry = self.entry(name)?;
        self.zip
            .by_index_data(entry.index)
            .map(|f| f.header_start())
            .map_err(|e| Error::archive(&self.source, format!("entry '{name}': {e}")))
    }

    fn entry(&self, name: &str) -> Result<&Entry> {
        self.entries.get(name).ok_or_else(|| {
            Error::archive(&self.source, format!("no entry '{name}' in the archive"))
        })
    }

    /// Read one record as UTF-8 text.
    pub fn read_string(&self, name: &str) -> Result<String> {
        String::from_utf8(self.read_bytes(name)?)
            .map_err(|_| Error::archive(&self.source, format!("entry '{name}' is not UTF-8 text")))
    }

    /// `archive_version` as an integer (0 when absent, as torch assumes).
    pub fn archive_version(&self) -> Result<i64> {
        if !self.has_record(paths::ARCHIVE_VERSION) {
            return Ok(0);
        }
        let s = self.read_string(paths::ARCHIVE_VERSION)?;
        s.trim().parse().map_err(|_| {
            Error::archive(
                &self.source,
                format!("archive_version '{}' is not an integer", s.trim()),
            )
        })
    }

    /// True when the archive says `archive_format == "pt2"`.
    pub fn is_pt2(&self) -> bool {
        self.has_record(paths::ARCHIVE_FORMAT)
            && self
                .read_bytes(paths::ARCHIVE_FORMAT)
                .map(|b| b == b"pt2")
                .unwrap_or(false)
    }
}

/// An entry's uncompressed size as the central directory declares it (no local header read:
/// a streaming load has none yet).
fn zip_entry_size(
    zip: &zip::ZipArchive<SourceCursor>,
    i: usize,
    source: &str,
    name: &str,
) -> Result<u64> {
    zip.by_index_data(i)
        .map(|f| f.size())
        .map_err(|e| Error::archive(source, format!("entry '{name}': {e}")))
}

/// `torch.export.pt2_archive.is_pt2_package`: a zip whose root holds `archive_format == "pt2"`.
pub fn is_pt2_package(bytes: &[u8]) -> bool {
    ArchiveReader::new("<bytes>", bytes.to_vec(), Limits::default())
        .map(|r| r.is_pt2())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
