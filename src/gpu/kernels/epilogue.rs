//! Fused epilogues on the GPU (`pt2web.fused_epilogue`, made by `src/passes/epilogue.rs`):
//! the producer's kernel (matmul.wgsl, matmul4.wgsl, conv.wgsl) runs with its `epilogue`
//! function replaced by the ops of the chain that read its result, so each result goes
//! through them in registers before it is stored and one dispatch does the work of two or
//! more.
//!
//! Every producer shader ends its stores in `epilogue(v, i)`, `i` the flat index of the
//! result in the node's (contiguous) output; by default it returns `v`. The generated
//! module is the producer's WGSL with:
//! - the op codes and scalar math of the elementwise kernels (`shaders/math.wgsl`);
//! - an `ep: Epilogue` field at the end of its `Meta` uniform ([`EpilogueMeta`], written
//!   after the producer's own parameters);
//! - the chain's other tensors bound at [`FIRST_BINDING`] and on, read strided and broadcast
//!   over the output's shape as the fused elementwise kernel reads them;
//! - `epilogue` computing the chain (`super::fused::ops_wgsl`: the same op functions and
//!   numbers from the uniform block as the fused kernel, so the results are those of the ops
//!   run one by one).
//!
//! Modules are interned by their text like the fused kernels'. A producer kernel applies the
//! epilogue in its storing dispatch ([`KernelCtx::dispatch_out`]); where it cannot (an f16
//! form, a transposed convolution, too many bindings), it stores its plain result and the
//! executor runs the epilogue's graph after it.

use super::fused::{math_prelude, offsets_wgsl, ops_wgsl, Numbers};
use super::*;
use crate::ops::elementwise::epilogue::Parts;
use crate::ops::elementwise::fused::{ElemStep, TARGET as FUSED};
use crate::program::{Graph, ValueId, ValueKind};
use crate::runtime::RunState;
use std::collections::HashMap;
use std::fmt::Write;

/// The binding of the epilogue's first tensor (after the producers' out, operands and bias).
pub const FIRST_BINDING: u32 = 5;
/// Most tensors an epilogue binds besides the producer's result.
const MAX_EXTRA: usize = 4;
/// Most numbers one epilogue reads from its parameters.
const MAX_NUMBERS: usize = 32;

/// The epilogue's part of the producer's uniform block (`Epilogue` in the generated WGSL).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct EpilogueMeta {
    pub rank: u32,
    pub _p: [u32; 3],
    pub shape: [u32; 8],
    /// Element offset of tensor j.
    pub offsets: [u32; MAX_EXTRA],
    /// Strides of tensor j over the output's (coalesced) shape: `strides[j * 8 + d]`.
    pub strides: [u32; 8 * MAX_EXTRA],
    pub numbers: [f32; MAX_NUMBERS],
}

impl Default for EpilogueMeta {
    fn default() -> Self {
        Zeroable::zeroed()
    }
}

/// The default epilogue every producer shader declares; a generated module replaces it.
pub const DEFAULT_EPILOGUE: &str = "fn epilogue(v: f32, i: u32) -> f32 {\n    return v;\n}";

/// An epilogue waiting for its producer's storing dispatch.
pub(crate) struct Pending {
    /// The WGSL replacing [`DEFAULT_EPILOGUE`]: the uniform struct, bindings and function.
    wgsl: String,
    numbers: Vec<f32>,
    extras: Vec<GTensor>,
    /// The shape of the producer's result where its output buffer is a flat view of it
    /// (`linear` over a batch of rows); else the output buffer's own.
    pub shape: Option<Vec<usize>>,
    /// The size of the reshape after the producer, where there is one (it wins over `shape`;
    /// a -1 is resolved against the output's size).
    pub view_size: Option<Vec<i64>>,
}

/// A chain: the graph its steps are in, the steps, and for each of that graph's inputs the
/// position in the epilogue's inputs (0: the producer's result, j > 0: tensor j - 1).
struct Chain<'a> {
    graph: &'a Graph,
    steps: Vec<ElemStep>,
    sources: Vec<usize>,
}

/// The chain of an epilogue graph: its one elementwise node, or the body of its one fused node.
fn chain_of(e: &Graph) -> Option<Chain<'_>> {
    let [node] = &e.nodes[..] else {
        return None;
    };
    let position = |v: ValueId| e.inputs.iter().position(|a| *a == Arg::Tensor(v));
    if node.target == FUSED {
        let (Some(Arg::Graph(body)), Some(Arg::Tensors(ids))) =
            (node.arg("body"), node.arg("inputs"))
        else {
            return None;
        };
        let steps = body
            .nodes
            .iter()
            .map(|n| ElemStep::parse(n, body))
            .collect::<Option<Vec<_>>>()?;
        let sources = ids
            .iter()
            .map(|&v| position(v))
            .collect::<Option<Vec<_>>>()?;
        return (sources.len() == body.inputs.len()).then_some(Chain {
            graph: body,
            steps,
            sources,
        });
    }
    let step = ElemStep::parse(node, e)?;
    Some(Chain {
        graph: e,
        steps: vec![step],
        sources: (0..e.inputs.len()).collect(),
    })
}

/// The dtype the epilogue graph declares for its input `j` (f32 or bool).
fn declared(e: &Graph, j: usize) -> Option<DType> {
    let Arg::Tensor(v) = e.inputs.get(j)? else {
        return None;
    };
    match &e.values.get(*v)?.kind {
        ValueKind::Tensor { dtype, .. } if matches!(dtype, DType::F32 | DType::Bool) => {
            Some(*dtype)
        }
        _ => None,
    }
}

/// The generated part of the epilogue graph `e` (inputs: the producer's result, then its
/// other tensors, f32 or bool), and its numbers. None where an op has no code or the chain
/// reads too many numbers.
pub(crate) fn epilogue_wgsl(e: &Graph) -> Option<(String, Vec<f32>)> {
    let chain = chain_of(e)?;
    let n = e.inputs.len().checked_sub(1)?;
    if n > MAX_EXTRA {
        return None;
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "struct Epilogue {{\n    rank: u32,\n    p0: u32,\n    p1: u32,\n    p2: u32,\n    \
         shape: array<vec4<u32>, 2>,\n    offsets: array<vec4<u32>, 1>,\n    \
         strides: array<vec4<u32>, {}>,\n    numbers: array<vec4<f32>, {}>,\n}}\n",
        MAX_EXTRA * 2,
        MAX_NUMBERS / 4
    );
    for j in 0..n {
        let ty = if declared(e, j + 1)? == DType::Bool {
            "u32"
        } else {
            "f32"
        };
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> ep_in{j}: array<{ty}>;",
            FIRST_BINDING as usize + j
        );
    }
    s.push_str("\nfn epilogue(v: f32, i: u32) -> f32 {\n    var rem = i;\n");
    s.push_str(&offsets_wgsl(n, "params.ep"));
    let mut names: HashMap<usize, String> = HashMap::new();
    for (a, &src) in chain.graph.inputs.iter().zip(&chain.sources) {
        let Arg::Tensor(v) = a else { return None };
        let name = if src == 0 {
            "v".to_string()
        } else {
            let j = src - 1;
            let load = if declared(e, src)? == DType::Bool {
                format!("ep_in{j}[o{j}] != 0u")
            } else {
                format!("ep_in{j}[o{j}]")
            };
            let _ = writeln!(s, "    let y{j} = {load};");
            format!("y{j}")
        };
        names.insert(*v, name);
    }
    let mut nums = Numbers::at("params.ep");
    let (ops, root) = ops_wgsl(chain.graph, &chain.steps, &mut names, &mut nums)?;
    s.push_str(&ops);
    let _ = writeln!(s, "    return {root};\n}}");
    (nums.values.len() <= MAX_NUMBERS).then_some((s, nums.values))
}

/// The run-time +inf that `shaders/math.wgsl` and the producer shaders each declare.
const INF_BITS: &str = "var<private> INF_BITS: u32 = 0x7f800000u;";

/// The producer's module with the epilogue in it (None: the module has no default epilogue
/// or `Meta` to extend).
pub(crate) fn with_epilogue(module: &str, epilogue: &str) -> Option<String> {
    // The prelude declares the +inf bits some producer shaders declare for themselves.
    let module = &module.replacen(INF_BITS, "", 1);
    let at = module.find(DEFAULT_EPILOGUE)?;
    let meta = module.find("struct Meta {")?;
    let close = meta + module[meta..].find("\n}")?;
    let mut s = math_prelude();
    s.push('\n');
    s.push_str(&module[..close]);
    s.push_str("\n    ep: Epilogue,");
    s.push_str(&module[close..at]);
    s.push_str(epilogue);
    s.push_str(&module[at + DEFAULT_EPILOGUE.len()..]);
    Some(s)
}

/// A requested shape with at most one -1 resolved against `numel` (None where it does not
/// fit; the reshape's own kernel reports that error).
fn infer_size(v: &[i64], numel: usize) -> Option<Vec<usize>> {
    let known: i64 = v.iter().filter(|&&d| d != -1).product();
    let free = v.iter().filter(|&&d| d == -1).count();
    if v.iter().any(|&d| d < -1) || free > 1 {
        return None;
    }
    v.iter()
        .map(|&d| match d {
            -1 if known > 0 && numel as i64 % known == 0 => Some((numel as i64 / known) as usize),
            -1 => None,
            d => Some(d as usize),
        })
        .collect()
}

/// The storing dispatch with an epilogue: its variant, uniform bytes and extra tensors.
type Applied = (Variant, Vec<u8>, Vec<GTensor>);

impl Pending {
    /// The epilogue of `e` over the tensors `extras` (None: it cannot be generated, or a
    /// tensor is not of the dtype the graph declares).
    pub(crate) fn new(e: &Graph, extras: Vec<GTensor>) -> Option<Pending> {
        if extras.len() + 1 != e.inputs.len() {
            return None;
        }
        for (j, t) in extras.iter().enumerate() {
            if Some(t.dtype) != declared(e, j + 1) {
                return None;
            }
        }
        let (wgsl, numbers) = epilogue_wgsl(e)?;
        Some(Pending {
            wgsl,
            numbers,
            extras,
            shape: None,
            view_size: None,
        })
    }

    /// The storing dispatch with this epilogue: its variant, uniform bytes and extra
    /// bindings. None where it cannot apply (the output is not f32, an f16 form, a tensor
    /// that does not broadcast to the output, too many bindings).
    fn apply(
        &self,
        k: &mut KernelCtx,
        v: &Variant,
        meta: &[u8],
        out: &GTensor,
        bound: usize,
    ) -> Result<Option<Applied>> {
        let shape = match &self.view_size {
            Some(v) => match infer_size(v, out.numel()) {
                Some(s) => s,
                None => return Ok(None),
            },
            None => self.shape.clone().unwrap_or_else(|| out.sizes.clone()),
        };
        let numel: usize = shape.iter().product();
        let limit =
            k.r.dev
                .properties
                .limits
                .max_storage_buffers_per_shader_stage as usize;
        if v.elems != Elems::F32
            || out.dtype != DType::F32
            || numel != out.numel()
            || shape.len() > MAX_RANK
            || bound + self.extras.len() > limit
            || !meta.len().is_multiple_of(16)
        {
            return Ok(None);
        }
        let Some(xs) = self
            .extras
            .iter()
            .map(|x| x.expand_to(&shape))
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        if xs.iter().any(|x| !k.fits(x)) {
            return Ok(None);
        }
        let Some(src) = with_epilogue(&v.source(), &self.wgsl) else {
            return Ok(None);
        };
        let Some(shader) = crate::gpu::shaders::intern_generated(&src) else {
            return Ok(None);
        };
        for x in &xs {
            k.ensure(x)?;
        }
        // The output's own (contiguous) strides join the coalescing: dims merge only where
        // every tensor and the output walk them as one.
        let own = contiguous_strides(&shape);
        let mut strides: Vec<&[usize]> = vec![&own];
        strides.extend(xs.iter().map(|x| &x.strides[..]));
        let (cshape, cstrides) = coalesce(&shape, &strides);
        let mut m = EpilogueMeta {
            rank: cshape.len() as u32,
            ..Default::default()
        };
        for (d, &s) in cshape.iter().enumerate() {
            m.shape[d] = s as u32;
        }
        for (j, x) in xs.iter().enumerate() {
            m.offsets[j] = x.offset as u32;
            for (d, &s) in cstrides[j + 1].iter().enumerate() {
                m.strides[j * 8 + d] = s as u32;
            }
        }
        m.numbers[..self.numbers.len()].copy_from_slice(&self.numbers);
        let mut bytes = meta.to_vec();
        bytes.extend_from_slice(bytemuck::bytes_of(&m));
        let variant = Variant {
            shader,
            elems: Elems::F32,
            ..*v
        };
        Ok(Some((variant, bytes, xs)))
    }
}

impl KernelCtx<'_, '_, '_> {
    /// The dispatch that stores a producer's result (`bufs[0]` its output), with the pending
    /// epilogue applied where it can be ([`KernelCtx::epilogue_applied`] tells).
    pub(crate) fn dispatch_out(
        &mut self,
        v: &Variant,
        meta: &[u8],
        bufs: &[(u32, &GTensor)],
        groups: (u32, u32, u32),
    ) -> Result<()> {
        let Some(ep) = self.epilogue.take() else {
            return self.dispatch(v, meta, bufs, groups);
        };
        let Some(&(_, out)) = bufs.first() else {
            return self.dispatch(v, meta, bufs, groups);
        };
        let applied = ep.apply(self, v, meta, out, bufs.len())?;
        let Some((variant, bytes, xs)) = applied else {
            return self.dispatch(v, meta, bufs, groups);
        };
        let mut all: Vec<(u32, &GTensor)> = bufs.to_vec();
        all.extend(
            xs.iter()
                .enumerate()
                .map(|(j, x)| (FIRST_BINDING + j as u32, x)),
        );
        self.dispatch(&variant, &bytes, &all, groups)?;
        self.epilogue_applied = true;
        Ok(())
    }
}

/// Run a fused epilogue node's producer on the GPU with its epilogue pending, then the
/// reshapes after it: Some((results, whether the epilogue was applied)), or None where the
/// producer has no GPU kernel or it declined (the executor then runs both subgraphs).
pub(crate) fn run_producer(
    r: &mut Runner<'_>,
    st: &mut RunState,
    parts: &Parts<'_>,
    pins: &[GTensor],
    sizes: &[i64],
    extras: &[GTensor],
) -> Result<Option<(Vec<Slot>, bool)>> {
    let g = parts.producer;
    let Some((node, reshapes)) = g.nodes.split_first() else {
        return Ok(None);
    };
    let Some(op) = lookup(&node.target) else {
        return Ok(None);
    };
    if pins.len() + sizes.len() != g.inputs.len() {
        return Ok(None);
    }
    let mut env_t: Vec<Option<GTensor>> = vec![None; g.values.len()];
    let mut env_v: Vec<Option<RValue>> = vec![None; g.values.len()];
    for (a, t) in g.inputs.iter().zip(pins) {
        let Arg::Tensor(id) = a else {
            return Ok(None);
        };
        env_t[*id] = Some(t.clone());
    }
    for (a, &i) in g.inputs[pins.len()..].iter().zip(sizes) {
        let Arg::SymInt(crate::program::IntArg::Sym(id)) = a else {
            return Ok(None);
        };
        env_v[*id] = Some(RValue::Int(i));
    }
    let mut pending = Pending::new(parts.epilogue, extras.to_vec());
    // After reshapes, the epilogue indexes the last one's shape (its -1 resolved when the
    // producer's output size is known).
    if let (Some(p), Some(last)) = (pending.as_mut(), reshapes.last()) {
        let ctx = OpCtx {
            node: last,
            graph: g,
            env: &env_v,
            state: st,
        };
        let name = if last.arg("shape").is_some() {
            "shape"
        } else {
            "size"
        };
        p.view_size = Some(ctx.ints(name)?);
    }
    let (mut outs, applied) = {
        let op_ctx = OpCtx {
            node,
            graph: g,
            env: &env_v,
            state: st,
        };
        let mut k = KernelCtx::new(r, &env_t, op_ctx);
        k.epilogue = pending;
        let Some(outs) = run(&mut k, op)? else {
            return Ok(None);
        };
        (outs, k.epilogue_applied)
    };
    let mut prev = node;
    for n in reshapes {
        bind(&mut env_t, prev, outs)?;
        let Some(op) = lookup(&n.target) else {
            return Err(Error::op(
                &n.target,
                "a fused epilogue's reshape has no GPU kernel",
            ));
        };
        let op_ctx = OpCtx {
            node: n,
            graph: g,
            env: &env_v,
            state: st,
        };
        let mut k = KernelCtx::new(r, &env_t, op_ctx);
        outs = run(&mut k, op)?
            .ok_or_else(|| Error::op(&n.target, "the GPU declined a fused epilogue's reshape"))?;
        prev = n;
    }
    Ok(Some((outs, applied)))
}

/// `n`'s one tensor result in the environment.
fn bind(env_t: &mut [Option<GTensor>], n: &crate::program::Node, outs: Vec<Slot>) -> Result<()> {
    match (&n.outputs[..], outs.into_iter().next()) {
        ([Arg::Tensor(id)], Some(Slot::Tensor(t))) if *id < env_t.len() => {
            env_t[*id] = Some(t);
            Ok(())
        }
        _ => Err(Error::op(
            &n.target,
            "a fused epilogue's producer made no tensor",
        )),
    }
}

/// The producer variants that apply epilogues (their shaders declare the default one).
pub fn producer_variants() -> Vec<Variant> {
    vec![
        super::conv::CONV,
        super::conv::CONV_TILED,
        super::conv::DEPTHWISE,
        super::conv::DEPTHWISE2D,
        MATMUL,
        MATMUL_BIAS,
        MATMUL_TILED,
        MATMUL_TILED_BIAS,
        GEMV,
        GEMV_BIAS,
        GEMV_SPLIT,
        GEMV_SPLIT_BIAS,
        MATMUL4[0],
        MATMUL4[1],
        MATMUL4_16[0],
        MATMUL4_16[1],
    ]
}

/// The WGSL modules a fused epilogue node's producer kernels would run, one per variant of
/// [`producer_variants`] (tests validate these with naga): `(variant label, module)`. Empty
/// where the epilogue cannot be generated.
pub fn epilogue_sources(node: &crate::program::Node) -> Vec<(String, String)> {
    let Ok(parts) = Parts::of(node) else {
        return Vec::new();
    };
    let Some((wgsl, _)) = epilogue_wgsl(parts.epilogue) else {
        return Vec::new();
    };
    producer_variants()
        .iter()
        .filter_map(|v| Some((v.label(), with_epilogue(&v.source(), &wgsl)?)))
        .collect()
}
