//! `pt2web.fused_epilogue`: a matrix product or convolution (the producer) and the
//! elementwise ops that read its result (the epilogue: bias, activation, residual add,
//! scaling), made one node by the epilogue pass (`src/passes/epilogue.rs`). Its arguments:
//!
//! - `inputs`: the producer's tensors, then the epilogue's tensors from outside (a residual);
//! - `sizes`: the symbolic sizes the producer's reshapes read (often none);
//! - `producer`: a subgraph of the producer node (and the reshapes of its result that core
//!   ATen writes around a batched `linear`) over the first `inputs`, then `sizes`;
//! - `epilogue`: a subgraph over the producer's result and the other `inputs`: one
//!   elementwise op, or one `pt2web.fused_elementwise` node of a chain.
//!
//! Every backend can run the two subgraphs one after the other, and the CPU kernel and the
//! shape rule do. The GPU backend runs the producer's kernel with the epilogue's ops applied
//! to each result before it is stored (`src/gpu/kernels/epilogue.rs`): one dispatch, and the
//! producer's result never goes to memory.

use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::program::{Arg, Graph, IntArg, Node, ValueId};
use crate::runtime::{run_graph, RValue};

/// The target of a fused epilogue node.
pub const TARGET: &str = "pt2web.fused_epilogue.default";

/// The targets whose kernels can apply an epilogue (`aten.NAME.default`).
pub const PRODUCERS: &[&str] = &[
    "convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "addmm",
    "mm",
    "bmm",
    "matmul",
    "linear",
];

/// A fused epilogue node's parts.
pub struct Parts<'a> {
    /// All outside tensors: the producer's, then the epilogue's.
    pub inputs: &'a [ValueId],
    /// The symbolic sizes the producer's subgraph takes after its tensors.
    pub sizes: &'a [IntArg],
    pub producer: &'a Graph,
    pub epilogue: &'a Graph,
}

impl<'a> Parts<'a> {
    pub fn of(node: &'a Node) -> std::result::Result<Parts<'a>, String> {
        let (
            Some(Arg::Tensors(inputs)),
            Some(Arg::SymInts(sizes)),
            Some(Arg::Graph(producer)),
            Some(Arg::Graph(epilogue)),
        ) = (
            node.arg("inputs"),
            node.arg("sizes"),
            node.arg("producer"),
            node.arg("epilogue"),
        )
        else {
            return Err(
                "a fused epilogue node needs its inputs, sizes, producer and epilogue".into(),
            );
        };
        let Some(n) = producer.inputs.len().checked_sub(sizes.len()) else {
            return Err("a fused epilogue's producer takes fewer inputs than its sizes".into());
        };
        if n > inputs.len() || epilogue.inputs.len() != inputs.len() - n + 1 {
            return Err(format!(
                "a fused epilogue node's subgraphs take {} and {} inputs, it has {}",
                n,
                epilogue.inputs.len(),
                inputs.len()
            ));
        }
        Ok(Parts {
            inputs,
            sizes,
            producer,
            epilogue,
        })
    }
    /// How many of `inputs` the producer reads.
    fn producer_tensors(&self) -> usize {
        self.producer.inputs.len() - self.sizes.len()
    }
    /// The producer's outside tensors.
    pub fn producer_inputs(&self) -> &'a [ValueId] {
        &self.inputs[..self.producer_tensors()]
    }
    /// The epilogue's outside tensors (after the producer's result).
    pub fn extra_inputs(&self) -> &'a [ValueId] {
        &self.inputs[self.producer_tensors()..]
    }
}

pub(super) fn register(r: &mut OpTable) {
    r.define(TARGET, run, rule);
}

/// The CPU kernel: the producer, then the epilogue. When the producer is a convolution and
/// the epilogue one activation of its result ([`TileAct::of`]), the convolution may apply the
/// activation to each tile of its result as it finishes it (it takes the request from
/// [`RunState::tile_act`](crate::runtime::RunState)); the epilogue then does not run.
fn run(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let parts = Parts::of(ctx.node).map_err(|e| ctx.err(e))?;
    let resolve = |ctx: &OpCtx, ids: &[ValueId]| {
        ids.iter()
            .map(|&id| ctx.resolve(&Arg::Tensor(id)))
            .collect::<Result<Vec<_>>>()
    };
    let mut pins = resolve(ctx, parts.producer_inputs())?;
    for i in parts.sizes {
        pins.push(ctx.resolve(&Arg::SymInt(i.clone()))?);
    }
    let act = TileAct::of(&parts);
    ctx.state.tile_act = act;
    let produced = run_graph(parts.producer, pins, ctx.state);
    // Taken by the producer: applied.
    let applied = act.is_some() && ctx.state.tile_act.take().is_none();
    let mut eins = produced.map_err(|e| e.within(&ctx.node.target, "in the producer"))?;
    if applied {
        eins.truncate(1);
        return Ok(eins);
    }
    eins.truncate(1);
    eins.extend(resolve(ctx, parts.extra_inputs())?);
    run_graph(parts.epilogue, eins, ctx.state)
        .map_err(|e| e.within(&ctx.node.target, "in the epilogue"))
}

/// The shape rule: the producer's rule, then the epilogue's.
fn rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let parts = Parts::of(ctx.node)?;
    let resolve = |ctx: &MetaCtx, ids: &[ValueId]| {
        ids.iter()
            .map(|&id| ctx.resolve(&Arg::Tensor(id)))
            .collect::<RuleResult<Vec<_>>>()
    };
    let mut pins = resolve(ctx, parts.producer_inputs())?;
    for i in parts.sizes {
        pins.push(ctx.resolve(&Arg::SymInt(i.clone()))?);
    }
    let mut eins = ctx
        .run_subgraph(parts.producer, pins)
        .map_err(|e| format!("in the producer: {e}"))?;
    eins.truncate(1);
    eins.extend(resolve(ctx, parts.extra_inputs())?);
    ctx.run_subgraph(parts.epilogue, eins)
        .map_err(|e| format!("in the epilogue: {e}"))
}

/// The bias [`TileAct::bias_then`] adds: none, `Rows(b)` (b[r] to row r: a convolution's
/// output channels) or `Cols(b)` (b[j] to column j: a linear layer's outputs).
/// The kernels that pass a bias (packed convolution, linear) are x86-64/wasm32 only.
#[derive(Clone, Copy)]
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "wasm32")),
    allow(dead_code)
)]
pub(crate) enum Bias<'a> {
    None,
    Rows(&'a [f32]),
    Cols(&'a [f32]),
}

/// An activation a CPU convolution or linear layer applies to each finished tile of its f32
/// result (the formulas of the activation ops themselves, so the values are the unfused ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum TileAct {
    Relu,
    Hardswish,
    Hardsigmoid,
    Silu,
    Gelu,
    GeluTanh,
}

impl TileAct {
    /// The activation of a fused node whose producer is one convolution, linear layer or 2-D
    /// product (`addmm`, `mm`) and whose epilogue is one of these activations of its result
    /// alone.
    fn of(parts: &Parts) -> Option<TileAct> {
        let [conv] = &parts.producer.nodes[..] else {
            return None;
        };
        let conv_op = conv
            .target
            .strip_prefix("aten.")
            .and_then(|t| t.split('.').next());
        if !conv_op.is_some_and(|t| t.starts_with("conv") && !t.starts_with("conv_transpose"))
            && conv_op != Some("convolution")
            && !matches!(conv_op, Some("linear" | "addmm" | "mm"))
        {
            return None;
        }
        let [node] = &parts.epilogue.nodes[..] else {
            return None;
        };
        if !parts.extra_inputs().is_empty() {
            return None;
        }
        let (Some(Arg::Tensor(x)), [Arg::Tensor(out)], [Arg::Tensor(res)]) = (
            node.arg("self"),
            &parts.epilogue.outputs[..],
            &node.outputs[..],
        ) else {
            return None;
        };
        if parts.epilogue.inputs.first() != Some(&Arg::Tensor(*x)) || out != res {
            return None;
        }
        let name = node.target.strip_prefix("aten.")?.split('.').next()?;
        Some(match name.trim_end_matches('_') {
            "relu" => TileAct::Relu,
            "hardswish" => TileAct::Hardswish,
            "hardsigmoid" => TileAct::Hardsigmoid,
            "silu" => TileAct::Silu,
            "gelu" => match node.arg("approximate") {
                None | Some(Arg::None) => TileAct::Gelu,
                Some(Arg::Str(a)) if a == "none" => TileAct::Gelu,
                Some(Arg::Str(a)) if a == "tanh" => TileAct::GeluTanh,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// Add the bias (when given), then apply the activation (when given), over the `rows` x
    /// `cols` floats at `p`, rows `rs` apart.
    ///
    /// # Safety
    /// Those floats must be valid and exclusively this call's.
    pub(crate) unsafe fn bias_then(
        act: Option<TileAct>,
        bias: Bias,
        p: *mut f32,
        rs: usize,
        [rows, cols]: [usize; 2],
    ) {
        use crate::ops::activation::{GeluErf, GeluTanh, Hardsigmoid, Hardswish, Relu, Silu};
        use crate::ops::elementwise::engine::UnaryOp;
        struct Identity;
        impl UnaryOp for Identity {
            fn float<R: crate::ops::elementwise::real::Real>(&self, x: R) -> R {
                x
            }
            fn int(&self, i: i64) -> i64 {
                i
            }
        }
        #[inline(always)]
        unsafe fn each(
            op: &impl UnaryOp,
            bias: Bias,
            p: *mut f32,
            rs: usize,
            rows: usize,
            cols: usize,
        ) {
            for r in 0..rows {
                // SAFETY: as the caller promised.
                let row = unsafe { std::slice::from_raw_parts_mut(p.add(r * rs), cols) };
                match bias {
                    Bias::Rows(b) => {
                        let b = b[r];
                        for v in row {
                            *v = op.float(*v + b);
                        }
                    }
                    Bias::Cols(b) => {
                        for (v, &b) in row.iter_mut().zip(&b[..cols]) {
                            *v = op.float(*v + b);
                        }
                    }
                    Bias::None => {
                        for v in row {
                            *v = op.float(*v);
                        }
                    }
                }
            }
        }
        /// [`each`] for the activation `act`.
        #[inline(always)]
        unsafe fn dispatch(
            act: Option<TileAct>,
            bias: Bias,
            p: *mut f32,
            rs: usize,
            rows: usize,
            cols: usize,
        ) {
            // SAFETY (each arm): as the caller promised.
            unsafe {
                match act {
                    None => each(&Identity, bias, p, rs, rows, cols),
                    Some(TileAct::Relu) => each(&Relu {}, bias, p, rs, rows, cols),
                    Some(TileAct::Hardswish) => each(&Hardswish {}, bias, p, rs, rows, cols),
                    Some(TileAct::Hardsigmoid) => each(&Hardsigmoid {}, bias, p, rs, rows, cols),
                    Some(TileAct::Silu) => each(&Silu {}, bias, p, rs, rows, cols),
                    Some(TileAct::Gelu) => each(&GeluErf {}, bias, p, rs, rows, cols),
                    Some(TileAct::GeluTanh) => each(&GeluTanh {}, bias, p, rs, rows, cols),
                }
            }
        }
        // The same loops compiled 16 and 8 lanes wide where the CPU has AVX-512 or AVX2 (the
        // baseline build runs four): the same operations per element, so the same values.
        // Hardswish's division by 6 dominates a tile's epilogue at four lanes.
        #[cfg(target_arch = "x86_64")]
        {
            // `dispatch` compiled with the given target features.
            macro_rules! compiled_for {
                ($features:literal, $name:ident) => {
                    #[target_feature(enable = $features)]
                    unsafe fn $name(
                        act: Option<TileAct>,
                        bias: Bias,
                        p: *mut f32,
                        rs: usize,
                        rows: usize,
                        cols: usize,
                    ) {
                        // SAFETY: as the caller promised.
                        unsafe { dispatch(act, bias, p, rs, rows, cols) }
                    }
                };
            }
            compiled_for!("avx512f", avx512);
            compiled_for!("avx2", avx2);
            if std::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F; the floats as the caller promised.
                return unsafe { avx512(act, bias, p, rs, rows, cols) };
            }
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2; the floats as the caller promised.
                return unsafe { avx2(act, bias, p, rs, rows, cols) };
            }
        }
        // SAFETY: as the caller promised.
        unsafe { dispatch(act, bias, p, rs, rows, cols) }
    }
}
