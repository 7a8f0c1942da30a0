//! Any bytes as a .pt2: opening, listing, loading every program and summarizing it must
//! return Ok or Err, never panic, and never allocate beyond the (small) limits set here.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pt2web::archive::pt2::LoadOptions;
use pt2web::program::Pt2Archive;
use pt2web::Limits;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_total_bytes: 64 << 20,
        max_entry_bytes: 32 << 20,
        max_tensor_elements: 1 << 22,
        ..Limits::default()
    };
    let Ok(a) = Pt2Archive::open("fuzz", data.to_vec(), limits) else { return };
    let opts = LoadOptions { limits, ..Default::default() };
    let _ = a.extra_files();
    for n in a.program_names().to_vec() {
        if let Ok(p) = a.program(Some(&n), &opts) {
            let _ = pt2web::info::program_info(&p);
        }
    }
});
