//! The DLPack ABI (`dlpack.h`, v0.8 and v1.0; the float8 codes of v1.1), field for field as
//! `#[repr(C)]` types, so a pointer to them can cross into C, CUDA libraries or Python
//! capsules. Layouts are checked against the C sizes and offsets in tests/dlpack.rs.

use std::ffi::c_void;

/// `DLPACK_MAJOR_VERSION`/`DLPACK_MINOR_VERSION` this layer writes into
/// [`DLManagedTensorVersioned::version`].
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 0 };

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write through `data`.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer copied the data for this export.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLDeviceType` (a C enum: 32 bits). Only the kinds pt2web meets are named.
pub type DLDeviceType = i32;
pub const K_DL_CPU: DLDeviceType = 1;
pub const K_DL_CUDA: DLDeviceType = 2;
pub const K_DL_CUDA_HOST: DLDeviceType = 3;
pub const K_DL_VULKAN: DLDeviceType = 7;
pub const K_DL_METAL: DLDeviceType = 8;
pub const K_DL_ROCM: DLDeviceType = 10;
pub const K_DL_CUDA_MANAGED: DLDeviceType = 13;
pub const K_DL_WEBGPU: DLDeviceType = 15;

/// `DLDataTypeCode` (stored in the 8-bit [`DLDataType::code`]).
pub const K_DL_INT: u8 = 0;
pub const K_DL_UINT: u8 = 1;
pub const K_DL_FLOAT: u8 = 2;
pub const K_DL_OPAQUE_HANDLE: u8 = 3;
pub const K_DL_BFLOAT: u8 = 4;
pub const K_DL_COMPLEX: u8 = 5;
pub const K_DL_BOOL: u8 = 6;
pub const K_DL_FLOAT8_E4M3FN: u8 = 10;
pub const K_DL_FLOAT8_E4M3FNUZ: u8 = 11;
pub const K_DL_FLOAT8_E5M2: u8 = 12;
pub const K_DL_FLOAT8_E5M2FNUZ: u8 = 13;
pub const K_DL_FLOAT8_E8M0FNU: u8 = 14;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// A strided view of memory the producer owns. `shape` and `strides` point at `ndim`
/// int64s; `strides` may be null for a compact row-major tensor; strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// The pre-1.0 managed tensor (what `torch.utils.dlpack.to_dlpack` puts in its capsule): the
/// consumer calls `deleter` once when done.
#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// The v1.0 managed tensor: a version, flags (read-only, copied) and the same ownership rule.
#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}
