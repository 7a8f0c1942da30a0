//! Tensors of the GPU executor: a strided view of a [`Store`], a storage that can live on the
//! GPU, on the CPU, or both, with a flag per side saying which copy is current.
//!
//! Views share their store, so an in-place CPU fallback (`add_`, `copy_`) that writes the
//! CPU copy marks the GPU copy stale for every view of it, and the next GPU use uploads it
//! again. A CPU store keeps the CPU tensor's own `Arc` so that identity (tied weights,
//! views of a buffer) is preserved across round trips.
//!
//! On the GPU: f32 as f32; i64 and i32 as i32 (an i64 outside the i32 range is an error on
//! upload, never a silent wrap); uint8, int8 and int16 widened to one i32 per element,
//! always holding a value of their dtype's range (0..=255, -128..=127, -32768..=32767);
//! bool as u32 (0/1); complex64 as interleaved f32 (re, im) pairs, its store an f32 one of
//! twice the elements (`GTensor::as_pairs` is its real view); f16 as packed f16 (two per word) on a device with `shader-f16`, for
//! the kernels that have f16 variants (elementwise, matmul, softmax, reductions; they
//! compute in f32 and round once on store, as torch's CPU kernels do). bf16 and f64 stay on
//! the CPU: WGSL has no such types, and emulating bf16 rounding after every op in f32
//! storage would differ from torch's kernels in the last bit too often to be worth it;
//! their ops run on the CPU kernel.
//!
//! # Small integer dtypes
//! Since uint8 / int8 / int16 words hold in-range values, every kernel that only moves,
//! selects or compares words (copies, gathers, cat, where, max / min, pools, nearest
//! upsampling, index ops) serves them unchanged. The kernels whose result can leave the
//! range (add / sub / mul / neg / abs, shifts, bitwise not, conversions from float or wider
//! ints, fills, sums and scans that keep the dtype) compute in 32 bits and wrap on store as
//! torch does ([`SmallInt::wrap`]: uint8 keeps the low 8 bits, int8 / int16 sign-extend
//! their low 8 / 16 bits), which gives torch's values since those ops are exact modulo
//! 2^32. A Python int mixed with such a tensor is first converted to its dtype (torch:
//! `u8 < -1` compares with 255). Kernels that do not know the small dtypes decline them
//! (the executor runs the CPU kernel).
//!
//! # int64 arithmetic on the GPU
//! The int kernels (shaders/ints.wgsl, `reduce_i`) compute int64 in 32 bits: a result outside
//! the int32 range wraps around (two's complement) exactly as an int32 tensor would, and
//! nothing detects it, neither on the GPU nor on download (the wrapped word is a valid
//! int32). What is guaranteed: values that enter from the CPU are checked (above), and every
//! int64 result that fits int32 is exact. In practice the int64 tensors of exported models
//! are indices, positions, shapes and masks, far inside the range; a program that computes
//! large int64 values (hashes, products of large sizes, cumulative sums over huge counts)
//! must run on `--device cpu`. Integer division by zero gives 0 on the GPU where torch
//! raises; out-of-range gather indices read 0 where torch raises.

use super::device::{GpuBuffer, GpuDevice};
use crate::cpu::{Data, Tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Can tensors of `dtype` be held on the GPU as 32-bit words (what the dtype-generic
/// kernels, copies and gathers, move)? f16 is held packed, for the f16-aware kernels only.
pub fn gpu_dtype(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::F32 | DType::I64 | DType::I32 | DType::Bool | DType::U8 | DType::I8 | DType::I16
    )
}

/// The integer dtypes narrower than their i32 word on the GPU (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallInt {
    U8 = 1,
    I8 = 2,
    I16 = 3,
}

impl SmallInt {
    /// The shaders' constants for the codes (`SmallInt_U8`... in `wrap_small`; 0 is none).
    pub const CODES: crate::gpu::shaders::OpCodes = crate::gpu::shaders::OpCodes {
        shaders: &[
            crate::gpu::shaders::Shader::Ints,
            crate::gpu::shaders::Shader::Reduce,
        ],
        name: "SmallInt",
        codes: &[("U8", 1), ("I8", 2), ("I16", 3)],
    };
    pub fn of(dtype: DType) -> Option<SmallInt> {
        match dtype {
            DType::U8 => Some(SmallInt::U8),
            DType::I8 => Some(SmallInt::I8),
            DType::I16 => Some(SmallInt::I16),
            _ => None,
        }
    }
    /// The shaders' code for the wrap on store of an int output of `dtype` (0: none, an i32
    /// or int64 output; 1 uint8, 2 int8, 3 int16), as `wrap_small` in the shaders.
    pub fn code(dtype: DType) -> u32 {
        SmallInt::of(dtype).map_or(0, |s| s as u32)
    }
    /// The word of a fill value of `dtype` (full, masked_fill, pad...), None for a value
    /// torch refuses ("cannot be converted to type uint8_t without overflow"): an int in
    /// [-max, max] for uint8 (-1 is 255) or in the range of the signed types, a float within
    /// the dtype's range (truncated).
    pub fn fill_word(dtype: DType, v: crate::ops::Scalar) -> Option<u32> {
        use crate::ops::Scalar;
        let small = SmallInt::of(dtype)?;
        let (lo, hi) = match small {
            SmallInt::U8 => (0, 255),
            SmallInt::I8 => (-128, 127),
            SmallInt::I16 => (-32768, 32767),
        };
        let i = match v {
            Scalar::Int(i) if (lo.min(-hi)..=hi).contains(&i) => i,
            Scalar::Bool(b) => b as i64,
            Scalar::Float(f) if f >= lo as f64 && f <= hi as f64 => f.trunc() as i64,
            _ => return None,
        };
        Some(small.wrap(i) as u32)
    }
    /// `v` converted to the dtype as torch converts an integer (two's complement wrap).
    pub fn wrap(self, v: i64) -> i32 {
        match self {
            SmallInt::U8 => v as u8 as i32,
            SmallInt::I8 => v as i8 as i32,
            SmallInt::I16 => v as i16 as i32,
        }
    }
}

/// Bytes per element of `dtype` on the GPU.
pub fn gpu_elem_bytes(dtype: DType) -> u64 {
    match dtype {
        DType::F16 => 2,
        _ => 4,
    }
}

/// Bytes of a GPU buffer holding `len` elements of `dtype` (whole words, at least one: a
/// binding is never empty and its size a multiple of 4).
pub fn gpu_bytes(dtype: DType, len: usize) -> u64 {
    (len as u64 * gpu_elem_bytes(dtype)).div_ceil(4).max(1) * 4
}

pub struct Store {
    pub dtype: DType,
    /// Elements.
    pub len: usize,
    pub gpu: Option<GpuBuffer>,
    pub gpu_valid: bool,
    pub cpu: Option<Arc<RwLock<Data>>>,
    pub cpu_valid: bool,
}

pub type Cell = Arc<Mutex<Store>>;

pub fn lock(c: &Cell) -> MutexGuard<'_, Store> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// A strided view of a store.
#[derive(Clone)]
pub struct GTensor {
    pub cell: Cell,
    pub dtype: DType,
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    pub offset: usize,
}

impl std::fmt::Debug for GTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GTensor({} {:?} strides {:?} +{})",
            self.dtype, self.sizes, self.strides, self.offset
        )
    }
}

pub fn contiguous_strides(sizes: &[usize]) -> Vec<usize> {
    crate::tensor::contiguous_strides(sizes)
}

impl GTensor {
    pub fn numel(&self) -> usize {
        self.sizes.iter().product()
    }
    pub fn rank(&self) -> usize {
        self.sizes.len()
    }
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for i in (0..self.sizes.len()).rev() {
            if self.sizes[i] != 1 && self.strides[i] != expected {
                return false;
            }
            expected *= self.sizes[i];
        }
        true
    }
    /// Elements of the store this view can touch (offset + extent).
    pub fn span(&self) -> usize {
        if self.numel() == 0 {
            return self.offset;
        }
        self.offset
            + self
                .sizes
                .iter()
                .zip(&self.strides)
                .map(|(s, st)| (s - 1) * st)
                .sum::<usize>()
            + 1
    }
    /// A view sharing the store.
    pub fn view(&self, sizes: Vec<usize>, strides: Vec<usize>, offset: usize) -> GTensor {
        GTensor {
            cell: self.cell.clone(),
            dtype: self.dtype,
            sizes,
            strides,
            offset,
        }
    }
    /// An f16 tensor as 32-bit words, each a pair of f16 along the last dim (an `I32` view
    /// for the kernels that only move words: gathers, row copies). None unless the last dim
    /// is contiguous and even and every other stride and the offset are even.
    pub fn as_f16_pairs(&self) -> Option<GTensor> {
        let last = self.rank().checked_sub(1)?;
        let even = |v: usize| v.is_multiple_of(2);
        if self.dtype != DType::F16
            || self.strides[last] != 1
            || !even(self.sizes[last])
            || !even(self.offset)
            || self.strides[..last].iter().any(|&s| !even(s))
        {
            return None;
        }
        let mut sizes = self.sizes.clone();
        sizes[last] /= 2;
        let mut strides: Vec<usize> = self.strides.iter().map(|s| s / 2).collect();
        strides[last] = 1;
        let mut w = self.view(sizes, strides, self.offset / 2);
        w.dtype = DType::I32;
        Some(w)
    }
    /// A complex64 tensor as its f32 parts: the real view `[..., 2]` (torch's
    /// `view_as_real`), which the kernels that only move words (copies, gathers, cat) and
    /// the f32 reductions read and write.
    pub fn as_pairs(&self) -> GTensor {
        debug_assert_eq!(self.dtype, DType::Complex64);
        let mut sizes = self.sizes.clone();
        sizes.push(2);
        let mut strides: Vec<usize> = self.strides.iter().map(|s| s * 2).collect();
        strides.push(1);
        let mut w = self.view(sizes, strides, self.offset * 2);
        w.dtype = DType::F32;
        w
    }
    /// The complex64 tensor a contiguous f32 tensor `[..., 2]` (a kernel's output on
    /// [`GTensor::as_pairs`] views) holds the pairs of.
    pub fn from_pairs(&self) -> GTensor {
        let sizes = self.sizes[..self.rank().saturating_sub(1)].to_vec();
        let strides = contiguous_strides(&sizes);
        let mut c = self.view(sizes, strides, self.offset / 2);
        c.dtype = DType::Complex64;
        c
    }
    /// A broadcast view to `sizes` (stride 0 on expanded dims), or None if incompatible.
    pub fn expand_to(&self, sizes: &[usize]) -> Option<GTensor> {
        let n = sizes.len();
        if self.rank() > n {
            return None;
        }
        let lead = n - self.rank();
        let mut strides = vec![0; n];
        for i in lead..n {
            let (s, st) = (self.sizes[i - lead], self.strides[i - lead]);
            if s == sizes[i] {
                strides[i] = st;
            } else if s != 1 {
                return None;
            }
        }
        Some(self.view(sizes.to_vec(), strides, self.offset))
    }
    /// A CPU tensor viewing the store's CPU copy (which must be current).
    pub fn cpu_view(&self) -> Result<Tensor> {
        let s = lock(&self.cell);
        let data = s.cpu.clone().filter(|_| s.cpu_valid).ok_or_else(|| {
            Error::Gpu("internal: CPU copy of a GPU tensor is not current".into())
        })?;
        Ok(Tensor {
            dtype: self.dtype,
            sizes: self.sizes.clone(),
            strides: self.strides.clone(),
            offset: self.offset,
            data,
        })
    }
}

/// A new store with only a CPU copy (a CPU tensor's storage).
pub fn cpu_store(t: &Tensor) -> Cell {
    // Complex storage is its real parts to the GPU (interleaved pairs): complex64 kernels
    // and real views of it (`view_as_real`, `real`, `imag`) read the words directly, and a
    // download gives f32 storage, which the CPU reads as complex through a complex view
    // (`crate::cpu::complex`). Complex128 stays on the CPU (WGSL has no f64).
    let (dtype, len) = {
        let d = t.read();
        match &*d {
            Data::C64(v) => (DType::F32, 2 * v.len()),
            Data::C128(v) => (DType::F64, 2 * v.len()),
            other if t.dtype.is_complex() => (other.dtype(), other.len()),
            other => (t.dtype, other.len()),
        }
    };
    Arc::new(Mutex::new(Store {
        dtype,
        len,
        gpu: None,
        gpu_valid: false,
        cpu: Some(t.data.clone()),
        cpu_valid: true,
    }))
}

/// Drop the host copy of a store whose GPU copy is current (a weight once uploaded): the
/// CPU data becomes empty and stale, and the next CPU use downloads it again (a CPU fallback
/// reading that weight keeps it from then on). Returns the bytes freed; 0 when the store
/// has no current GPU copy or no host copy.
pub fn release_host(cell: &Cell) -> usize {
    let mut s = lock(cell);
    if !s.gpu_valid || !s.cpu_valid {
        return 0;
    }
    let Some(d) = s.cpu.clone() else { return 0 };
    let mut data = d.write().unwrap_or_else(|e| e.into_inner());
    let freed = data.len() * s.dtype.size();
    if let Some(empty) = Data::zeros(s.dtype, 0) {
        *data = empty;
    }
    drop(data);
    s.cpu_valid = false;
    freed
}

/// A fresh GPU-only store of `len` elements for a kernel to write (its buffer may be one
/// that encoded work still reads: see [`GpuDevice::alloc_output`]).
pub fn gpu_store(dev: &GpuDevice, dtype: DType, len: usize, what: &str) -> Result<Cell> {
    // complex64: its f32 parts, as `cpu_store` holds a CPU complex storage.
    let (dtype, len) = match dtype {
        DType::Complex64 => (DType::F32, 2 * len),
        d => (d, len),
    };
    let buf = dev.alloc_output(gpu_bytes(dtype, len), what)?;
    Ok(Arc::new(Mutex::new(Store {
        dtype,
        len,
        gpu: Some(buf),
        gpu_valid: true,
        cpu: None,
        cpu_valid: false,
    })))
}

/// What [`to_gpu_bytes`] makes, without a copy, where the held words are the GPU's already:
/// f32 and int32 on a little-endian host.
pub fn words_as_held(d: &Data) -> Option<&[u8]> {
    match d {
        _ if cfg!(target_endian = "big") => None,
        Data::F32(v) => Some(bytemuck::cast_slice(v)),
        Data::I32(v) => Some(bytemuck::cast_slice(v)),
        _ => None,
    }
}

/// The bytes to upload for a CPU storage (see the module doc for the GPU representation).
pub fn to_gpu_bytes(d: &Data, what: &str) -> Result<Vec<u8>> {
    Ok(match d {
        Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        // Complex64 storage: its f32 parts (see `cpu_store`).
        Data::C64(v) => v
            .iter()
            .flat_map(|x| [x.re.to_le_bytes(), x.im.to_le_bytes()])
            .flatten()
            .collect(),
        Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::I64(v) => {
            let mut out = Vec::with_capacity(v.len() * 4);
            for (i, &x) in v.iter().enumerate() {
                let y = i32::try_from(x).map_err(|_| {
                    Error::Gpu(format!(
                        "{what}: int64 element {i} is {x}, outside the int32 range the GPU \
                         stores int64 in (run this program with --device cpu)"
                    ))
                })?;
                out.extend_from_slice(&y.to_le_bytes());
            }
            out
        }
        Data::U8(v) => v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
        Data::I8(v) => v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
        Data::I16(v) => v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
        Data::Bool(v) => v.iter().flat_map(|&b| (b as u32).to_le_bytes()).collect(),
        Data::F16(v) => {
            let mut out: Vec<u8> = v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect();
            out.resize(out.len().div_ceil(4) * 4, 0);
            out
        }
        other => {
            return Err(Error::Gpu(format!(
                "{what}: dtype {} is not held on the GPU",
                other.dtype()
            )))
        }
    })
}

/// CPU storage from downloaded GPU words.
pub fn from_gpu_bytes(dtype: DType, b: &[u8], len: usize) -> Result<Data> {
    if dtype == DType::F16 {
        return Ok(Data::F16(
            b.chunks_exact(2)
                .take(len)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        ));
    }
    let words = b
        .chunks_exact(4)
        .take(len)
        .map(|c| [c[0], c[1], c[2], c[3]]);
    Ok(match dtype {
        DType::F32 => Data::F32(words.map(f32::from_le_bytes).collect()),
        DType::I32 => Data::I32(words.map(i32::from_le_bytes).collect()),
        DType::I64 => Data::I64(words.map(|w| i32::from_le_bytes(w) as i64).collect()),
        DType::Bool => Data::Bool(words.map(|w| u32::from_le_bytes(w) != 0).collect()),
        // In range by construction (kernels wrap on store); `as` keeps the low bits anyway.
        DType::U8 => Data::U8(words.map(|w| i32::from_le_bytes(w) as u8).collect()),
        DType::I8 => Data::I8(words.map(|w| i32::from_le_bytes(w) as i8).collect()),
        DType::I16 => Data::I16(words.map(|w| i32::from_le_bytes(w) as i16).collect()),
        other => return Err(Error::Gpu(format!("dtype {other} is not held on the GPU"))),
    })
}
