//! The backend switches of [`crate::backends`] for JS (`backends` in `js/index.js`, in the
//! spirit of `torch.backends`): read all at once, set one by its JS name. They are
//! process-wide (here: this page or Worker), read by the kernels at the next op; the graph
//! passes apply to models loaded afterwards.

use super::*;
use crate::backends::{
    self as b, Attention, AttentionKernel, Autotune, Backend as Built, ConvAlgorithm,
    MatmulAlgorithm, PassSet, RowAlgorithm,
};

fn attention_name(a: Attention) -> &'static str {
    match a {
        Attention::Math => "math",
        Attention::Streaming => "streaming",
    }
}

fn autotune_name(a: Autotune) -> &'static str {
    match a {
        Autotune::Auto => "auto",
        Autotune::On => "on",
        Autotune::Off => "off",
    }
}

fn autotune_parse(s: &str) -> Option<Autotune> {
    [Autotune::Auto, Autotune::On, Autotune::Off]
        .into_iter()
        .find(|a| autotune_name(*a) == s.to_ascii_lowercase())
}

/// Every switch as it is now: `{allowF16ReducedPrecision, attention, attentionKernel,
/// convAlgorithm, matmulAlgorithm, rowAlgorithm, autotune, deterministic, graphPasses,
/// optEinsum, built}` (`graphPasses`: the pass names, `optEinsum`: `{enabled, strategy,
/// isAvailable}` as torch's `torch.backends.opt_einsum`, `built`: the backends this build
/// holds).
#[wasm_bindgen(js_name = backendsGet)]
pub fn backends_get() -> Result<JsValue, JsValue> {
    let built: Vec<&str> = Built::ALL
        .into_iter()
        .filter(|x| b::is_built(*x))
        .map(Built::name)
        .collect();
    let passes: Vec<&str> = b::graph_passes()
        .passes()
        .into_iter()
        .map(crate::passes::Pass::name)
        .collect();
    to_js_value(&serde_json::json!({
        "allowF16ReducedPrecision": b::allow_f16_reduced_precision(),
        "attention": attention_name(b::attention()),
        "attentionKernel": b::attention_kernel().name(),
        "convAlgorithm": b::conv_algorithm().name(),
        "matmulAlgorithm": b::matmul_algorithm().name(),
        "rowAlgorithm": b::row_algorithm().name(),
        "autotune": autotune_name(b::autotune()),
        "deterministic": b::deterministic(),
        "graphPasses": passes,
        "optEinsum": {
            "enabled": b::opt_einsum::enabled(),
            "strategy": b::opt_einsum::strategy().name(),
            "isAvailable": b::opt_einsum::is_available(),
        },
        "built": built,
    }))
}

/// One of a switch's named choices, or an INPUT error naming the switch and the choices.
fn choice<T>(
    switch: &str,
    v: &JsValue,
    parse: impl Fn(&str) -> Option<T>,
    known: &str,
) -> Result<T, JsValue> {
    v.as_string().and_then(|s| parse(&s)).ok_or_else(|| {
        js_error(
            "INPUT",
            &format!("backends.{switch}: expected one of {known}, got {v:?}"),
        )
    })
}

fn flag(switch: &str, v: &JsValue) -> Result<bool, JsValue> {
    v.as_bool().ok_or_else(|| {
        js_error(
            "INPUT",
            &format!("backends.{switch}: expected a boolean, got {v:?}"),
        )
    })
}

/// Set the switch `name` (a key of [`backends_get`] but `built`) to `value`. `graphPasses`
/// takes `'all'`, `'none'`, a comma-separated string or an array of pass names.
#[wasm_bindgen(js_name = backendsSet)]
pub fn backends_set(name: &str, value: JsValue) -> Result<(), JsValue> {
    match name {
        "allowF16ReducedPrecision" => b::set_allow_f16_reduced_precision(flag(name, &value)?),
        "deterministic" => b::set_deterministic(flag(name, &value)?),
        "attention" => b::set_attention(choice(name, &value, Attention::parse, "math, streaming")?),
        "attentionKernel" => b::set_attention_kernel(choice(name, &value, AttentionKernel::parse, "auto, row, tiled")?),
        "convAlgorithm" => b::set_conv_algorithm(choice(name, &value, ConvAlgorithm::parse, "auto, tiled, blocked, gemm")?),
        "matmulAlgorithm" => b::set_matmul_algorithm(choice(name, &value, MatmulAlgorithm::parse, "auto, tiled, blocked")?),
        "rowAlgorithm" => b::set_row_algorithm(choice(name, &value, RowAlgorithm::parse, "auto, thread, workgroup, subgroup")?),
        "autotune" => b::set_autotune(choice(name, &value, autotune_parse, "auto, on, off")?),
        "optEinsum" => set_opt_einsum(&value)?,
        "graphPasses" => {
            let spec = if Array::is_array(&value) {
                Array::from(&value)
                    .iter()
                    .map(|p| p.as_string().unwrap_or_else(|| format!("{p:?}")))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                value.as_string().ok_or_else(|| {
                    js_error(
                        "INPUT",
                        "backends.graphPasses: expected 'all', 'none', or pass names",
                    )
                })?
            };
            // An empty list is no pass (PassSet::parse reads "" as all of them).
            let set = if spec.trim().is_empty() && Array::is_array(&value) {
                PassSet::NONE
            } else {
                PassSet::parse(&spec).map_err(|e| js_error("INPUT", &format!("backends.graphPasses: {e}")))?
            };
            b::set_graph_passes(set)
        }
        other => {
            return Err(js_error(
                "INPUT",
                &format!("backends: no switch '{other}' (allowF16ReducedPrecision, attention, attentionKernel, convAlgorithm, matmulAlgorithm, rowAlgorithm, autotune, deterministic, graphPasses, optEinsum)"),
            ))
        }
    }
    Ok(())
}

/// `optEinsum`: an object with `enabled` (a boolean) and / or `strategy` (`'auto'`,
/// `'greedy'`, `'optimal'`); both are checked before either is set.
fn set_opt_einsum(value: &JsValue) -> Result<(), JsValue> {
    if !value.is_object() {
        return Err(js_error(
            "INPUT",
            &format!("backends.optEinsum: expected {{enabled, strategy}}, got {value:?}"),
        ));
    }
    let field =
        |k: &str| js_sys::Reflect::get(value, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED);
    let (on, st) = (field("enabled"), field("strategy"));
    let on = (!on.is_undefined())
        .then(|| flag("optEinsum.enabled", &on))
        .transpose()?;
    let st = (!st.is_undefined())
        .then(|| {
            choice(
                "optEinsum.strategy",
                &st,
                b::opt_einsum::Strategy::parse,
                "auto, greedy, optimal",
            )
        })
        .transpose()?;
    if let Some(on) = on {
        b::opt_einsum::set_enabled(on);
    }
    if let Some(st) = st {
        b::opt_einsum::set_strategy(st);
    }
    Ok(())
}

/// `backends.cpu.getCpuCapability()`: which build of the WebAssembly runs
/// (`WASM_SIMD128`, `WASM_RELAXED_SIMD`; see `backends::cpu::get_cpu_capability`).
#[wasm_bindgen(js_name = backendsCpuCapability)]
pub fn backends_cpu_capability() -> String {
    b::cpu::get_cpu_capability().to_string()
}

/// `backends.setVerbose(level)`: the verbose kernel log (`backends::set_verbose`), one
/// console line per kernel run; 0 turns it off.
#[wasm_bindgen(js_name = backendsSetVerbose)]
pub fn backends_set_verbose(level: u32) {
    b::set_verbose(level)
}
