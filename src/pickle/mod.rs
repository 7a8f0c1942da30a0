//! A safe reader for `torch.save` files and the pickle streams inside them.
//!
//! pt2web never executes pickle. [`parse_pickle`] interprets only the opcodes that
//! `torch.save` emits for tensors, containers and primitives, and resolves only a short
//! whitelist of globals (tensor/parameter rebuild functions, storage classes,
//! `collections.OrderedDict`, `torch.Size` and dtypes) to built-in Rust behaviour. Any
//! other opcode or global is an [`Error::Pickle`] naming it, never an import.
//!
//! Layout: `vm.rs` is the opcode machine (stack, memo, marks, bounds), `torch.rs` holds the
//! whitelisted globals and what REDUCE / BINPERSID do with them, this file holds the value
//! type and the zip container that `torch.save` writes.

mod torch;
mod vm;

#[cfg(test)]
mod tests;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::tensor::{HostTensor, Storage};
use std::io::{Cursor, Read};

/// A Python value rebuilt from a pickle. Only what `torch.save` of tensors, containers and
/// primitives can produce; nothing here refers back to Python.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    /// Also what `torch.Size` becomes.
    Tuple(Vec<PyValue>),
    List(Vec<PyValue>),
    /// `dict` and `collections.OrderedDict`, in insertion order. A repeated key keeps its
    /// first position and takes the last value, as Python's dict does.
    Dict(Vec<(PyValue, PyValue)>),
    /// A tensor or an `nn.Parameter` (then `requires_grad` is whatever was saved, usually
    /// true). Views of one storage share the same [`Storage`] allocation.
    Tensor(HostTensor),
    /// A pickled `torch.<dtype>` object such as `torch.float32`.
    Dtype(DType),
}

impl PyValue {
    /// The Python type name, for error messages ("expected a dict, got list").
    pub fn kind(&self) -> &'static str {
        match self {
            PyValue::None => "None",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::Bytes(_) => "bytes",
            PyValue::Tuple(_) => "tuple",
            PyValue::List(_) => "list",
            PyValue::Dict(_) => "dict",
            PyValue::Tensor(_) => "Tensor",
            PyValue::Dtype(_) => "torch.dtype",
        }
    }
    pub fn is_none(&self) -> bool {
        matches!(self, PyValue::None)
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            PyValue::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// An `int` (a Python `bool` is not accepted here, to keep shapes honest).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            PyValue::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// A `float`, or an `int` widened to one (Python accepts either where a float is wanted).
    pub fn as_float(&self) -> Option<f64> {
        match self {
            PyValue::Float(f) => Some(*f),
            PyValue::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyValue::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            PyValue::Bytes(b) => Some(b),
            _ => None,
        }
    }
    /// The items of a tuple or a list.
    pub fn as_seq(&self) -> Option<&[PyValue]> {
        match self {
            PyValue::Tuple(v) | PyValue::List(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_dict(&self) -> Option<&[(PyValue, PyValue)]> {
        match self {
            PyValue::Dict(d) => Some(d),
            _ => None,
        }
    }
    pub fn as_tensor(&self) -> Option<&HostTensor> {
        match self {
            PyValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
    pub fn as_dtype(&self) -> Option<DType> {
        match self {
            PyValue::Dtype(d) => Some(*d),
            _ => None,
        }
    }
    /// Look up a string key in a dict (`None` when not a dict or no such key).
    pub fn get(&self, key: &str) -> Option<&PyValue> {
        self.as_dict()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }
}

/// Load a file written by `torch.save` (the zip format, torch >= 1.6).
///
/// The zip holds `<root>/data.pkl`, `<root>/data/<key>` (one raw storage per key),
/// `<root>/byteorder`, `<root>/version` and `<root>/.data/serialization_id`; the root
/// folder name varies ("archive", the file stem...), so it is taken from where `data.pkl` is.
/// `file` names the file in error messages.
pub fn load_torch_save(file: &str, bytes: &[u8], limits: &Limits) -> Result<PyValue> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
        Error::pickle(
            file,
            format!("not a torch.save zip archive ({e}); files from torch < 1.6 or saved with _use_new_zipfile_serialization=False are not supported"),
        )
    })?;
    if zip.len() > limits.max_entries {
        return Err(Error::limit(
            format!("number of entries in {file}"),
            zip.len() as u64,
            limits.max_entries as u64,
        ));
    }
    let names: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.ok())
        .map(|n| n.into_owned())
        .collect();
    let pkls: Vec<&String> = names
        .iter()
        .filter(|n| {
            n.as_str() == "data.pkl"
                || n.strip_suffix("/data.pkl")
                    .is_some_and(|root| !root.is_empty() && !root.contains('/'))
        })
        .collect();
    let pkl_name = match pkls.as_slice() {
        [one] => (*one).clone(),
        [] => {
            return Err(Error::pickle(
                file,
                "no <root>/data.pkl entry: not a torch.save archive",
            ))
        }
        many => {
            let list: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
            return Err(Error::pickle(
                file,
                format!(
                    "several data.pkl entries ({}); expected exactly one",
                    list.join(", ")
                ),
            ));
        }
    };
    let root = &pkl_name[..pkl_name.len() - "data.pkl".len()];
    let mut total = 0u64;

    // torch.load byte-swaps big-endian checkpoints; pt2web only reads little-endian data
    // as-is, so refuse rather than return swapped numbers. A missing record means little.
    let bo_name = format!("{root}byteorder");
    if names.contains(&bo_name) {
        let bo = read_entry(file, &mut zip, &bo_name, limits, &mut total)?;
        if bo.trim_ascii() != b"little" {
            return Err(Error::pickle(
                file,
                format!("entry '{bo_name}' says {:?}; only little-endian torch.save files are supported", String::from_utf8_lossy(&bo)),
            ));
        }
    }

    let pkl = read_entry(file, &mut zip, &pkl_name, limits, &mut total)?;
    let mut resolve = |key: &str, dtype: DType, numel: usize| -> Result<Storage> {
        // Keys are torch's decimal storage ids; refuse anything that could name another entry.
        if key.is_empty()
            || key.len() > 64
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(Error::pickle(
                file,
                format!("storage key {key:?} is not a plain name"),
            ));
        }
        let name = format!("{root}data/{key}");
        let want = numel.checked_mul(dtype.size()).map(|n| n as u64);
        let declared = zip.by_name(&name).map(|f| f.size()).map_err(|e| {
            Error::pickle(
                file,
                format!("storage '{key}' ({numel} x {dtype}) has no entry '{name}': {e}"),
            )
        })?;
        if want != Some(declared) {
            return Err(Error::pickle(
                file,
                format!(
                    "entry '{name}' holds {declared} bytes but the pickle declares {numel} elements of {dtype} ({} bytes)",
                    want.map_or("overflowing".to_string(), |w| w.to_string())
                ),
            ));
        }
        Ok(Storage::new(read_entry(
            file, &mut zip, &name, limits, &mut total,
        )?))
    };
    parse_pickle(file, &pkl, limits, &mut resolve)
}

/// Read one zip entry whole, after checking its declared size against the limits; the
/// bytes actually produced must match the declared size (a lying header is an error).
fn read_entry(
    file: &str,
    zip: &mut zip::ZipArchive<Cursor<&[u8]>>,
    name: &str,
    limits: &Limits,
    total: &mut u64,
) -> Result<Vec<u8>> {
    let f = zip
        .by_name(name)
        .map_err(|e| Error::pickle(file, format!("entry '{name}': {e}")))?;
    let size = f.size();
    if size > limits.max_entry_bytes {
        return Err(Error::limit(
            format!("size of entry '{name}' in {file}"),
            size,
            limits.max_entry_bytes,
        ));
    }
    *total = total.saturating_add(size);
    if *total > limits.max_total_bytes {
        return Err(Error::limit(
            format!("bytes read from {file}"),
            *total,
            limits.max_total_bytes,
        ));
    }
    // Capacity is a hint only; never trust a header for a huge up-front allocation.
    let mut buf = Vec::with_capacity(size.min(1 << 26) as usize);
    f.take(size.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::pickle(file, format!("entry '{name}' cannot be read: {e}")))?;
    if buf.len() as u64 != size {
        return Err(Error::pickle(
            file,
            format!(
                "entry '{name}' has {} bytes but its header says {size}",
                buf.len()
            ),
        ));
    }
    Ok(buf)
}

/// Interpret a bare pickle stream (protocol 2 to 5) as `torch.save` writes it.
///
/// Each persistent id `('storage', storage_type, key, location, numel)` is turned into a
/// storage by `resolve(key, dtype, numel)`, called once per distinct key; every reference
/// to that key shares the returned [`Storage`], so tied weights stay tied. The storage's
/// length must equal `numel * dtype.size()`.
pub fn parse_pickle(
    file: &str,
    bytes: &[u8],
    limits: &Limits,
    resolve: &mut dyn FnMut(&str, DType, usize) -> Result<Storage>,
) -> Result<PyValue> {
    if bytes.len() as u64 > limits.max_entry_bytes {
        return Err(Error::limit(
            format!("size of pickle {file}"),
            bytes.len() as u64,
            limits.max_entry_bytes,
        ));
    }
    vm::Machine::new(file, bytes, limits, resolve).run()
}
