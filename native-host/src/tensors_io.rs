//! Reading and writing tensors for the command line: safetensors files and `.npy` arrays.

use pt2web::cpu::{Data, Tensor};
use pt2web::DType;
use std::collections::BTreeMap;

fn dtype_from_st(d: safetensors::Dtype) -> Result<DType, String> {
    use safetensors::Dtype as S;
    Ok(match d {
        S::F32 => DType::F32,
        S::F64 => DType::F64,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::I64 => DType::I64,
        S::I32 => DType::I32,
        S::I16 => DType::I16,
        S::I8 => DType::I8,
        S::U8 => DType::U8,
        S::BOOL => DType::Bool,
        // Interleaved (re, im) float32 pairs, as torch and pt2web store complex64.
        S::C64 => DType::Complex64,
        other => return Err(format!("safetensors dtype {other:?} is not supported")),
    })
}

fn dtype_to_st(d: DType) -> Result<safetensors::Dtype, String> {
    use safetensors::Dtype as S;
    Ok(match d {
        DType::F32 => S::F32,
        DType::F64 => S::F64,
        DType::F16 => S::F16,
        DType::BF16 => S::BF16,
        DType::I64 => S::I64,
        DType::I32 => S::I32,
        DType::I16 => S::I16,
        DType::I8 => S::I8,
        DType::U8 => S::U8,
        DType::Bool => S::BOOL,
        DType::Complex64 => S::C64,
        DType::Complex128 => {
            return Err("complex128 cannot be written to safetensors (the format has no \
                        complex128 dtype): return torch.view_as_real(x) or a complex64 tensor from the \
                        model"
                .into())
        }
        other => return Err(format!("dtype {other} cannot be written to safetensors")),
    })
}

/// All tensors of a safetensors file, by name.
pub fn read_safetensors(path: &str) -> Result<BTreeMap<String, Tensor>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| format!("{path}: not a safetensors file: {e}"))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let dtype = dtype_from_st(view.dtype()).map_err(|e| format!("{path}: '{name}': {e}"))?;
        let data = Data::from_le_bytes(dtype, view.data())
            .ok_or_else(|| format!("{path}: '{name}': unsupported dtype"))?;
        out.insert(name, Tensor::from_data(data, view.shape()));
    }
    Ok(out)
}

/// Write tensors (contiguous little-endian) to a safetensors file.
pub fn write_safetensors(path: &str, tensors: &[(String, Tensor)]) -> Result<(), String> {
    let mut owned = Vec::new();
    for (name, t) in tensors {
        let bytes = t
            .to_dtype(t.dtype)
            .map_err(|e| e.to_string())?
            .read()
            .to_le_bytes();
        owned.push((name.clone(), dtype_to_st(t.dtype)?, t.sizes.clone(), bytes));
    }
    let views = owned
        .iter()
        .map(|(n, d, s, b)| {
            safetensors::tensor::TensorView::new(*d, s.clone(), b).map(|v| (n.clone(), v))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    safetensors::serialize_to_file(views, None, std::path::Path::new(path))
        .map_err(|e| format!("cannot write {path}: {e}"))
}

/// Read a NumPy `.npy` file (format 1.0/2.0/3.0, little-endian, C order).
pub fn read_npy(path: &str) -> Result<Tensor, String> {
    let b = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let bad = |m: &str| format!("{path}: not a supported .npy file: {m}");
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(bad("missing magic"));
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => return Err(bad(&format!("version {v}"))),
    };
    let header = std::str::from_utf8(
        b.get(start..start + hlen)
            .ok_or_else(|| bad("truncated header"))?,
    )
    .map_err(|_| bad("header"))?;
    let field = |k: &str| -> Option<&str> {
        let i = header.find(&format!("'{k}'"))?;
        let rest = &header[i + k.len() + 2..];
        let rest = rest.trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or_else(|| bad("descr"))?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(bad("Fortran order"));
    }
    let shape_s = field("shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad("shape"))?;
    let shape: Vec<usize> = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad("shape")))
        .collect::<Result<_, _>>()?;
    let dtype = match descr {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<f2" => DType::F16,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "<i2" => DType::I16,
        "|i1" => DType::I8,
        "|u1" => DType::U8,
        "|b1" => DType::Bool,
        "<c8" => DType::Complex64,
        "<c16" => DType::Complex128,
        other => return Err(bad(&format!("dtype '{other}'"))),
    };
    let n: usize = shape.iter().product();
    let body = &b[start + hlen..];
    if body.len() != n * dtype.size() {
        return Err(bad(&format!(
            "{} data bytes for shape {shape:?} of {dtype}",
            body.len()
        )));
    }
    let data = Data::from_le_bytes(dtype, body).ok_or_else(|| bad("dtype"))?;
    Ok(Tensor::from_data(data, &shape))
}
