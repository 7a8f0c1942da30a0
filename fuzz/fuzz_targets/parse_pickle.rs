//! Any bytes as a torch.save file or a bare pickle stream: Ok or Err, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pt2web::Limits;

fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_total_bytes: 64 << 20, max_entry_bytes: 32 << 20, ..Limits::default() };
    let _ = pt2web::pickle::load_torch_save("fuzz", data, &limits);
    let mut resolve = |_k: &str, _d: pt2web::DType, _n: usize| Ok(pt2web::Storage::new(vec![0u8; 64]));
    let _ = pt2web::pickle::parse_pickle("fuzz", data, &limits, &mut resolve);
});
