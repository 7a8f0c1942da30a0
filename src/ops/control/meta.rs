//! Rules of the control family: higher-order ops run the rule pass over their subgraphs
//! (`cond` over both branches, which must agree), `getitem` picks from a list, `sym_size` and
//! friends read the concrete shapes, symbolic arithmetic is evaluated by the CPU kernels
//! themselves (they only see numbers), `item()` gives a data-dependent scalar, asserts give
//! nothing (and fail when their condition is known to be false).

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult, ScalarKind};
use crate::ops::OpTable;
use crate::program::{Arg, Graph};
use crate::runtime::{RValue, RunState};

fn positional<'a>(ctx: &MetaCtx<'a>, i: usize, what: &str) -> RuleResult<&'a Arg> {
    ctx.arg_at(i)
        .ok_or_else(|| format!("missing argument {i} ({what})"))
}

fn subgraph<'a>(ctx: &MetaCtx<'a>, i: usize, what: &str) -> RuleResult<&'a Graph> {
    match positional(ctx, i, what)? {
        Arg::Graph(g) => Ok(g),
        other => Err(format!(
            "argument {i} ({what}) is {other:?}, expected a subgraph"
        )),
    }
}

/// The elements of a list argument (operands of higher-order ops).
fn flat_values(ctx: &MetaCtx, a: &Arg) -> RuleResult<Vec<MValue>> {
    Ok(match a {
        Arg::None => Vec::new(),
        Arg::Ints(_) | Arg::SymInts(_) => ctx
            .ints_of(a, "operands")?
            .into_iter()
            .map(MValue::Int)
            .collect(),
        other => match ctx.resolve(other)? {
            MValue::Tensors(ts) => ts.into_iter().map(MValue::Tensor).collect(),
            MValue::OptTensors(ts) => ts
                .into_iter()
                .map(|t| t.map_or(MValue::None, MValue::Tensor))
                .collect(),
            v => vec![v],
        },
    })
}

/// Shape a subgraph's results as this node's outputs (one list when the node defines a single
/// `Tensor[]`).
fn node_results(ctx: &MetaCtx, outs: Vec<MValue>) -> Vec<MValue> {
    if ctx.node.outputs.len() == 1 && matches!(ctx.node.outputs[0], Arg::Tensors(_)) {
        let ts = outs
            .into_iter()
            .filter_map(|v| match v {
                MValue::Tensor(t) => Some(t),
                _ => None,
            })
            .collect();
        return vec![MValue::Tensors(ts)];
    }
    outs
}

/// `cond(pred, true_fn, false_fn, operands)`: the predicate usually depends on data, so both
/// branches are inferred; torch requires them to agree.
pub(super) fn cond(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = subgraph(ctx, 1, "true_fn")?;
    let f = subgraph(ctx, 2, "false_fn")?;
    let ops = flat_values(ctx, positional(ctx, 3, "operands")?)?;
    let a = ctx
        .run_subgraph(t, ops.clone())
        .map_err(|e| format!("in true_fn: {e}"))?;
    let b = ctx
        .run_subgraph(f, ops)
        .map_err(|e| format!("in false_fn: {e}"))?;
    let tensors = |v: &[MValue]| -> Vec<Option<(DType, Vec<usize>)>> {
        v.iter()
            .map(|x| x.as_tensor().map(|t| (t.dtype, t.sizes.clone())))
            .collect()
    };
    if tensors(&a) != tensors(&b) {
        return Err(format!(
            "the branches return different shapes or dtypes: {:?} vs {:?}",
            tensors(&a),
            tensors(&b)
        ));
    }
    Ok(node_results(ctx, a))
}

/// `while_loop(cond_fn, body_fn, carried, additional)`: the carried values keep their metas
/// (torch checks the body preserves them); the body is inferred once to check that.
pub(super) fn while_loop(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let body = subgraph(ctx, 1, "body_fn")?;
    let carried = flat_values(ctx, positional(ctx, 2, "carried_inputs")?)?;
    let extra = match ctx.arg_at(3) {
        Some(a) => flat_values(ctx, a)?,
        None => Vec::new(),
    };
    let mut inputs = carried.clone();
    inputs.extend(extra);
    let next = ctx
        .run_subgraph(body, inputs)
        .map_err(|e| format!("in body_fn: {e}"))?;
    if next.len() != carried.len() {
        return Err(format!(
            "body_fn returns {} values for {} carried inputs",
            next.len(),
            carried.len()
        ));
    }
    for (a, b) in carried.iter().zip(&next) {
        if let (MValue::Tensor(x), MValue::Tensor(y)) = (a, b) {
            if x != y {
                return Err(format!("body_fn changes a carried tensor from {x} to {y}"));
            }
        }
    }
    Ok(node_results(ctx, carried))
}

/// `map_impl(f, xs, pos_args)`: `f` over slices of the leading dim, results stacked.
pub(super) fn map_impl(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let f = subgraph(ctx, 0, "f")?;
    let xs = flat_values(ctx, positional(ctx, 1, "xs")?)?;
    let pos = match ctx.arg_at(2) {
        Some(a) => flat_values(ctx, a)?,
        None => Vec::new(),
    };
    let mut n = None;
    let mut inputs = Vec::new();
    for x in xs {
        match x {
            MValue::Tensor(t) if t.rank() > 0 => {
                if *n.get_or_insert(t.sizes[0]) != t.sizes[0] {
                    return Err("mapped tensors must have the same leading dimension".into());
                }
                inputs.push(MValue::Tensor(t.with_sizes(t.sizes[1..].to_vec())));
            }
            other => {
                return Err(format!(
                    "map xs must be tensors of rank >= 1, got {}",
                    other.kind()
                ))
            }
        }
    }
    let n = n.ok_or("map needs at least one mapped tensor")?;
    inputs.extend(pos);
    let outs = ctx
        .run_subgraph(f, inputs)
        .map_err(|e| format!("in map body: {e}"))?;
    let stacked = outs
        .into_iter()
        .map(|o| match o {
            MValue::Tensor(t) => {
                let mut s = vec![n];
                s.extend(&t.sizes);
                Ok(MValue::Tensor(t.with_sizes(s)))
            }
            other => Err(format!(
                "map body must return tensors, got {}",
                other.kind()
            )),
        })
        .collect::<RuleResult<Vec<_>>>()?;
    Ok(node_results(ctx, stacked))
}

/// `scan`: the combine graph's shapes on one slice; the carry keeps its shapes, each
/// output is stacked over the scanned dimension.
pub(super) fn scan(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let f = subgraph(ctx, 0, "combine_fn")?;
    let init = flat_values(ctx, positional(ctx, 1, "init")?)?;
    let xs = flat_values(ctx, positional(ctx, 2, "xs")?)?;
    let extra = match ctx.arg_at(3) {
        Some(a) => flat_values(ctx, a)?,
        None => Vec::new(),
    };
    let mut lens = Vec::new();
    let mut inputs = init.clone();
    for x in xs {
        match x {
            MValue::Tensor(t) if t.rank() > 0 => {
                lens.push(t.sizes[0]);
                inputs.push(MValue::Tensor(t.with_sizes(t.sizes[1..].to_vec())));
            }
            other => {
                return Err(format!(
                    "scan xs must be tensors of rank >= 1, got {}",
                    other.kind()
                ))
            }
        }
    }
    let n = super::sliced_len(super::Sliced::Scan, lens.into_iter())?;
    inputs.extend(extra);
    let mut outs = ctx
        .run_subgraph(f, inputs)
        .map_err(|e| format!("in combine_fn: {e}"))?;
    if outs.len() < init.len() {
        return Err(format!(
            "combine_fn returns {} values for {} carried values",
            outs.len(),
            init.len()
        ));
    }
    let ys = outs.split_off(init.len());
    for (c, i) in outs.iter().zip(&init) {
        if c != i {
            return Err(format!(
                "combine_fn changes a carried value from {} to {}",
                describe(i),
                describe(c)
            ));
        }
    }
    for y in ys {
        match y {
            MValue::Tensor(t) => {
                let mut s = vec![n];
                s.extend(&t.sizes);
                outs.push(MValue::Tensor(t.with_sizes(s)));
            }
            other => {
                return Err(format!(
                    "combine_fn must return tensors, got {}",
                    other.kind()
                ))
            }
        }
    }
    Ok(node_results(ctx, outs))
}

fn describe(v: &MValue) -> String {
    match v {
        MValue::Tensor(t) => t.to_string(),
        other => other.kind().to_string(),
    }
}

pub(super) fn getitem(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let seq = ctx.resolve(positional(ctx, 0, "sequence")?)?;
    let i = ctx.int_of(positional(ctx, 1, "index")?, "index")?;
    let items: Vec<MValue> = match seq {
        MValue::Tensors(v) => v.into_iter().map(MValue::Tensor).collect(),
        MValue::OptTensors(v) => v
            .into_iter()
            .map(|t| t.map_or(MValue::None, MValue::Tensor))
            .collect(),
        other => return Err(format!("cannot index a {}", other.kind())),
    };
    let len = items.len() as i64;
    let k = if i < 0 { i + len } else { i };
    if k < 0 || k >= len {
        return Err(format!(
            "index {i} is out of range for a list of {len} values"
        ));
    }
    Ok(vec![items[k as usize].clone()])
}

fn dim_of(ctx: &MetaCtx, t: &MetaTensor) -> RuleResult<usize> {
    if t.rank() == 0 {
        return Err("dimension specified as 0 but tensor has no dimensions".into());
    }
    ctx.wrap_dim(ctx.int("dim")?, t.rank())
}

pub(super) fn sym_size(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    if t.data_dependent {
        return Ok(vec![MValue::Unknown(ScalarKind::Int)]);
    }
    let d = dim_of(ctx, &t)?;
    Ok(vec![MValue::Int(t.sizes[d] as i64)])
}

pub(super) fn sym_numel(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    if t.data_dependent {
        return Ok(vec![MValue::Unknown(ScalarKind::Int)]);
    }
    Ok(vec![MValue::Int(t.numel() as i64)])
}

/// Strides of the meta device's dense layout.
pub(super) fn sym_stride(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let d = dim_of(ctx, &t)?;
    Ok(vec![MValue::Int(t.strides()[d] as i64)])
}

pub(super) fn sym_storage_offset(_ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::Int(0)])
}

pub(super) fn sym_is_contiguous(_ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::Bool(true)])
}

/// `item()`: a number of the tensor's kind whose value needs the data.
pub(super) fn item(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    if t.numel() != 1 && !t.data_dependent {
        return Err(format!(
            "a Tensor with {} elements cannot be converted to Scalar",
            t.numel()
        ));
    }
    Ok(vec![MValue::Unknown(if t.dtype.is_float() {
        ScalarKind::Float
    } else if t.dtype == DType::Bool {
        ScalarKind::Bool
    } else {
        ScalarKind::Int
    })])
}

/// Functional asserts return a token; plain ones nothing.
fn assert_result(ctx: &MetaCtx) -> Vec<MValue> {
    if ctx.node.outputs.iter().all(|a| matches!(a, Arg::None)) {
        vec![]
    } else {
        vec![MValue::Opaque]
    }
}

pub(super) fn assert_scalar(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx
        .arg("self")
        .or_else(|| ctx.arg_at(0))
        .ok_or("missing condition")?;
    let known_false = match ctx.resolve(a)? {
        MValue::Bool(b) => !b,
        MValue::Int(i) => i == 0,
        _ => false,
    };
    if known_false {
        let msg = ctx
            .opt_str("assert_msg")?
            .unwrap_or_else(|| "assertion failed".into());
        return Err(format!("for these input shapes: {msg}"));
    }
    Ok(assert_result(ctx))
}

pub(super) fn assert_async(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    if t.numel() != 1 {
        return Err(format!(
            "Boolean value of Tensor with {} elements is ambiguous",
            t.numel()
        ));
    }
    Ok(assert_result(ctx))
}

pub(super) fn constrain_range(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(assert_result(ctx))
}

pub(super) fn dep_token(_ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::Opaque])
}

/// `with_effects`: a token and the effectful op's (empty) result.
/// The new effect token (an empty float32 tensor, as torch's) and the wrapped op's result
/// (none for `_linalg_check_errors`, the one op the kernel runs).
pub(super) fn with_effects(_ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(vec![
        MValue::Tensor(MetaTensor::new(DType::F32, vec![0])),
        MValue::None,
    ])
}

/// An op with no outputs.
pub(super) fn nothing(_ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(vec![])
}

pub(super) fn assert_tensor_metadata(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("a")?;
    if let Some(d) = ctx.opt_dtype("dtype")? {
        if d != t.dtype {
            return Err(format!(
                "tensor dtype mismatch: expected {d}, got {}",
                t.dtype
            ));
        }
    }
    if let Some(size) = ctx.opt_ints("size")? {
        let got: Vec<i64> = t.sizes.iter().map(|&s| s as i64).collect();
        if size != got && !t.data_dependent {
            return Err(format!(
                "tensor size mismatch: expected {size:?}, got {got:?}"
            ));
        }
    }
    Ok(vec![])
}

/// Symbolic arithmetic: the CPU kernel, given the operands' numbers (tensors are never read
/// by these ops). A data-dependent operand gives a data-dependent result.
fn sym_op(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let declared = match ctx.node.outputs.first() {
        Some(Arg::SymFloat(_) | Arg::Float(_)) => ScalarKind::Float,
        Some(Arg::SymBool(_) | Arg::Bool(_)) => ScalarKind::Bool,
        _ => ScalarKind::Int,
    };
    let mut env: Vec<Option<RValue>> = vec![None; ctx.graph.values.len()];
    for (i, v) in ctx.env.iter().enumerate() {
        env[i] = match v {
            Some(MValue::Int(x)) => Some(RValue::Int(*x)),
            Some(MValue::Float(x)) => Some(RValue::Float(*x)),
            Some(MValue::Bool(x)) => Some(RValue::Bool(*x)),
            _ => None,
        };
    }
    let mut ids = Vec::new();
    ctx.node.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
    if ids
        .iter()
        .any(|&id| matches!(ctx.env.get(id), Some(Some(MValue::Unknown(_)))))
    {
        return Ok(vec![MValue::Unknown(declared)]);
    }
    let kernel = crate::ops::table()
        .cpu_kernel(ctx.target())
        .ok_or("no evaluator for this symbolic op")?;
    let mut st = RunState::default();
    let mut op = crate::ops::OpCtx {
        node: ctx.node,
        graph: ctx.graph,
        env: &env,
        state: &mut st,
    };
    let out = kernel(&mut op).map_err(|e| match e {
        crate::Error::Op { msg, .. } => msg,
        other => other.to_string(),
    })?;
    Ok(out
        .into_iter()
        .map(|v| match v {
            RValue::Int(i) => MValue::Int(i),
            RValue::Float(f) => MValue::Float(f),
            RValue::Bool(b) => MValue::Bool(b),
            _ => MValue::Unknown(declared),
        })
        .collect())
}

pub(crate) fn register(r: &mut OpTable) {
    for op in [
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "eq", "ne",
        "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "lshift", "rshift", "truth",
    ] {
        r.rule(&format!("_operator.{op}"), sym_op);
    }
    for f in ["trunc", "floor", "ceil", "sqrt"] {
        r.rule(&format!("math.{f}"), sym_op);
    }
    for f in [
        "sym_max",
        "sym_min",
        "sym_int",
        "sym_float",
        "sym_ite",
        "sym_not",
        "_sym_sqrt",
        "sym_sqrt",
        "sym_sum",
    ] {
        r.rule(&format!("torch.{f}"), sym_op);
    }
}
