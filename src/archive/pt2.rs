//! The PT2 archive layout (torch ≥ 2.6, archive_version 0): programs under `models/`,
//! raw weight storages under `data/weights/`, constants under `data/constants/`, pickled
//! sample inputs and user extra files.

use super::{legacy, paths, ArchiveReader};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::pickle::{self, PyValue};
use crate::schema::{self, OpsetVersions, PayloadConfig, SymInt, TensorMeta};
use crate::tensor::{checked_numel, HostTensor, Storage};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Which on-disk layout an archive uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// `archive_format == "pt2"` (torch ≥ 2.6).
    Pt2 { archive_version: i64 },
    /// torch 2.5's `torch.export.save`: `serialized_exported_program.json` + pickled state.
    Legacy { version: String },
}

/// A loaded parameter, buffer or tensor constant.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    pub tensor: HostTensor,
    pub is_param: bool,
    /// The archive entry holding its storage (shared by tied tensors).
    pub path_name: String,
}

/// Options for loading a program, as `torch.export.load` takes them.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Opset versions the caller expects (`expected_opset_version=`); a mismatch is an error.
    pub expected_opset_version: Option<OpsetVersions>,
    pub limits: Limits,
    /// Quantize the weights of linear layers and embeddings at load
    /// ([`crate::passes::quantize`]); [`WeightFormat::Keep`] by default.
    pub weights: crate::passes::quantize::WeightFormat,
    /// Run the float32 computation in float16 ([`crate::passes::half`]);
    /// [`Precision::Keep`] by default.
    pub dtype: crate::passes::half::Precision,
}

pub use crate::passes::half::Precision;
pub use crate::passes::quantize::WeightFormat;

/// One program as stored: its schema object and its state, before validation into a Program.
#[derive(Debug, Clone)]
pub struct RawProgram {
    pub name: String,
    /// The entry `models/NAME.json` (or the legacy JSON), for messages.
    pub file: String,
    pub ep: schema::ExportedProgram,
    /// Parameters and buffers by fully qualified name.
    pub weights: BTreeMap<String, Payload>,
    /// Tensor constants by fully qualified name.
    pub constants: BTreeMap<String, Payload>,
    /// Custom (torchbind/opaque) objects: names only; pt2web does not load them.
    pub custom_objects: Vec<String>,
    /// The pickled sample inputs: `None` when absent, `Err` with the reason when present
    /// but not loadable (e.g. they hold a user class); sample inputs never block loading.
    pub sample_inputs: Option<std::result::Result<PyValue, String>>,
    /// The sample inputs entry as stored (the writer copies it unchanged).
    pub sample_inputs_bytes: Option<Vec<u8>>,
}

/// An opened `.pt2` file: its entries, layout, program names and extra files.
pub struct Pt2File {
    pub reader: ArchiveReader,
    pub layout: Layout,
    programs: Vec<String>,
}

impl Pt2File {
    /// Open an archive from bytes. `source` names it in errors.
    pub fn open(source: &str, bytes: impl Into<Arc<[u8]>>, limits: Limits) -> Result<Self> {
        Pt2File::from_reader(ArchiveReader::new(source, bytes, limits)?)
    }

    /// Open an archive on a random-access source (a file, streamed ranges): its weights are
    /// read when a session takes them ([`ArchiveReader::storage`]).
    pub fn open_source(
        source: &str,
        src: Arc<dyn super::source::ByteSource>,
        limits: Limits,
    ) -> Result<Self> {
        Pt2File::from_reader(ArchiveReader::from_source(source, src, limits)?)
    }

    /// Check the layout of an opened archive and list its programs.
    pub fn from_reader(reader: ArchiveReader) -> Result<Self> {
        let source = &reader.source().to_string();
        if reader.has_record(paths::ARCHIVE_FORMAT) {
            let fmt = reader.read_bytes(paths::ARCHIVE_FORMAT)?;
            if fmt != b"pt2" {
                return Err(Error::archive(
                    source,
                    format!(
                        "archive_format is {:?}, expected \"pt2\"",
                        String::from_utf8_lossy(&fmt)
                    ),
                ));
            }
            let archive_version = reader.archive_version()?;
            if !(0..=1).contains(&archive_version) {
                return Err(Error::Version {
                    file: source.into(),
                    what: "archive_version".into(),
                    found: archive_version.to_string(),
                    supported: "0".into(),
                });
            }
            if reader.has_record(paths::BYTEORDER) {
                let bo = reader.read_string(paths::BYTEORDER)?;
                if bo.trim() != "little" {
                    return Err(Error::archive(
                        source,
                        format!(
                            "byteorder is '{}', only little-endian archives are supported",
                            bo.trim()
                        ),
                    ));
                }
            }
            let mut programs: Vec<String> = reader
                .file_names()
                .into_iter()
                .filter_map(|f| {
                    f.strip_prefix(paths::MODELS_DIR)
                        .and_then(|r| r.strip_suffix(".json"))
                        .map(str::to_string)
                })
                .filter(|n| !n.contains('/'))
                .collect();
            programs.sort();
            Ok(Pt2File {
                reader,
                layout: Layout::Pt2 { archive_version },
                programs,
            })
        } else if reader.has_record(legacy::PROGRAM_JSON) {
            let version = if reader.has_record("version") {
                reader.read_string("version")?.trim().to_string()
            } else {
                String::new()
            };
            Ok(Pt2File {
                reader,
                layout: Layout::Legacy { version },
                programs: vec!["model".into()],
            })
        } else {
            Err(Error::archive(
                source,
                "not a .pt2 archive: neither 'archive_format' (torch ≥ 2.6) nor 'serialized_exported_program.json' (torch 2.5) is present",
            ))
        }
    }

    /// Program names in the archive ("model" for a plain `torch.export.save`).
    pub fn program_names(&self) -> &[String] {
        &self.programs
    }

    /// User extra files (`extra_files=` of `torch.export.save`), by name.
    pub fn extra_files(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let prefix = match self.layout {
            Layout::Pt2 { .. } => paths::EXTRA_DIR,
            Layout::Legacy { .. } => legacy::EXTRA_DIR,
        };
        let mut out = BTreeMap::new();
        for f in self.reader.file_names() {
            if let Some(name) = f.strip_prefix(prefix) {
                out.insert(name.to_string(), self.reader.read_bytes(&f)?);
            }
        }
        Ok(out)
    }

    /// Load one program's schema object and state.
    pub fn load_raw(&self, name: &str, opts: &LoadOptions) -> Result<RawProgram> {
        if !self.programs.iter().any(|p| p == name) {
            return Err(Error::NoSuchProgram {
                name: name.into(),
                available: self.programs.join(", "),
            });
        }
        match self.layout {
            Layout::Legacy { .. } => legacy::load_raw(&self.reader, opts),
            Layout::Pt2 { .. } => self.load_pt2(name, opts),
        }
    }

    fn load_pt2(&self, name: &str, opts: &LoadOptions) -> Result<RawProgram> {
        let r = &self.reader;
        let file = paths::model_json(name);
        let ep = schema::parse_exported_program(
            &file,
            &r.read_bytes(&file)?,
            opts.expected_opset_version.as_ref(),
        )?;
        let mut custom_objects = Vec::new();
        let weights = match r.has_record(&paths::weights_config(name)) {
            true => load_payloads(
                r,
                &paths::weights_config(name),
                paths::WEIGHTS_DIR,
                &mut custom_objects,
            )?,
            false => {
                let legacy_file = format!("{}{name}.pt", paths::WEIGHTS_DIR);
                if r.has_record(&legacy_file) {
                    state_dict_from_pickle(&legacy_file, &r.read_bytes(&legacy_file)?, r.limits())?
                } else {
                    BTreeMap::new()
                }
            }
        };
        let constants = match r.has_record(&paths::constants_config(name)) {
            true => load_payloads(
                r,
                &paths::constants_config(name),
                paths::CONSTANTS_DIR,
                &mut custom_objects,
            )?,
            false => BTreeMap::new(),
        };
        let si = paths::sample_inputs(name);
        let sample_inputs_bytes = if r.has_record(&si) {
            Some(r.read_bytes(&si)?)
        } else {
            None
        };
        let sample_inputs = sample_inputs_bytes
            .as_ref()
            .map(|b| pickle::load_torch_save(&si, b, r.limits()).map_err(|e| e.to_string()));
        Ok(RawProgram {
            name: name.into(),
            file,
            ep,
            weights,
            constants,
            custom_objects,
            sample_inputs,
            sample_inputs_bytes,
        })
    }
}

/// Concrete integer of a weight's size/stride/offset; symbolic values are an error.
fn concrete(file: &str, fqn: &str, what: &str, v: &SymInt) -> Result<usize> {
    match v {
        SymInt::AsInt(i) if *i >= 0 => Ok(*i as usize),
        SymInt::AsInt(i) => Err(Error::tensor(
            fqn,
            format!("{what} {i} is negative ({file})"),
        )),
        SymInt::AsExpr(e) => Err(Error::tensor(
            fqn,
            format!(
                "{what} is symbolic ({}) in {file}; stored tensors must be concrete",
                e.expr_str
            ),
        )),
    }
}

/// Sizes, strides and offset of a stored tensor, checked for rank and overflow.
pub(crate) fn concrete_layout(
    file: &str,
    fqn: &str,
    m: &TensorMeta,
    limits: &Limits,
) -> Result<(Vec<usize>, Vec<usize>, usize)> {
    if m.sizes.len() > limits.max_rank {
        return Err(Error::limit(
            format!("rank of '{fqn}'"),
            m.sizes.len() as u64,
            limits.max_rank as u64,
        ));
    }
    let sizes = m
        .sizes
        .iter()
        .map(|s| concrete(file, fqn, "size", s))
        .collect::<Result<Vec<_>>>()?;
    let strides = m
        .strides
        .iter()
        .map(|s| concrete(file, fqn, "stride", s))
        .collect::<Result<Vec<_>>>()?;
    let offset = concrete(file, fqn, "storage_offset", &m.storage_offset)?;
    if sizes.len() != strides.len() {
        return Err(Error::tensor(
            fqn,
            format!(
                "{} sizes but {} strides in {file}",
                sizes.len(),
                strides.len()
            ),
        ));
    }
    checked_numel(&sizes).ok_or_else(|| Error::tensor(fqn, format!("sizes {sizes:?} overflow")))?;
    Ok((sizes, strides, offset))
}

/// Load every payload of a weights/constants config. Raw storages are read once per file
/// (or deferred, [`ArchiveReader::storage`]), so tensors that share a file share one
/// [`Storage`].
fn load_payloads(
    r: &ArchiveReader,
    config_file: &str,
    dir: &str,
    custom_objects: &mut Vec<String>,
) -> Result<BTreeMap<String, Payload>> {
    let cfg: PayloadConfig =
        schema::parse_payload_config(config_file, &r.read_bytes(config_file)?)?;
    let mut storages: BTreeMap<String, Storage> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (fqn, meta) in &cfg.config {
        if meta.path_name.contains("..") || meta.path_name.contains('/') {
            return Err(Error::schema(
                config_file,
                format!(
                    "'{fqn}': path_name '{}' is not a plain file name",
                    meta.path_name
                ),
            ));
        }
        let entry = format!("{dir}{}", meta.path_name);
        if meta.use_pickle {
            let Some(tm) = &meta.tensor_meta else {
                custom_objects.push(fqn.clone());
                continue;
            };
            let v = pickle::load_torch_save(&entry, &r.read_bytes(&entry)?, r.limits())?;
            let PyValue::Tensor(t) = v else {
                return Err(Error::pickle(
                    &entry,
                    format!(
                        "'{fqn}' is a pickled {} where a tensor was expected",
                        v.kind()
                    ),
                ));
            };
            if t.dtype != tm.dtype {
                return Err(Error::tensor(
                    fqn,
                    format!("pickle holds {} but the config says {}", t.dtype, tm.dtype),
                ));
            }
            out.insert(
                fqn.clone(),
                Payload {
                    tensor: t,
                    is_param: meta.is_param,
                    path_name: meta.path_name.clone(),
                },
            );
            continue;
        }
        let tm = meta
            .tensor_meta
            .as_ref()
            .ok_or_else(|| Error::schema(config_file, format!("'{fqn}' has no tensor_meta")))?;
        let (sizes, strides, offset) = concrete_layout(config_file, fqn, tm, r.limits())?;
        let storage = match storages.get(&meta.path_name) {
            Some(s) => s.clone(),
            None => {
                // Read now from memory; from a file, read when a session takes it.
                let stored = r.storage(&entry)?;
                if stored.len() % tm.dtype.size() != 0 {
                    return Err(Error::tensor(
                        fqn,
                        format!(
                            "{entry} holds {} bytes, not a multiple of the {} element size {}",
                            stored.len(),
                            tm.dtype,
                            tm.dtype.size()
                        ),
                    ));
                }
                let s = if stored.is_empty() {
                    // torch writes fake/empty tensors as zero-byte records and rebuilds zeros.
                    zeros_for(fqn, &sizes, tm.dtype.size(), r.limits())?
                } else {
                    stored
                };
                storages.insert(meta.path_name.clone(), s.clone());
                s
            }
        };
        let mut t = HostTensor::new(fqn, tm.dtype, sizes, strides, offset, storage)?;
        t.requires_grad = tm.requires_grad;
        out.insert(
            fqn.clone(),
            Payload {
                tensor: t,
                is_param: meta.is_param,
                path_name: meta.path_name.clone(),
            },
        );
    }
    Ok(out)
}

fn zeros_for(fqn: &str, sizes: &[usize], elem: usize, limits: &Limits) -> Result<Storage> {
    let n = checked_numel(sizes).unwrap_or(usize::MAX) as u64;
    if n > limits.max_tensor_elements {
        return Err(Error::limit(
            format!("elements of empty-record tensor '{fqn}'"),
            n,
            limits.max_tensor_elements,
        ));
    }
    Ok(Storage::new(vec![0u8; n as usize * elem]))
}

/// A pickled `{fqn: tensor}` dict (legacy weights files and torch 2.5 state dicts).
pub(crate) fn state_dict_from_pickle(
    file: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<BTreeMap<String, Payload>> {
    let mut out = BTreeMap::new();
    if bytes.is_empty() {
        return Ok(out);
    }
    let v = pickle::load_torch_save(file, bytes, limits)?;
    let PyValue::Dict(items) = v else {
        return Err(Error::pickle(
            file,
            format!("expected a dict of tensors, found {}", v.kind()),
        ));
    };
    for (k, v) in items {
        let PyValue::Str(fqn) = k else {
            return Err(Error::pickle(
                file,
                format!("state dict key is a {}, expected str", k.kind()),
            ));
        };
        match v {
            PyValue::Tensor(t) => {
                let is_param = t.requires_grad;
                out.insert(
                    fqn,
                    Payload {
                        tensor: t,
                        is_param,
                        path_name: file.to_string(),
                    },
                );
            }
            other => {
                return Err(Error::pickle(
                    file,
                    format!("'{fqn}' is a {}, expected a tensor", other.kind()),
                ))
            }
        }
    }
    Ok(out)
}
