//! The DLPack layer against dlpack.h: codes and layouts from the header, views and ownership
//! checked by round trips through a producer written here in the C way.

use pt2web::dlpack::ffi::*;
use pt2web::dlpack::*;
use pt2web::{DType, Error, HostTensor, Storage};
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// (dtype, DLDataTypeCode, bits) as dlpack.h (v1.1 for float8) and torch's `toDLDataType` pair them.
const CODES: [(DType, u8, u8); 21] = [
    (DType::U8, 1, 8),
    (DType::I8, 0, 8),
    (DType::I16, 0, 16),
    (DType::I32, 0, 32),
    (DType::I64, 0, 64),
    (DType::F16, 2, 16),
    (DType::F32, 2, 32),
    (DType::F64, 2, 64),
    (DType::ComplexHalf, 5, 32),
    (DType::Complex64, 5, 64),
    (DType::Complex128, 5, 128),
    (DType::Bool, 6, 8),
    (DType::BF16, 4, 16),
    (DType::U16, 1, 16),
    (DType::F8E4M3FN, 10, 8),
    (DType::F8E5M2, 12, 8),
    (DType::F8E4M3FNUZ, 11, 8),
    (DType::F8E5M2FNUZ, 13, 8),
    (DType::F8E8M0FNU, 14, 8),
    (DType::U32, 1, 32),
    (DType::U64, 1, 64),
];

#[test]
fn every_dtype_has_its_code_both_ways() {
    assert_eq!(CODES.len(), DType::ALL.len());
    for (d, code, bits) in CODES {
        let dl = DLDataType {
            code,
            bits,
            lanes: 1,
        };
        assert_eq!(dl_dtype(d), dl, "{d}");
        assert_eq!(dtype_of(dl).unwrap(), d);
    }
}

fn field_of(e: Error) -> String {
    match e {
        Error::DLPack { field, .. } => field,
        e => panic!("not a dlpack error: {e}"),
    }
}

#[test]
fn unsupported_types_name_the_field() {
    let t = |code, bits, lanes| field_of(dtype_of(DLDataType { code, bits, lanes }).unwrap_err());
    assert_eq!(t(K_DL_FLOAT, 32, 4), "dtype.lanes");
    assert_eq!(t(K_DL_OPAQUE_HANDLE, 64, 1), "dtype.code");
    assert_eq!(t(17, 4, 1), "dtype.code"); // kDLFloat4_e2m1fn
    assert_eq!(t(K_DL_FLOAT, 8, 1), "dtype.bits");
    assert_eq!(t(K_DL_INT, 128, 1), "dtype.bits");
}

/// A tensor over bytes 0, 1, 2…: element values tell where a view reads from.
fn counting(
    dtype: DType,
    storage_elems: usize,
    sizes: &[usize],
    strides: &[usize],
    offset: usize,
) -> HostTensor {
    let bytes = (0..storage_elems * dtype.size()).map(|i| i as u8).collect();
    HostTensor::new(
        "t",
        dtype,
        sizes.to_vec(),
        strides.to_vec(),
        offset,
        Storage::new(bytes),
    )
    .unwrap()
}

fn shape_of(dl: &DLTensor) -> (Vec<i64>, Vec<i64>) {
    let n = dl.ndim as usize;
    // SAFETY: an export of ours: ndim int64s each.
    unsafe {
        (
            std::slice::from_raw_parts(dl.shape, n).to_vec(),
            std::slice::from_raw_parts(dl.strides, n).to_vec(),
        )
    }
}

#[test]
fn contiguous_export_shares_the_bytes() {
    let t = counting(DType::F32, 6, &[2, 3], &[3, 1], 0);
    let dl = to_dlpack(&t).unwrap();
    let d = dl.dl_tensor();
    assert_eq!(shape_of(d), (vec![2, 3], vec![3, 1]));
    assert_eq!(d.ndim, 2);
    assert_eq!(d.byte_offset, 0);
    assert_eq!(
        d.device,
        DLDevice {
            device_type: K_DL_CPU,
            device_id: 0
        }
    );
    assert_eq!(
        d.dtype,
        DLDataType {
            code: K_DL_FLOAT,
            bits: 32,
            lanes: 1
        }
    );
    assert_eq!(d.data.cast_const().cast::<u8>(), t.storage.bytes().as_ptr());
    let back = from_dlpack(&dl).unwrap();
    assert_eq!(back.contiguous_bytes(), t.contiguous_bytes());
    assert_eq!(
        (back.sizes, back.strides),
        (t.sizes.clone(), t.strides.clone())
    );
}

#[test]
fn strided_views_round_trip() {
    // A transposed view at an offset, a stepped slice, a broadcast (stride 0) dimension.
    let cases: [(&[usize], &[usize], usize); 3] = [
        (&[3, 2], &[1, 3], 1),
        (&[2, 2], &[6, 2], 2),
        (&[4, 3], &[0, 1], 3),
    ];
    for (sizes, strides, offset) in cases {
        let t = counting(DType::I16, 12, sizes, strides, offset);
        let dl = to_dlpack_versioned(&t).unwrap();
        let d = dl.dl_tensor();
        assert_eq!(d.byte_offset, (offset * 2) as u64);
        let want: Vec<i64> = strides.iter().map(|&s| s as i64).collect();
        assert_eq!(shape_of(d).1, want);
        let back = from_dlpack(&dl).unwrap();
        assert_eq!(back.sizes, sizes);
        assert_eq!(
            back.contiguous_bytes(),
            t.contiguous_bytes(),
            "{sizes:?} {strides:?}"
        );
    }
}

#[test]
fn zero_dim_and_empty_round_trip() {
    let scalar = counting(DType::F64, 2, &[], &[], 1);
    let dl = to_dlpack(&scalar).unwrap();
    assert_eq!(dl.dl_tensor().ndim, 0);
    let back = from_dlpack(&dl).unwrap();
    assert!(back.sizes.is_empty());
    assert_eq!(back.contiguous_bytes(), (8..16).collect::<Vec<u8>>());

    let empty = HostTensor::from_bytes("e", DType::I64, vec![0, 3], Vec::new()).unwrap();
    let dl = to_dlpack(&empty).unwrap();
    assert_eq!(shape_of(dl.dl_tensor()).0, vec![0, 3]);
    let back = from_dlpack(&dl).unwrap();
    assert_eq!((back.numel(), back.sizes), (0, vec![0, 3]));
}

#[test]
fn versioned_export_is_flagged_read_only() {
    let t = counting(DType::U8, 4, &[4], &[1], 0);
    let dl = to_dlpack_versioned(&t).unwrap();
    // SAFETY: our own live export.
    let m = unsafe { &*dl.into_raw() };
    assert_eq!(m.version, DLPACK_VERSION);
    assert_eq!(m.flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    // SAFETY: into_raw gave us the duty to delete it once.
    unsafe { DLManagedTensorVersioned::delete((m as *const DLManagedTensorVersioned).cast_mut()) };
}

#[test]
fn export_holds_the_storage_until_its_deleter_runs() {
    let t = counting(DType::F32, 4, &[4], &[1], 0);
    assert_eq!(t.storage.holders(), 1);
    let dl = to_dlpack(&t).unwrap();
    assert_eq!(t.storage.holders(), 2);
    drop(dl);
    assert_eq!(t.storage.holders(), 1);

    // Handed to C: nothing is freed until C calls the deleter, once.
    let raw = to_dlpack(&t).unwrap().into_raw();
    assert_eq!(t.storage.holders(), 2);
    // SAFETY: the pointer came from into_raw; its deleter has not run.
    unsafe { DLManagedTensor::delete(raw) };
    assert_eq!(t.storage.holders(), 1);
}

/// A producer written the C way: one allocation, managed tensor first, a deleter that frees
/// it and counts its calls.
#[repr(C)]
struct Foreign {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
    data: Vec<u8>,
    deletes: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_foreign(p: *mut DLManagedTensor) {
    // SAFETY: p is the first field of a boxed Foreign.
    let f = unsafe { Box::from_raw(p.cast::<Foreign>()) };
    f.deletes.fetch_add(1, Ordering::SeqCst);
}

struct Spec {
    dtype: DLDataType,
    device_type: DLDeviceType,
    ndim: i32,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    data: Option<Vec<u8>>,
}

fn spec(shape: &[i64], data: Vec<u8>) -> Spec {
    Spec {
        dtype: dl_dtype(DType::U8),
        device_type: K_DL_CPU,
        ndim: shape.len() as i32,
        shape: shape.to_vec(),
        strides: None,
        data: Some(data),
    }
}

fn foreign(s: Spec, deletes: &Arc<AtomicUsize>) -> DLPack {
    let mut f = Box::new(Foreign {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice {
                    device_type: s.device_type,
                    device_id: 0,
                },
                ndim: s.ndim,
                dtype: s.dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_foreign),
        },
        shape: s.shape,
        strides: s.strides.clone().unwrap_or_default(),
        data: s.data.clone().unwrap_or_default(),
        deletes: deletes.clone(),
    });
    let d = &mut f.managed.dl_tensor;
    d.shape = f.shape.as_mut_ptr();
    if s.strides.is_some() {
        d.strides = f.strides.as_mut_ptr();
    }
    if s.data.is_some() {
        d.data = f.data.as_mut_ptr().cast();
    }
    // SAFETY: a live managed tensor whose deleter frees it.
    unsafe { DLPack::from_raw(Box::into_raw(f).cast()) }.unwrap()
}

#[test]
fn import_copies_and_calls_the_deleter_once() {
    let deletes = Arc::new(AtomicUsize::new(0));
    let mut s = spec(&[2, 2], vec![1, 2, 3, 4]);
    s.strides = Some(vec![1, 2]);
    let dl = foreign(s, &deletes);
    let t = from_dlpack(&dl).unwrap();
    assert_eq!(deletes.load(Ordering::SeqCst), 0);
    drop(dl);
    assert_eq!(deletes.load(Ordering::SeqCst), 1);
    // The copy outlives the producer's memory.
    assert_eq!(t.contiguous_bytes(), vec![1, 3, 2, 4]);
}

#[test]
fn bad_imports_name_the_field_and_still_free() {
    let deletes = Arc::new(AtomicUsize::new(0));
    let mut cases: Vec<(Spec, &str)> = Vec::new();
    let mut s = spec(&[2], vec![0; 2]);
    s.data = None;
    cases.push((s, "data"));
    let mut s = spec(&[2], vec![0; 8]);
    s.dtype = DLDataType {
        code: K_DL_OPAQUE_HANDLE,
        bits: 64,
        lanes: 1,
    };
    cases.push((s, "dtype.code"));
    let mut s = spec(&[2], vec![0; 2]);
    s.device_type = K_DL_VULKAN;
    cases.push((s, "device.device_type"));
    cases.push((spec(&[2, -1], Vec::new()), "shape[1]"));
    let mut s = spec(&[2], vec![0; 2]);
    s.strides = Some(vec![-1]);
    cases.push((s, "strides[0]"));
    let mut s = spec(&[2], vec![0; 2]);
    s.ndim = MAX_NDIM + 1;
    cases.push((s, "ndim"));
    let mut s = spec(&[1 << 62, 1], vec![0; 2]);
    s.strides = Some(vec![4, 1]);
    cases.push((s, "strides"));
    let n = cases.len();
    for (s, field) in cases {
        let dl = foreign(s, &deletes);
        assert_eq!(field_of(from_dlpack(&dl).unwrap_err()), field);
    }
    assert_eq!(deletes.load(Ordering::SeqCst), n);
    // SAFETY: a null pointer is refused before it is read.
    let e = unsafe { DLPack::from_raw(std::ptr::null_mut()) }
        .err()
        .unwrap();
    assert_eq!(field_of(e), "managed tensor");
}

/// A CUDA tensor: without the feature, an error that names it; with it on a machine without
/// the driver, one that names libcuda (on an NVIDIA machine the device pointer is bogus and
/// CUDA refuses it).
#[test]
fn cuda_tensors_need_the_feature_and_the_driver() {
    let deletes = Arc::new(AtomicUsize::new(0));
    let mut s = spec(&[2], vec![0; 2]);
    s.device_type = K_DL_CUDA;
    let e = from_dlpack(&foreign(s, &deletes)).unwrap_err().to_string();
    if cfg!(all(feature = "cuda", not(target_arch = "wasm32"))) {
        assert!(e.contains("libcuda") || e.contains("cuda: "), "{e}");
    } else {
        assert!(
            e.contains("device.device_type") && e.contains("`cuda` feature"),
            "{e}"
        );
    }
}

/// Sizes and offsets of dlpack.h's structs on a 64-bit target (what a C compiler lays out).
#[test]
#[cfg(target_pointer_width = "64")]
fn layout_matches_dlpack_h() {
    assert_eq!(size_of::<DLDevice>(), 8);
    assert_eq!(size_of::<DLDataType>(), 4);
    assert_eq!(offset_of!(DLTensor, device), 8);
    assert_eq!(offset_of!(DLTensor, ndim), 16);
    assert_eq!(offset_of!(DLTensor, dtype), 20);
    assert_eq!(offset_of!(DLTensor, shape), 24);
    assert_eq!(offset_of!(DLTensor, strides), 32);
    assert_eq!(offset_of!(DLTensor, byte_offset), 40);
    assert_eq!(size_of::<DLTensor>(), 48);
    assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
    assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
    assert_eq!(size_of::<DLManagedTensor>(), 64);
    assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
    assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
    assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
    assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
}
