//! One generated kernel for a fused elementwise chain (`pt2web.fused_elementwise`, made by
//! `src/passes/fuse.rs`): each invocation reads its element of every input (strided and
//! broadcast, as the elementwise kernels read theirs), runs the chain's ops in registers
//! and writes one f32. The ops are the functions of `shaders/math.wgsl` by op code, so a
//! fused op computes exactly what its own kernel would. The WGSL is generated from the
//! chain's ops and numbers and interned ([`crate::gpu::shaders::intern_generated`]): two
//! chains alike share one module, pipeline and layout. Where the chain has an op or a dtype
//! this kernel does not take, it declines and the executor runs the body's nodes one by one.

use super::*;
use crate::ops::elementwise::fused::{Elem, ElemStep, Operand};
use crate::program::{Graph, ValueKind};
use std::collections::HashMap;
use std::fmt::Write;

/// Most inputs one fused kernel binds (the pass makes no larger chain).
const MAX_INPUTS: usize = 8;
/// Most numbers (operands, bounds, alphas) one chain reads from its parameters.
const MAX_NUMBERS: usize = 64;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct FusedMeta {
    pub numel: u32,
    pub rank: u32,
    pub row: u32,
    pub _p: u32,
    pub shape: [u32; 8],
    /// Element offset of input j.
    pub offsets: [u32; MAX_INPUTS],
    /// Strides of input j: `strides[j * 8 + d]`.
    pub strides: [u32; 8 * MAX_INPUTS],
    /// The chain's numbers, in the order its WGSL reads them.
    pub numbers: [f32; MAX_NUMBERS],
}

impl Default for FusedMeta {
    fn default() -> Self {
        Zeroable::zeroed()
    }
}

/// The WGSL name of an op code.
fn code_name(codes: &crate::gpu::shaders::OpCodes, code: u32) -> Option<String> {
    codes
        .codes
        .iter()
        .find(|(_, n)| *n == code)
        .map(|(v, _)| codes.const_name(v))
}

/// The chain's numbers: each is read from the kernel's parameters, never written into the
/// WGSL as a literal, where a driver's fast-math would fold `x * 0` to 0 for a NaN `x`.
pub(crate) struct Numbers {
    pub values: Vec<f32>,
    /// The uniform struct that holds them (`params`, or `params.ep` in an epilogue).
    at: &'static str,
}

impl Numbers {
    pub(crate) fn at(at: &'static str) -> Self {
        Numbers {
            values: Vec::new(),
            at,
        }
    }
    /// The WGSL that reads number `v` (the f32 the elementwise kernels would pass).
    fn read(&mut self, v: f64) -> String {
        let i = self.values.len();
        self.values.push(v as f32);
        format!("{}.numbers[{}][{}]", self.at, i / 4, i % 4)
    }
}

/// The unary op code of a [`crate::ops::elementwise::fused::UNARY`] name.
pub(crate) fn unary_code(name: &str) -> Option<UnaryOp> {
    match lookup(&format!("aten.{name}.default"))? {
        GpuOp::Unary(u) => Some(u),
        _ => None,
    }
}

/// The binary op code of a [`crate::ops::elementwise::fused::BINARY`] op.
pub(crate) fn binary_code(op: &str) -> Option<BinaryOp> {
    Some(match op {
        "add" => BinaryOp::Add,
        "sub" => BinaryOp::Sub,
        "mul" => BinaryOp::Mul,
        "div" => BinaryOp::Div,
        "rsub" => BinaryOp::Rsub,
        "maximum" => BinaryOp::Maximum,
        "minimum" => BinaryOp::Minimum,
        "pow" => BinaryOp::Pow,
        _ => return None,
    })
}

/// The op codes and scalar math every generated kernel calls (`shaders/math.wgsl`).
pub(crate) fn math_prelude() -> String {
    let mut s = String::new();
    for codes in [UnaryOp::CODES, BinaryOp::CODES, CompareOp::CODES] {
        s.push_str(&codes.wgsl());
    }
    s.push_str(crate::gpu::shaders::MATH);
    s
}

/// WGSL that sets `o{j}` to input j's element offset for the flat index `rem` (a `var`,
/// consumed), from `p`'s `rank`, `shape`, `offsets` and `strides` (8 per input).
pub(crate) fn offsets_wgsl(n: usize, p: &str) -> String {
    let mut s = String::new();
    for j in 0..n {
        let _ = writeln!(s, "    var o{j} = {p}.offsets[{}][{}];", j / 4, j % 4);
    }
    let _ = writeln!(
        s,
        "    var d = {p}.rank;\n    loop {{\n        if d <= 1u {{\n            break;\n        }}\n        \
         d = d - 1u;\n        let n = {p}.shape[d / 4u][d % 4u];\n        let q = rem % n;\n        \
         rem = rem / n;"
    );
    for j in 0..n {
        let _ = writeln!(
            s,
            "        o{j} = o{j} + q * {p}.strides[{}u + d / 4u][d % 4u];",
            j * 2
        );
    }
    s.push_str("    }\n    if d == 1u {\n");
    for j in 0..n {
        let _ = writeln!(s, "        o{j} = o{j} + rem * {p}.strides[{}][0];", j * 2);
    }
    s.push_str("    }\n");
    s
}

/// WGSL lines computing a chain's ops (`let v<id> = ...;`) from the values `names` gives
/// (the body's inputs), and the name of its result. None where an op has no code here.
pub(crate) fn ops_wgsl(
    body: &Graph,
    steps: &[ElemStep],
    names: &mut HashMap<usize, String>,
    nums: &mut Numbers,
) -> Option<(String, String)> {
    let mut s = String::new();
    let operand =
        |names: &HashMap<usize, String>, nums: &mut Numbers, o: &Operand| -> Option<String> {
            match o {
                Operand::Value(v) => names.get(v).cloned(),
                Operand::Number(f) => Some(nums.read(*f)),
            }
        };
    for st in steps {
        let a = operand(names, nums, st.operands.first()?)?;
        // Plain unary ops read neither parameter (the elementwise kernels pass 1 and 0).
        let unary = |nums: &mut Numbers, u: UnaryOp, p: Option<(f64, f64)>| -> Option<String> {
            let (alpha, beta) = match p {
                Some((x, y)) => (nums.read(x), nums.read(y)),
                None => ("1.0".into(), "0.0".into()),
            };
            Some(format!(
                "unary_value_k({}, {a}, {alpha}, {beta}, 0.0)",
                code_name(&UnaryOp::CODES, u as u32)?
            ))
        };
        let e = match &st.op {
            Elem::Unary(name) => unary(nums, unary_code(name)?, None)?,
            Elem::Gelu { tanh } => unary(
                nums,
                if *tanh {
                    UnaryOp::GeluTanh
                } else {
                    UnaryOp::Gelu
                },
                None,
            )?,
            Elem::LeakyRelu { slope } => unary(nums, UnaryOp::LeakyRelu, Some((*slope, 0.0)))?,
            Elem::Clamp { lo, hi } => unary(nums, UnaryOp::Clamp, Some((*lo, *hi)))?,
            Elem::Binary { op, alpha } => {
                let b = operand(names, nums, st.operands.get(1)?)?;
                let alpha = if *alpha == 1.0 {
                    "1.0".to_string()
                } else {
                    nums.read(*alpha)
                };
                format!(
                    "binary_k({}, {a}, {b}, {alpha})",
                    code_name(&BinaryOp::CODES, binary_code(op)? as u32)?
                )
            }
            Elem::Where => format!(
                "select({}, {}, {a})",
                operand(names, nums, st.operands.get(2)?)?,
                operand(names, nums, st.operands.get(1)?)?
            ),
        };
        let name = format!("v{}", st.out);
        let _ = writeln!(s, "    let {name} = {e};");
        names.insert(st.out, name);
    }
    let [Arg::Tensor(root)] = body.outputs[..] else {
        return None;
    };
    Some((s, names.get(&root)?.clone()))
}

/// The WGSL of a chain over inputs of `bools[j]` (a bool input, else f32), and the numbers
/// it reads. None where an op has no code here.
pub(crate) fn chain_source(
    body: &Graph,
    steps: &[ElemStep],
    bools: &[bool],
) -> Option<(String, Numbers)> {
    let n = bools.len();
    let mut nums = Numbers::at("params");
    let mut s = math_prelude();
    let _ = writeln!(
        s,
        "\nstruct Meta {{\n    numel: u32,\n    rank: u32,\n    row: u32,\n    pad: u32,\n    \
         shape: array<vec4<u32>, 2>,\n    offsets: array<vec4<u32>, {}>,\n    \
         strides: array<vec4<u32>, {}>,\n    numbers: array<vec4<f32>, {}>,\n}}\n",
        MAX_INPUTS / 4,
        MAX_INPUTS * 2,
        MAX_NUMBERS / 4
    );
    s.push_str("@group(0) @binding(0) var<uniform> params: Meta;\n");
    s.push_str("@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n");
    for (j, &b) in bools.iter().enumerate() {
        let ty = if b { "u32" } else { "f32" };
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> in{j}: array<{ty}>;",
            j + 2
        );
    }
    s.push_str(
        "\n@compute @workgroup_size(64)\nfn fused(@builtin(global_invocation_id) gid: vec3<u32>) {\n    \
         let i = gid.x + gid.y * params.row;\n    if i >= params.numel {\n        return;\n    }\n    \
         var rem = i;\n",
    );
    s.push_str(&offsets_wgsl(n, "params"));
    // Body value -> WGSL name: inputs x0.., node results v<id>.
    let mut names: HashMap<usize, String> = HashMap::new();
    for (j, a) in body.inputs.iter().enumerate() {
        let Arg::Tensor(v) = a else { return None };
        names.insert(*v, format!("x{j}"));
        let load = if bools[j] {
            format!("in{j}[o{j}] != 0u")
        } else {
            format!("in{j}[o{j}]")
        };
        let _ = writeln!(s, "    let x{j} = {load};");
    }
    let (ops, root) = ops_wgsl(body, steps, &mut names, &mut nums)?;
    s.push_str(&ops);
    let _ = writeln!(s, "    out[i] = {root};\n}}");
    (nums.values.len() <= MAX_NUMBERS).then_some((s, nums))
}

/// The WGSL module a fused node's kernel runs (None where it runs its body instead), for
/// its declared input dtypes (tests validate these with naga).
pub fn fused_source(node: &crate::program::Node) -> Option<String> {
    let Some(Arg::Graph(body)) = node.arg("body") else {
        return None;
    };
    chain(body).map(|(_, src, _)| src)
}

/// A fused body's declared input dtypes (f32 or bool), its kernel's WGSL and numbers.
fn chain(body: &Graph) -> Option<(Vec<DType>, String, Numbers)> {
    let dtypes = body
        .inputs
        .iter()
        .map(|a| match a {
            Arg::Tensor(v) => match &body.values.get(*v)?.kind {
                ValueKind::Tensor { dtype, .. } if matches!(dtype, DType::F32 | DType::Bool) => {
                    Some(*dtype)
                }
                _ => None,
            },
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let steps = body
        .nodes
        .iter()
        .map(|n| ElemStep::parse(n, body))
        .collect::<Option<Vec<_>>>()?;
    let bools: Vec<bool> = dtypes.iter().map(|&d| d == DType::Bool).collect();
    let (src, nums) = chain_source(body, &steps, &bools)?;
    Some((dtypes, src, nums))
}

/// The fused node's kernel (None: run its body instead).
pub(crate) fn fused(k: &mut KernelCtx) -> Out {
    let (Some(Arg::Graph(body)), Some(Arg::Tensors(ids))) =
        (k.op.node.arg("body"), k.op.node.arg("inputs"))
    else {
        return Ok(None);
    };
    let body: &Graph = body;
    let n = ids.len();
    let limit =
        k.r.dev
            .properties
            .limits
            .max_storage_buffers_per_shader_stage as usize;
    if n == 0 || n > MAX_INPUTS || n + 1 > limit || body.inputs.len() != n {
        return Ok(None);
    }
    let Some((declared, src, nums)) = chain(body) else {
        return Ok(None);
    };
    let mut xs = Vec::with_capacity(n);
    for (id, &d) in ids.iter().zip(&declared) {
        match k.env_t.get(*id).cloned().flatten() {
            Some(t) if t.dtype == d => xs.push(t),
            _ => return Ok(None),
        }
    }
    let mut shape = xs[0].sizes.clone();
    for x in &xs[1..] {
        let Some(s) = broadcast_shapes(&shape, &x.sizes) else {
            return Ok(None);
        };
        shape = s;
    }
    if !k.out_is(DType::F32) || shape.len() > MAX_RANK {
        return Ok(None);
    }
    let Some(xs) = xs
        .iter()
        .map(|x| x.expand_to(&shape))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let numel: usize = shape.iter().product();
    if numel >= u32::MAX as usize || xs.iter().any(|x| !k.fits(x)) {
        return Ok(None);
    }
    let Some(shader) = crate::gpu::shaders::intern_generated(&src) else {
        return Ok(None);
    };
    for x in &xs {
        k.ensure(x)?;
    }
    let out = k.new_out(DType::F32, &shape)?;
    if numel == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let strides: Vec<&[usize]> = xs.iter().map(|x| &x.strides[..]).collect();
    let (cshape, cstrides) = coalesce(&shape, &strides);
    let (gx, gy, row) = grid(numel, 64);
    let mut m = FusedMeta {
        numel: numel as u32,
        rank: cshape.len() as u32,
        row,
        ..Default::default()
    };
    for (d, &s) in cshape.iter().enumerate() {
        m.shape[d] = s as u32;
    }
    m.numbers[..nums.values.len()].copy_from_slice(&nums.values);
    for (j, x) in xs.iter().enumerate() {
        m.offsets[j] = x.offset as u32;
        for (d, &s) in cstrides[j].iter().enumerate() {
            m.strides[j * 8 + d] = s as u32;
        }
    }
    let v = Variant::new(shader, "fused");
    let mut bufs: Vec<(u32, &GTensor)> = vec![(1, &out)];
    bufs.extend(xs.iter().enumerate().map(|(j, x)| (j as u32 + 2, x)));
    k.dispatch(&v, bytemuck::bytes_of(&m), &bufs, (gx, gy, 1))?;
    Ok(Some(vec![Slot::Tensor(out)]))
}
