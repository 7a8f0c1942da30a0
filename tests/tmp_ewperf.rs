//! Temporary elementwise timing harness (deleted after use).
use pt2web::archive::pt2::LoadOptions;
use pt2web::cpu::Tensor;
use pt2web::program::Pt2Archive;
use pt2web::runtime::{RValue, Session};
use pt2web::{DType, Limits};

#[test]
#[ignore]
fn ew_perf() {
    let bytes = std::fs::read("/tmp/ewperf/m.pt2").unwrap();
    let io_bytes = std::fs::read("/tmp/ewperf/in.safetensors").unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let get = |k: &str| {
        let v = io.tensor(k).unwrap();
        Tensor::from_data(
            pt2web::cpu::Data::from_le_bytes(DType::F32, v.data()).unwrap(),
            v.shape(),
        )
    };
    let archive = Pt2Archive::open("m.pt2", bytes, Limits::default()).unwrap();
    for name in [
        "add",
        "mul",
        "add_bias",
        "add_scalar",
        "relu",
        "gelu",
        "gelu_tanh",
        "sigmoid",
        "hardswish",
        "silu",
        "exp",
        "add_t",
        "where",
        "relu_",
        "clone",
        "relu_input",
        "relu_t",
    ] {
        let program = archive
            .program(Some(name), &LoadOptions::default())
            .unwrap();
        let mut s = Session::new(program).unwrap();
        let inputs = vec![
            RValue::Tensor(get("x")),
            RValue::Tensor(get("y")),
            RValue::Tensor(get("b")),
        ];
        s.run(inputs.clone()).unwrap();
        let t0 = std::time::Instant::now();
        for _ in 0..10 {
            s.run(inputs.clone()).unwrap();
        }
        eprintln!(
            "pt2web {name}: {:.2} ms",
            t0.elapsed().as_secs_f64() * 100.0
        );
    }
}
