//! Writing programs back to a `.pt2` that `torch.export.load` accepts (the torch ≥ 2.6 layout):
//! the program JSON, one raw storage file per distinct storage (tied tensors stay tied), the
//! payload configs, the sample inputs as they were stored, and extra files.

use crate::archive::paths;
use crate::error::{Error, Result};
use crate::program::{Program, StateKind};
use crate::schema::{self, PayloadConfig, PayloadMeta, SymInt, TensorMeta};
use crate::tensor::Storage;
use std::collections::BTreeMap;
use std::io::{Cursor, Write};
use zip::write::SimpleFileOptions;

/// Schema version written: the one this crate reads natively.
const WRITE_SCHEMA: schema::SchemaVersion = schema::SchemaVersion {
    major: schema::SCHEMA_MAJOR,
    minor: schema::SCHEMA_MINOR,
};

/// Serialize programs (by name) and extra files into `.pt2` bytes. `root` is the archive's
/// root folder name (torch uses the file stem).
pub fn write_pt2(
    root: &str,
    programs: &[&Program],
    extra_files: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<u8>> {
    if root.is_empty() || root.contains('/') {
        return Err(Error::Write(format!(
            "archive root '{root}' must be a plain folder name"
        )));
    }
    let mut w = Writer {
        zip: zip::ZipWriter::new(Cursor::new(Vec::new())),
        root: root.to_string(),
    };
    let mut names = std::collections::BTreeSet::new();
    let (mut weight_idx, mut const_idx) = (0usize, 0usize);
    for p in programs {
        if !names.insert(p.name.clone()) {
            return Err(Error::Write(format!("two programs are named '{}'", p.name)));
        }
        let mut ep = p.serialized.get()?;
        ep.schema_version = WRITE_SCHEMA;
        let json = serde_json::to_vec(&ep).map_err(|e| Error::Write(e.to_string()))?;
        w.file(&paths::model_json(&p.name), &json)?;

        let mut weights = BTreeMap::new();
        let mut constants = BTreeMap::new();
        // Tensors sharing a storage are written once and point at the same file.
        let mut written: Vec<(Storage, String, bool)> = Vec::new();
        for (fqn, e) in &p.state {
            // torch keeps non-persistent buffers with the constants.
            let is_const = matches!(
                e.kind,
                StateKind::Constant | StateKind::Buffer { persistent: false }
            );
            let t = &e.tensor;
            let path_name = match written
                .iter()
                .find(|(s, _, c)| s.same(&t.storage) && *c == is_const)
            {
                Some((_, n, _)) => n.clone(),
                None => {
                    let (dir, name) = if is_const {
                        const_idx += 1;
                        (paths::CONSTANTS_DIR, format!("tensor_{}", const_idx - 1))
                    } else {
                        weight_idx += 1;
                        (paths::WEIGHTS_DIR, format!("weight_{}", weight_idx - 1))
                    };
                    w.file(&format!("{dir}{name}"), &t.storage.load()?)?;
                    written.push((t.storage.clone(), name.clone(), is_const));
                    name
                }
            };
            let meta = PayloadMeta {
                path_name,
                is_param: e.kind == StateKind::Parameter,
                use_pickle: false,
                tensor_meta: Some(TensorMeta {
                    dtype: t.dtype,
                    sizes: t.sizes.iter().map(|&s| SymInt::AsInt(s as i64)).collect(),
                    requires_grad: t.requires_grad,
                    device: schema::Device {
                        type_: "cpu".into(),
                        index: None,
                    },
                    strides: t.strides.iter().map(|&s| SymInt::AsInt(s as i64)).collect(),
                    storage_offset: SymInt::AsInt(t.storage_offset as i64),
                    layout: 7,
                }),
            };
            if is_const {
                constants.insert(fqn.clone(), meta);
            } else {
                weights.insert(fqn.clone(), meta);
            }
        }
        let cfg = |c| {
            serde_json::to_vec(&PayloadConfig { config: c })
                .map_err(|e| Error::Write(e.to_string()))
        };
        w.file(&paths::weights_config(&p.name), &cfg(weights)?)?;
        w.file(&paths::constants_config(&p.name), &cfg(constants)?)?;
        if let Some(si) = &p.sample_inputs_bytes {
            w.file(&paths::sample_inputs(&p.name), si)?;
        }
    }
    for (name, bytes) in extra_files {
        if name.is_empty() || name.contains("..") {
            return Err(Error::Write(format!(
                "extra file name '{name}' is not allowed"
            )));
        }
        w.file(&format!("{}{name}", paths::EXTRA_DIR), bytes)?;
    }
    w.file(paths::ARCHIVE_FORMAT, b"pt2")?;
    w.file(paths::ARCHIVE_VERSION, b"0")?;
    w.file(".data/version", b"6")?;
    w.file(paths::BYTEORDER, b"little")?;
    let cursor = w.zip.finish().map_err(|e| Error::Write(e.to_string()))?;
    Ok(cursor.into_inner())
}

struct Writer {
    zip: zip::ZipWriter<Cursor<Vec<u8>>>,
    root: String,
}

impl Writer {
    fn file(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        // Stored (uncompressed) and 64-byte aligned, as torch's PyTorchFileWriter writes them,
        // so storages can be mapped in place.
        let opts = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .with_alignment(64)
            .large_file(bytes.len() as u64 >= u32::MAX as u64);
        self.zip
            .start_file(format!("{}/{name}", self.root), opts)
            .and_then(|_| self.zip.write_all(bytes).map_err(Into::into))
            .map_err(|e| Error::Write(format!("{name}: {e}")))
    }
}
