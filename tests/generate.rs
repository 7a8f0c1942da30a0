//! `pt2web::generate`: the sampler, and the token loop over tiny Llama- and GPT-2-style models
//! exported with transformers' static-cache recipe (tests/fixgen/gen_lm.py, into the model
//! cache), whose greedy tokens must equal PyTorch's own loop over the same saved program, on
//! the CPU and on the GPU (lavapipe in CI), where the cache stays on the device and a decode
//! step reads back 8 bytes.

mod common;

use pt2web::archive::pt2::LoadOptions;
use pt2web::backend::Backend;
use pt2web::generate::{generate, GenerateOptions, Generated, Sampler, Sampling};
use pt2web::gpu::GpuSession;
use pt2web::program::{Program, Pt2Archive};
use pt2web::runtime::{RValue, Session};
use pt2web::Limits;
use serde_json::Value;
use std::path::Path;

const MODELS: [&str; 2] = ["llama_static", "gpt2_static"];

fn sampler(temperature: f64, top_k: Option<usize>, top_p: Option<f64>, seed: u64) -> Sampler {
    Sampler::new(&Sampling {
        temperature,
        top_k,
        top_p,
        seed,
    })
}

#[test]
fn greedy_takes_the_first_of_equal_maxima() {
    let mut s = sampler(0.0, None, None, 1);
    assert_eq!(s.pick(&[0.5, 2.0, 2.0, -1.0]).unwrap(), 1);
    let e = s.pick(&[0.5, f32::NAN]).unwrap_err().to_string();
    assert!(e.contains("NaN"), "{e}");
}

#[test]
fn sampling_is_seeded_and_respects_top_k_and_top_p() {
    let logits: Vec<f32> = (0..50).map(|i| ((i * 7) % 13) as f32 * 0.3).collect();
    let draw = |seed, k, p| {
        let mut s = sampler(1.0, k, p, seed);
        (0..200)
            .map(|_| s.pick(&logits).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(7, None, None), draw(7, None, None));
    assert_ne!(draw(7, None, None), draw(8, None, None));
    // top-k 3: the three largest logits (3.6 at 11, 24 and 37); top-k 1 and a tiny top-p
    // keep the same three, tied at the cut, and the greedy pick is the first of them.
    let top3 = [11, 24, 37];
    let max = logits.iter().cloned().fold(f32::MIN, f32::max);
    assert!(top3.iter().all(|&i| logits[i] == max));
    assert_eq!(sampler(0.0, None, None, 0).pick(&logits).unwrap(), 11);
    for (k, p) in [(Some(3), None), (Some(1), None), (None, Some(1e-9))] {
        let d = draw(5, k, p);
        assert!(
            d.iter().all(|&t| top3.contains(&(t as usize))),
            "{k:?} {p:?}"
        );
        assert_eq!(d.iter().collect::<std::collections::BTreeSet<_>>().len(), 3);
    }
    // top-k 4: every logit at least the 4th largest, so the four at 3.3 stay too (ties at
    // the cut are kept, as transformers' TopKLogitsWarper).
    let top4 = draw(5, Some(4), None);
    assert!(top4.iter().all(|&t| logits[t as usize] >= logits[9]));
    let seen: std::collections::BTreeSet<_> = top4.iter().collect();
    assert!(seen.len() > 4, "{seen:?}");
    // top-p: the mass of the three maxima at temperature 1 is 3e^3.6 / sum; a top-p below it
    // keeps only them, one just above it adds the 3.3s.
    let w: Vec<f64> = logits.iter().map(|&x| (x as f64).exp()).collect();
    let top_mass = 3.0 * (max as f64).exp() / w.iter().sum::<f64>();
    assert!(draw(9, None, Some(top_mass * 0.99))
        .iter()
        .all(|&t| top3.contains(&(t as usize))));
    assert!(draw(9, None, Some(top_mass * 1.01))
        .iter()
        .any(|&t| !top3.contains(&(t as usize))));
}

fn load(dir: &Path, name: &str) -> (Program, Value) {
    let file = format!("{name}.pt2");
    let archive = Pt2Archive::open(
        &file,
        std::fs::read(dir.join(&file)).unwrap(),
        Limits::default(),
    )
    .unwrap();
    let p = archive.program(None, &LoadOptions::default()).unwrap();
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.generate.json"))).unwrap())
            .unwrap();
    (p, meta)
}

fn run(b: &mut dyn Backend, meta: &Value, sampling: Sampling) -> (Generated, Vec<i64>) {
    let prompt: Vec<i64> = serde_json::from_value(meta["prompt"].clone()).unwrap();
    let opts = GenerateOptions {
        max_new_tokens: meta["max_new_tokens"].as_u64().unwrap() as usize,
        sampling,
        eos: None,
    };
    let mut seen = Vec::new();
    let out = pollster::block_on(generate(b, &prompt, &opts, &mut |t| {
        seen.push(t);
        Ok(())
    }))
    .unwrap();
    (out, seen)
}

fn want_tokens(meta: &Value) -> Vec<i64> {
    serde_json::from_value(meta["tokens"].clone()).unwrap()
}

/// The prompt call's last logits against PyTorch's (max abs error).
fn prefill_error(b: &mut dyn Backend, dir: &Path, name: &str, meta: &Value) -> f64 {
    prefill_error_to(b, dir, name, meta, "prefill_last")
}

/// The prompt call's last logits against PyTorch's logits `key` (max abs error).
fn prefill_error_to(b: &mut dyn Backend, dir: &Path, name: &str, meta: &Value, key: &str) -> f64 {
    let prompt: Vec<i64> = serde_json::from_value(meta["prompt"].clone()).unwrap();
    let n = prompt.len();
    let ids = pt2web::cpu::Tensor::from_vec(prompt, &[1, n]);
    let pos = pt2web::cpu::Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), &[n]);
    let outs = b
        .run(vec![RValue::Tensor(ids), RValue::Tensor(pos)])
        .unwrap();
    let got = outs[0].as_tensor().unwrap().contiguous().to_vec::<f32>();
    let bytes = std::fs::read(dir.join(format!("{name}.logits.safetensors"))).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let want = common::to_tensor(&st.tensor(key).unwrap()).to_vec::<f32>();
    let last = &got[got.len() - want.len()..];
    last.iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs() as f64)
        .fold(0.0, f64::max)
}

#[test]
fn greedy_tokens_match_pytorch_on_the_cpu() {
    let Some(dir) = common::model_cache_with("gpt2_static.generate.json") else {
        return;
    };
    for name in MODELS {
        let (p, meta) = load(&dir, name);
        let err = prefill_error(&mut Session::new(p.clone()).unwrap(), &dir, name, &meta);
        assert!(err < 1e-4, "{name}: prefill logits {err} from PyTorch");
        let mut s = Session::new(p).unwrap();
        let (out, seen) = run(&mut s, &meta, Sampling::default());
        assert_eq!(out.tokens, want_tokens(&meta), "{name}");
        assert_eq!(seen, out.tokens, "{name}: on_token saw each token");
        assert_eq!(out.readback_bytes_per_token, 0);
        eprintln!(
            "{name} (cpu): prefill logits max error {err:.2e}, tokens {:?}",
            out.tokens
        );
    }
}

#[test]
fn greedy_tokens_match_pytorch_on_the_gpu_with_the_cache_on_the_device() {
    let Some(dir) = common::model_cache_with("gpt2_static.generate.json") else {
        return;
    };
    let Some(dev) = common::gpu_device() else {
        return;
    };
    for name in MODELS {
        let (p, meta) = load(&dir, name);
        let err = prefill_error(
            &mut GpuSession::new(p.clone(), dev.clone()).unwrap(),
            &dir,
            name,
            &meta,
        );
        assert!(err < 1e-4, "{name}: prefill logits {err} from PyTorch");
        let mut g = GpuSession::new(p.clone(), dev.clone()).unwrap();
        let (out, _) = run(&mut g, &meta, Sampling::default());
        assert_eq!(out.tokens, want_tokens(&meta), "{name}");
        // A greedy decode step reads back the token (and a NaN flag), not the logits or cache.
        assert_eq!(
            out.readback_bytes_per_token, 8,
            "{name}: {:?}",
            g.last_stats
        );
        // Seeded sampling: reproducible, picked on the device (8 bytes back per token), and
        // the same tokens as on the CPU.
        let sampling = Sampling {
            temperature: 0.8,
            top_k: Some(20),
            top_p: Some(0.95),
            seed: 11,
        };
        let on_gpu = |s| {
            let mut g = GpuSession::new(p.clone(), dev.clone()).unwrap();
            let (out, _) = run(&mut g, &meta, s);
            assert_eq!(out.readback_bytes_per_token, 8, "{name}: sampling");
            out.tokens
        };
        let a = on_gpu(sampling.clone());
        assert_eq!(
            a,
            on_gpu(sampling.clone()),
            "{name}: same seed, same tokens"
        );
        let cpu = run(&mut Session::new(p.clone()).unwrap(), &meta, sampling)
            .0
            .tokens;
        assert_eq!(a, cpu, "{name}: seeded sampling on the GPU and the CPU");
        eprintln!(
            "{name} (gpu): prefill logits max error {err:.2e}, tokens {:?}",
            out.tokens
        );
    }
}

/// Weights quantized at load (`LoadOptions::weights`): the prompt's logits equal PyTorch's
/// for the same model with its Linear / Embedding / Conv1D weights rounded the same way
/// (tests/fixgen/gen_lm.py implements the format on its own), on the CPU and the GPU; so do
/// the greedy tokens; the quantized weights take at most 0.3x their f32 bytes.
/// The distance to the f32 model's logits is printed (the README quotes it).
#[test]
fn weights_quantized_at_load_match_pytorch_with_the_same_rounding() {
    use pt2web::archive::pt2::WeightFormat;
    let Some(dir) = common::model_cache_with("gpt2_static.generate.json") else {
        return;
    };
    let dev = common::gpu_device();
    for name in MODELS {
        for (fmt, key) in [
            (WeightFormat::Int8, "int8"),
            (WeightFormat::Int4 { group: 32 }, "int4"),
        ] {
            let key = &format!("prefill_last_{key}");
            let tokens_key = key.replace("prefill_last", "tokens");
            let (f32p, meta) = load(&dir, name);
            let mut p = f32p.clone();
            let report = pt2web::passes::quantize::run(&mut p, fmt).unwrap();
            assert!(report.weights > 0, "{name} {fmt:?}: nothing quantized");
            let ratio = report.quantized_bytes as f64 / report.f32_bytes as f64;
            assert!(ratio <= 0.3, "{name} {fmt:?}: {ratio:.3} of the f32 bytes");
            let ops = p.graph.op_histogram();
            assert!(
                !ops.contains_key("aten.linear.default")
                    && !ops.contains_key("aten.addmm.default")
                    && !ops.contains_key("aten.embedding.default"),
                "{name} {fmt:?}: an op kept its f32 weight: {ops:?}"
            );
            let mut cpu = Session::new(p.clone()).unwrap();
            let err = prefill_error_to(&mut cpu, &dir, name, &meta, key);
            assert!(
                err < 1e-4,
                "{name} {fmt:?}: logits {err:.3e} from PyTorch's"
            );
            let mut cpu = Session::new(p.clone()).unwrap();
            let from_f32 = prefill_error(&mut cpu, &dir, name, &meta);
            let cpu_tokens = run(
                &mut Session::new(p.clone()).unwrap(),
                &meta,
                Sampling::default(),
            )
            .0
            .tokens;
            let want: Vec<i64> = serde_json::from_value(meta[&tokens_key].clone()).unwrap();
            assert_eq!(cpu_tokens, want, "{name} {fmt:?}: PyTorch's greedy tokens");
            let mut line = format!(
                "{name} {fmt:?}: {} weights at {ratio:.3}x their f32 bytes; prefill logits max \
                 error {err:.2e} against PyTorch's with the same rounding on the CPU",
                report.weights
            );
            if let Some(dev) = &dev {
                let mut g = GpuSession::new(p.clone(), dev.clone()).unwrap();
                let gpu_err = prefill_error_to(&mut g, &dir, name, &meta, key);
                assert!(
                    gpu_err < 1e-4,
                    "{name} {fmt:?}: GPU logits {gpu_err:.3e} from PyTorch's"
                );
                let mut g = GpuSession::new(p.clone(), dev.clone()).unwrap();
                let (out, _) = run(&mut g, &meta, Sampling::default());
                assert_eq!(
                    out.tokens, cpu_tokens,
                    "{name} {fmt:?}: greedy tokens GPU vs CPU"
                );
                line += &format!(", {gpu_err:.2e} on the GPU");
            }
            eprintln!("{line}; {from_f32:.2e} from the f32 model's logits");
        }
    }
}

/// Every call's last logits with PyTorch's tokens fed in (the prompt, then one token per call:
/// teacher forcing, so a near tie in one step does not change what the later steps see),
/// against PyTorch's f32 logits (`prefill_last`, `step_<i>`): the max abs error, and the
/// largest logit magnitude.
fn teacher_forced_error(b: &mut dyn Backend, dir: &Path, name: &str, meta: &Value) -> (f64, f64) {
    let prompt: Vec<i64> = serde_json::from_value(meta["prompt"].clone()).unwrap();
    let tokens = want_tokens(meta);
    let bytes = std::fs::read(dir.join(format!("{name}.logits.safetensors"))).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (mut err, mut scale) = (0f64, 0f64);
    let mut call = |ids: Vec<i64>, start: usize, key: &str| {
        let n = ids.len();
        let ids = pt2web::cpu::Tensor::from_vec(ids, &[1, n]);
        let pos = pt2web::cpu::Tensor::from_vec(
            (start as i64..(start + n) as i64).collect::<Vec<_>>(),
            &[n],
        );
        let outs = b
            .run(vec![RValue::Tensor(ids), RValue::Tensor(pos)])
            .unwrap();
        let t = outs[0].as_tensor().unwrap();
        assert_eq!(t.dtype, pt2web::DType::F32, "{name}: logits stay float32");
        let got = t.contiguous().to_vec::<f32>();
        let want = common::to_tensor(&st.tensor(key).unwrap()).to_vec::<f32>();
        let last = &got[got.len() - want.len()..];
        for (a, w) in last.iter().zip(&want) {
            err = err.max((a - w).abs() as f64);
            scale = scale.max(w.abs() as f64);
        }
    };
    call(prompt.clone(), 0, "prefill_last");
    for (i, &t) in tokens[..tokens.len() - 1].iter().enumerate() {
        call(vec![t], prompt.len() + i, &format!("step_{i}"));
    }
    (err, scale)
}

/// f16 execution of the f32 programs (`LoadOptions::dtype`): weights converted at load
/// (half the bytes), activations in f16, the logits still float32; with PyTorch's tokens fed
/// in, every call's logits stay within 1% of the largest f32 logit of PyTorch's, on the CPU
/// and the GPU (where the adapter has shader-f16; refused with a clear error where not).
#[test]
fn f16_execution_tracks_pytorch_f32_logits() {
    use pt2web::archive::pt2::Precision;
    let Some(dir) = common::model_cache_with("gpt2_static.generate.json") else {
        return;
    };
    let dev = common::gpu_device();
    for name in MODELS {
        let (f32p, meta) = load(&dir, name);
        let mut p = f32p.clone();
        let report = pt2web::passes::half::to_f16(&mut p).unwrap();
        assert!(report.tensors > 0 && report.f16_bytes * 2 == report.f32_bytes);
        assert_eq!(p.precision, Precision::F16);
        // Weights and the KV cache (written in place, or returned as mutations) are f16;
        // what only positions feed (RoPE's inv_freq) stays f32.
        for (fqn, e) in &p.state {
            let was = f32p.state[fqn].tensor.dtype;
            let want = if was == pt2web::DType::F32 && !fqn.contains("inv_freq") {
                pt2web::DType::F16
            } else {
                was
            };
            assert_eq!(e.tensor.dtype, want, "{name}: state '{fqn}'");
        }
        let (err, scale) =
            teacher_forced_error(&mut Session::new(p.clone()).unwrap(), &dir, name, &meta);
        let mut line = format!(
            "{name} f16: {} tensors ({} -> {} bytes), {} f16 / {} f32 nodes, {} casts; \
             logits max error {err:.2e} (largest logit {scale:.2}) on the CPU",
            report.tensors,
            report.f32_bytes,
            report.f16_bytes,
            report.f16_nodes,
            report.f32_nodes,
            report.casts
        );
        assert!(err < 0.01 * scale, "{line}");
        if let Some(dev) = &dev {
            match GpuSession::new(p.clone(), dev.clone()) {
                Ok(mut g) => {
                    let (gerr, _) = teacher_forced_error(&mut g, &dir, name, &meta);
                    line += &format!(", {gerr:.2e} on the GPU");
                    // Every node of a decode step runs on the device (the f16 cache included).
                    assert_eq!(
                        g.last_stats.fallback_nodes(),
                        0,
                        "{:?}",
                        g.last_stats.fallbacks
                    );
                    assert!(gerr < 0.01 * scale, "{line}");
                }
                Err(e) => {
                    assert!(!dev.f16_enabled(), "{e}");
                    assert!(e.to_string().contains("shader-f16"), "{e}");
                    line += ", refused on the GPU (no shader-f16)";
                }
            }
        }
        eprintln!("{line}");
    }
}
