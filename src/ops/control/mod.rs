//! Op family: control. Higher-order ops (`cond`, `while_loop`, `map_impl`) run their
//! subgraphs with the interpreter; `_operator.getitem`; sizes as symbolic ints (`sym_size`,
//! `sym_numel`...); `item`; and the runtime checks export inserts (`_assert_scalar`,
//! `sym_constrain_range`...), which fail with an error carrying torch's message.
//! Symbolic arithmetic (`_operator.add`, `torch.sym_max`...) is in `sym.rs`.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

mod sym;
#[cfg(test)]
mod tests;

use super::{OpCtx, OpTable};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::program::{Arg, Graph};
use crate::runtime::{run_graph, RValue};

pub(crate) fn register(r: &mut OpTable) {
    meta::register(r);
    r.define("higher_order.cond", cond, meta::cond);
    r.define("higher_order.while_loop", while_loop, meta::while_loop);
    r.define("higher_order.map_impl", map_impl, meta::map_impl);
    r.define("higher_order.scan", scan, meta::scan);
    r.define("_operator.getitem", getitem, meta::getitem);
    r.define("aten.sym_size.int", sym_size, meta::sym_size);
    r.define("aten.sym_numel.default", sym_numel, meta::sym_numel);
    r.define("aten.sym_stride.int", sym_stride, meta::sym_stride);
    r.define(
        "aten.sym_storage_offset.default",
        sym_storage_offset,
        meta::sym_storage_offset,
    );
    r.define(
        "aten.sym_is_contiguous.default",
        sym_is_contiguous,
        meta::sym_is_contiguous,
    );
    r.define("aten.item.default", item, meta::item);
    r.define("aten._local_scalar_dense.default", item, meta::item);
    r.define(
        "aten._assert_scalar.default",
        assert_scalar,
        meta::assert_scalar,
    );
    r.define(
        "aten._functional_assert_scalar.default",
        assert_scalar,
        meta::assert_scalar,
    );
    r.define_op("aten._assert_async", assert_async, meta::assert_async);
    r.define(
        "aten._functional_assert_async.msg",
        assert_async,
        meta::assert_async,
    );
    for t in [
        "aten.sym_constrain_range.default",
        "aten.sym_constrain_range_for_size.default",
        "aten._functional_sym_constrain_range.default",
        "aten._functional_sym_constrain_range_for_size.default",
    ] {
        r.define(t, constrain_range, meta::constrain_range);
    }
    r.define("aten._make_dep_token.default", dep_token, meta::dep_token);
    r.define(
        "higher_order.with_effects",
        with_effects,
        meta::with_effects,
    );
    r.define(
        "aten._linalg_check_errors.default",
        linalg_check_errors,
        meta::nothing,
    );
    r.define(
        "aten._assert_tensor_metadata.default",
        assert_tensor_metadata,
        meta::assert_tensor_metadata,
    );
    sym::register(r);
}

/// Values of a list argument (operands of higher-order ops), one per element.
fn flat_values(ctx: &OpCtx, a: &Arg) -> Result<Vec<RValue>> {
    Ok(match a {
        Arg::Tensors(_) | Arg::OptTensors(_) => match ctx.resolve(a)? {
            RValue::Tensors(ts) => ts.into_iter().map(RValue::Tensor).collect(),
            RValue::OptTensors(ts) => ts
                .into_iter()
                .map(|t| t.map_or(RValue::None, RValue::Tensor))
                .collect(),
            other => vec![other],
        },
        Arg::Ints(_) | Arg::SymInts(_) => ctx
            .ints_of(a, "operands")?
            .into_iter()
            .map(RValue::Int)
            .collect(),
        Arg::None => Vec::new(),
        other => vec![ctx.resolve(other)?],
    })
}

fn positional<'a>(ctx: &OpCtx<'a>, i: usize, what: &str) -> Result<&'a Arg> {
    ctx.arg_at(i)
        .ok_or_else(|| ctx.err(format!("missing argument {i} ({what})")))
}

fn subgraph<'a>(ctx: &OpCtx<'a>, i: usize, what: &str) -> Result<&'a Graph> {
    match positional(ctx, i, what)? {
        Arg::Graph(g) => Ok(g),
        other => Err(ctx.err(format!(
            "argument {i} ({what}) is {other:?}, expected a subgraph"
        ))),
    }
}

/// Truth of a predicate: a one-element tensor, a (sym) bool or an int.
fn truth(ctx: &OpCtx, v: &RValue, what: &str) -> Result<bool> {
    match v {
        RValue::Bool(b) => Ok(*b),
        RValue::Int(i) => Ok(*i != 0),
        RValue::Float(f) => Ok(*f != 0.0),
        RValue::Tensor(t) if t.numel() == 1 => Ok(t.item_f64() != 0.0),
        RValue::Tensor(t) => Err(ctx.err(format!(
            "{what} must be a tensor with one element, got shape {:?}",
            t.sizes
        ))),
        other => Err(ctx.err(format!(
            "{what} is a {}, expected a bool or a one-element tensor",
            other.kind()
        ))),
    }
}

/// Shape a subgraph's results as this node's outputs (one value per output, or one list
/// when the node defines a single `Tensor[]`).
fn node_results(ctx: &OpCtx, outs: Vec<RValue>) -> Vec<RValue> {
    if ctx.node.outputs.len() == 1 && matches!(ctx.node.outputs[0], Arg::Tensors(_)) {
        let ts = outs
            .into_iter()
            .filter_map(|v| {
                if let RValue::Tensor(t) = v {
                    Some(t)
                } else {
                    None
                }
            })
            .collect();
        return vec![RValue::Tensors(ts)];
    }
    outs
}

fn cond(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let pred = ctx.resolve(positional(ctx, 0, "pred")?)?;
    let branch = if truth(ctx, &pred, "the cond predicate")? {
        subgraph(ctx, 1, "true_fn")?
    } else {
        subgraph(ctx, 2, "false_fn")?
    };
    let operands = flat_values(ctx, positional(ctx, 3, "operands")?)?;
    let outs = run_graph(branch, operands, ctx.state)
        .map_err(|e| e.within(&ctx.node.target, "in branch"))?;
    Ok(node_results(ctx, outs))
}

/// `while_loop`: at most `Limits::max_loop_iterations` iterations (a condition that never
/// turns false ends with a `Limit` error), the run's cancel token and timeout checked before
/// each (an empty body has no node to check them at).
fn while_loop(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (cond_g, body_g) = (subgraph(ctx, 0, "cond_fn")?, subgraph(ctx, 1, "body_fn")?);
    let mut carried = flat_values(ctx, positional(ctx, 2, "carried_inputs")?)?;
    let extra = match ctx.arg_at(3) {
        Some(a) => flat_values(ctx, a)?,
        None => Vec::new(),
    };
    let with_extra = |c: &[RValue]| c.iter().chain(&extra).cloned().collect::<Vec<_>>();
    let mut iterations = 0u64;
    loop {
        let p = run_graph(cond_g, with_extra(&carried), ctx.state)
            .map_err(|e| e.within(&ctx.node.target, "in cond_fn"))?;
        let go = truth(
            ctx,
            p.first()
                .ok_or_else(|| ctx.err("cond_fn returned nothing"))?,
            "the while_loop condition",
        )?;
        if !go {
            break;
        }
        iterations += 1;
        ctx.state.stop.check(&ctx.node.name)?;
        let limit = ctx.state.loop_limit();
        if iterations > limit {
            return Err(crate::error::Error::limit(
                format!("the iterations of while_loop '{}'", ctx.node.name),
                iterations,
                limit,
            ));
        }
        let next = run_graph(body_g, with_extra(&carried), ctx.state).map_err(|e| {
            e.within(
                &ctx.node.target,
                format!("in body_fn (iteration {iterations})"),
            )
        })?;
        if next.len() != carried.len() {
            return Err(ctx.err(format!(
                "body_fn returned {} values for {} carried inputs",
                next.len(),
                carried.len()
            )));
        }
        carried = next;
    }
    Ok(node_results(ctx, carried))
}

/// The higher-order ops that run a subgraph on each slice of tensors along their leading
/// dimension.
#[derive(Clone, Copy)]
pub(crate) enum Sliced {
    Map,
    Scan,
}

/// The number of slices `op` runs its subgraph on: the sliced tensors' common leading
/// dimension (the error message otherwise). Shared with the meta rules and the GPU executor.
pub(crate) fn sliced_len(
    op: Sliced,
    mut leading: impl Iterator<Item = usize>,
) -> std::result::Result<usize, &'static str> {
    let (none, differ, empty) = match op {
        Sliced::Map => (
            "map needs at least one mapped tensor",
            "mapped tensors must have the same leading dimension",
            "map over a leading dimension of size 0 is not supported",
        ),
        Sliced::Scan => (
            "scan needs at least one scanned tensor",
            "scanned tensors must have the same leading dimension",
            "scan over a leading dimension of size 0 is not supported",
        ),
    };
    let n = leading.next().ok_or(none)?;
    if leading.any(|m| m != n) {
        return Err(differ);
    }
    if n == 0 {
        return Err(empty);
    }
    Ok(n)
}

fn map_impl(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let f = subgraph(ctx, 0, "f")?;
    let xs = flat_values(ctx, positional(ctx, 1, "xs")?)?;
    let pos = match ctx.arg_at(2) {
        Some(a) => flat_values(ctx, a)?,
        None => Vec::new(),
    };
    let xs: Vec<Tensor> = xs
        .into_iter()
        .map(|v| match v {
            RValue::Tensor(t) if t.rank() > 0 => Ok(t),
            other => Err(ctx.err(format!(
                "map xs must be tensors of rank >= 1, got {}",
                other.kind()
            ))),
        })
        .collect::<Result<_>>()?;
    let n = sliced_len(Sliced::Map, xs.iter().map(|t| t.sizes[0])).map_err(|e| ctx.err(e))?;
    let mut per_out: Vec<Vec<Tensor>> = Vec::new();
    for i in 0..n {
        let mut inputs: Vec<RValue> = xs
            .iter()
            .map(|t| {
                RValue::Tensor(t.view_with(
                    t.sizes[1..].to_vec(),
                    t.strides[1..].to_vec(),
                    t.offset + i * t.strides[0],
                ))
            })
            .collect();
        inputs.extend(pos.iter().cloned());
        let outs = run_graph(f, inputs, ctx.state)
            .map_err(|e| e.within(&ctx.node.target, format!("in map body (slice {i})")))?;
        if per_out.is_empty() {
            per_out = vec![Vec::with_capacity(n); outs.len()];
        }
        for (k, o) in outs.into_iter().enumerate() {
            match (o, per_out.get_mut(k)) {
                (RValue::Tensor(t), Some(list)) => list.push(t),
                _ => {
                    return Err(ctx.err("map body must return tensors, the same number every time"))
                }
            }
        }
    }
    let results = stack_leading(ctx, per_out, "map body")?;
    Ok(node_results(ctx, results))
}

/// Each list of per-iteration results stacked along a new leading dimension.
fn stack_leading(ctx: &OpCtx, per_out: Vec<Vec<Tensor>>, what: &str) -> Result<Vec<RValue>> {
    let mut results = Vec::with_capacity(per_out.len());
    for list in per_out {
        let us: Vec<Tensor> = list
            .iter()
            .map(|t| {
                t.view_with(
                    [&[1], &t.sizes[..]].concat(),
                    [&[0], &t.strides[..]].concat(),
                    t.offset,
                )
            })
            .collect();
        if us.iter().any(|t| t.sizes != us[0].sizes) {
            return Err(ctx.err(format!("{what} returned tensors of different shapes")));
        }
        results.push(RValue::Tensor(super::shape::cat_t(ctx, &us, 0)?));
    }
    Ok(results)
}

/// `scan(combine_fn, init, xs, additional_inputs)`: `combine_fn(*carry, *x[i], *additional)`
/// gives the next carry and this step's outputs, for each slice of `xs` along its leading
/// dimension; the results are the last carry and each step's outputs stacked (torch's
/// wrapper moves the scanned dim first and flips `xs` for `reverse` around the op).
fn scan(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let f = subgraph(ctx, 0, "combine_fn")?;
    let mut carry = flat_values(ctx, positional(ctx, 1, "init")?)?;
    let xs = flat_values(ctx, positional(ctx, 2, "xs")?)?;
    let extra = match ctx.arg_at(3) {
        Some(a) => flat_values(ctx, a)?,
        None => Vec::new(),
    };
    let xs: Vec<Tensor> = xs
        .into_iter()
        .map(|v| match v {
            RValue::Tensor(t) if t.rank() > 0 => Ok(t),
            other => Err(ctx.err(format!(
                "scan xs must be tensors of rank >= 1, got {}",
                other.kind()
            ))),
        })
        .collect::<Result<_>>()?;
    let n = sliced_len(Sliced::Scan, xs.iter().map(|t| t.sizes[0])).map_err(|e| ctx.err(e))?;
    let k = carry.len();
    let mut per_out: Vec<Vec<Tensor>> = Vec::new();
    for i in 0..n {
        let mut inputs = std::mem::take(&mut carry);
        inputs.extend(xs.iter().map(|t| {
            RValue::Tensor(t.view_with(
                t.sizes[1..].to_vec(),
                t.strides[1..].to_vec(),
                t.offset + i * t.strides[0],
            ))
        }));
        inputs.extend(extra.iter().cloned());
        let mut outs = run_graph(f, inputs, ctx.state)
            .map_err(|e| e.within(&ctx.node.target, format!("in combine_fn (step {i})")))?;
        if outs.len() < k {
            return Err(ctx.err(format!(
                "combine_fn returned {} values for {k} carried values",
                outs.len()
            )));
        }
        let ys = outs.split_off(k);
        carry = outs;
        if per_out.is_empty() {
            per_out = vec![Vec::with_capacity(n); ys.len()];
        }
        if ys.len() != per_out.len() {
            return Err(ctx.err("combine_fn must return the same number of values every step"));
        }
        for (list, y) in per_out.iter_mut().zip(ys) {
            match y {
                RValue::Tensor(t) => list.push(t),
                other => {
                    return Err(ctx.err(format!(
                        "combine_fn must return tensors, got {}",
                        other.kind()
                    )))
                }
            }
        }
    }
    carry.extend(stack_leading(ctx, per_out, "combine_fn")?);
    Ok(node_results(ctx, carry))
}

fn getitem(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let seq = ctx.resolve(positional(ctx, 0, "sequence")?)?;
    let i = ctx.int_of(positional(ctx, 1, "index")?, "index")?;
    let len = match &seq {
        RValue::Tensors(v) => v.len(),
        RValue::OptTensors(v) => v.len(),
        other => return Err(ctx.err(format!("cannot index a {}", other.kind()))),
    };
    let k = if i < 0 { i + len as i64 } else { i };
    if k < 0 || k >= len as i64 {
        return Err(ctx.err(format!(
            "index {i} is out of range for a list of {len} values"
        )));
    }
    Ok(vec![match seq {
        RValue::Tensors(mut v) => RValue::Tensor(v.swap_remove(k as usize)),
        RValue::OptTensors(mut v) => v
            .swap_remove(k as usize)
            .map_or(RValue::None, RValue::Tensor),
        _ => unreachable!("checked above"),
    }])
}

fn dim_of(ctx: &OpCtx, t: &Tensor) -> Result<usize> {
    super::util::wrap_dim(ctx, ctx.int("dim")?, t.rank())
}

fn sym_size(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() == 0 {
        return Err(ctx.err("dimension specified as 0 but tensor has no dimensions"));
    }
    Ok(vec![RValue::Int(t.sizes[dim_of(ctx, &t)?] as i64)])
}

fn sym_numel(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Int(ctx.tensor("self")?.numel() as i64)])
}

fn sym_stride(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() == 0 {
        return Err(ctx.err("dimension specified as 0 but tensor has no dimensions"));
    }
    Ok(vec![RValue::Int(t.strides[dim_of(ctx, &t)?] as i64)])
}

fn sym_storage_offset(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Int(ctx.tensor("self")?.offset as i64)])
}

fn sym_is_contiguous(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Bool(ctx.tensor("self")?.is_contiguous())])
}

fn item(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.numel() != 1 {
        return Err(ctx.err(format!(
            "a Tensor with {} elements cannot be converted to Scalar",
            t.numel()
        )));
    }
    Ok(vec![if t.dtype.is_float() {
        RValue::Float(t.item_f64())
    } else if t.dtype == DType::Bool {
        RValue::Bool(t.item_f64() != 0.0)
    } else {
        RValue::Int(t.to_vec::<i64>()[0])
    }])
}

/// The message of an assert node (`assert_msg`), or a generic one.
fn assert_msg(ctx: &OpCtx) -> Result<String> {
    Ok(ctx
        .opt_str("assert_msg")?
        .unwrap_or_else(|| "runtime assertion failed".to_string()))
}

/// A dependency token (functional asserts thread one through the graph; it carries no data).
fn token() -> RValue {
    RValue::Tensor(Tensor::from_vec(Vec::<f32>::new(), &[0]))
}

/// Functional variants return a token; plain ones return nothing.
fn assert_result(ctx: &OpCtx) -> Vec<RValue> {
    if ctx.node.outputs.is_empty() {
        vec![]
    } else {
        vec![token()]
    }
}

fn assert_scalar(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let v = ctx.resolve(
        ctx.arg("self")
            .or_else(|| ctx.arg_at(0))
            .ok_or_else(|| ctx.err("missing condition"))?,
    )?;
    if !truth(ctx, &v, "the asserted condition")? {
        return Err(ctx.err(assert_msg(ctx)?));
    }
    Ok(assert_result(ctx))
}

fn assert_async(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.numel() != 1 {
        return Err(ctx.err(format!(
            "Boolean value of Tensor with {} elements is ambiguous",
            t.numel()
        )));
    }
    if t.item_f64() == 0.0 {
        let msg = ctx.opt_str("assert_msg")?.unwrap_or_else(|| {
            "Expected Tensor with single nonzero value, but got zero".to_string()
        });
        return Err(ctx.err(msg));
    }
    Ok(assert_result(ctx))
}

fn constrain_range(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let size = ctx.scalar("size")?.as_f64();
    let for_size = ctx.target().contains("for_size");
    let min = ctx
        .opt_int("min")?
        .unwrap_or(if for_size { 0 } else { i64::MIN });
    let max = ctx.opt_int("max")?.unwrap_or(i64::MAX);
    if size < min as f64 || size > max as f64 {
        return Err(ctx.err(format!(
            "value {size} is outside the range [{min}, {max}] the program was exported with"
        )));
    }
    Ok(assert_result(ctx))
}

fn dep_token(_ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    Ok(vec![token()])
}

/// `with_effects(token, op, *args)`: an effectful op threaded by a token (run_decompositions
/// wraps linalg's `_linalg_check_errors` so). Runs `op` and returns a fresh token and its
/// result; the effectful ops supported return nothing.
fn with_effects(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let op = match ctx.arg_at(1) {
        Some(Arg::Operator(o)) => o.trim_start_matches("torch.ops.").to_string(),
        other => return Err(ctx.err(format!("expected an operator, got {other:?}"))),
    };
    match op.as_str() {
        "aten._linalg_check_errors.default" => {
            let info = ctx.tensor_of(
                ctx.arg_at(2)
                    .ok_or_else(|| ctx.err("_linalg_check_errors: missing info"))?,
                "info",
            )?;
            let api = match ctx.arg_at(3) {
                Some(Arg::Str(s)) => s.clone(),
                _ => "linalg".into(),
            };
            check_linalg_info(ctx, &info, &api)?;
            Ok(vec![token(), RValue::None])
        }
        other => Err(ctx.err(format!("the effectful op {other} is not supported"))),
    }
}

/// `_linalg_check_errors(info, api_name, is_matrix)`: torch's errors for nonzero LAPACK infos.
fn linalg_check_errors(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let info = ctx.tensor("info")?;
    let api = ctx.opt_str("api_name")?.unwrap_or_else(|| "linalg".into());
    check_linalg_info(ctx, &info, &api)?;
    Ok(vec![])
}

fn check_linalg_info(ctx: &OpCtx, info: &Tensor, api: &str) -> Result<()> {
    let v = info.to_vec::<i64>();
    let Some((b, &i)) = v.iter().enumerate().find(|(_, &i)| i != 0) else {
        return Ok(());
    };
    let at = if info.rank() > 0 {
        format!(" (batch element {b})")
    } else {
        String::new()
    };
    let msg = if i < 0 {
        format!("{api}{at}: argument {} has an illegal value", -i)
    } else if api.contains("cholesky") {
        format!("{api}{at}: the factorization could not be completed because the input is not positive-definite (the leading minor of order {i} is not positive-definite)")
    } else if api.contains("inv") {
        format!("{api}{at}: the diagonal element {i} is zero, the inversion could not be completed because the input matrix is singular")
    } else if api.contains("solve") {
        format!("{api}{at}: the solver failed because the input matrix is singular")
    } else if api.contains("lu_factor") {
        format!("{api}{at}: U[{i},{i}] is zero and using it on lu_solve would result in a division by zero")
    } else {
        format!("{api}{at}: the algorithm failed (info = {i})")
    };
    Err(ctx.err(msg))
}

/// `_assert_tensor_metadata` (emitted next to `.to()` in the training IR): checks the dtype
/// and sizes torch traced.
fn assert_tensor_metadata(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("a")?;
    if let Some(d) = ctx.opt_dtype("dtype")? {
        if d != t.dtype {
            return Err(ctx.err(format!(
                "tensor dtype mismatch: expected {d}, got {}",
                t.dtype
            )));
        }
    }
    if let Some(size) = ctx.opt_ints("size")? {
        let got: Vec<i64> = t.sizes.iter().map(|&s| s as i64).collect();
        if size != got {
            return Err(ctx.err(format!(
                "tensor size mismatch: expected {size:?}, got {got:?}"
            )));
        }
    }
    // Strides are not checked: the CPU backend may lay a value out differently from torch
    // (e.g. contiguous instead of channels-last) without changing any result.
    Ok(vec![])
}
