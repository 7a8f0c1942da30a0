//! `pt2web.fused_elementwise`: a chain of elementwise ops that the fusion pass
//! (`src/passes/fuse.rs`) made one node. Its arguments are `inputs` (the chain's tensors from
//! outside it) and `body`, a subgraph of the original nodes over those inputs, so every
//! backend can always run the ops one by one: the CPU kernel and the shape rule run the
//! body; the GPU backend runs one generated kernel for the whole chain
//! (`src/gpu/kernels/fused.rs`), or the body where that kernel declines.
//!
//! [`ElemStep::parse`] is the one description of what may join a chain: f32 tensors in and
//! out (a `where` condition is bool), arguments that are numbers in the graph, the ops below.

use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::program::{Arg, Graph, Node, ValueId, ValueKind};
use crate::runtime::{run_graph, RValue, RunState};

/// The target of a fused node.
pub const TARGET: &str = "pt2web.fused_elementwise.default";

/// The unary ops without arguments that join chains (`aten.NAME.default`).
pub const UNARY: &[&str] = &[
    "relu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "abs",
    "neg",
    "silu",
    "sin",
    "cos",
    "reciprocal",
    "erf",
    "floor",
    "ceil",
    "hardsigmoid",
    "hardswish",
    "sign",
    "square",
    "log1p",
    "expm1",
    "trunc",
    "frac",
    "atan",
    "tan",
    "sinh",
    "cosh",
    "asin",
    "acos",
    "asinh",
    "acosh",
    "atanh",
    "erfc",
    "erfinv",
    "log10",
    "log2",
    "exp2",
    "mish",
    "log_sigmoid",
];

/// The binary ops that join chains: `self` a tensor, the other operand a tensor or a number.
/// (op, its overloads, the name of the other operand).
pub const BINARY: &[(&str, &[&str], &str)] = &[
    ("add", &["Tensor", "Scalar"], "other"),
    ("sub", &["Tensor", "Scalar"], "other"),
    ("mul", &["Tensor", "Scalar"], "other"),
    ("div", &["Tensor", "Scalar"], "other"),
    ("rsub", &["Tensor", "Scalar"], "other"),
    ("maximum", &["default"], "other"),
    ("minimum", &["default"], "other"),
    ("pow", &["Tensor_Tensor", "Tensor_Scalar"], "exponent"),
];

/// One op of a chain, its arguments parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Elem {
    /// A name of [`UNARY`].
    Unary(&'static str),
    /// gelu, exact or with the tanh approximation.
    Gelu {
        tanh: bool,
    },
    LeakyRelu {
        slope: f64,
    },
    /// clamp / clip / hardtanh / relu6 with number bounds (infinite where absent).
    Clamp {
        lo: f64,
        hi: f64,
    },
    /// An op of [`BINARY`] (`alpha` of add / sub / rsub, else 1).
    Binary {
        op: &'static str,
        alpha: f64,
    },
    /// `where(condition, self, other)`.
    Where,
}

/// An operand of a chain's op.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    Value(ValueId),
    Number(f64),
}

/// One node of a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ElemStep {
    pub op: Elem,
    /// `self` first, then the other operand (`where`: condition, self, other).
    pub operands: Vec<Operand>,
    pub out: ValueId,
}

fn dtype_of(g: &Graph, id: ValueId) -> Option<DType> {
    match &g.values.get(id)?.kind {
        ValueKind::Tensor { dtype, .. } => Some(*dtype),
        _ => None,
    }
}

/// A number written in the graph (not a symbol).
fn number(a: &Arg) -> Option<f64> {
    match a {
        Arg::Int(i) => Some(*i as f64),
        Arg::Float(f) => Some(*f),
        _ => None,
    }
}

impl ElemStep {
    /// The node as a chain step, if it can be one.
    pub fn parse(node: &Node, g: &Graph) -> Option<ElemStep> {
        let [Arg::Tensor(out)] = node.outputs[..] else {
            return None;
        };
        if dtype_of(g, out)? != DType::F32 {
            return None;
        }
        let rest = node.target.strip_prefix("aten.")?;
        let (op, overload) = rest.rsplit_once('.')?;
        let f32_tensor = |name: &str| match node.arg(name) {
            Some(Arg::Tensor(v)) if dtype_of(g, *v) == Some(DType::F32) => Some(Operand::Value(*v)),
            _ => None,
        };
        // Every argument but the tensors must be a number or a string written in the graph.
        let literal = node.inputs.iter().all(|(_, a)| {
            matches!(
                a,
                Arg::Tensor(_) | Arg::Int(_) | Arg::Float(_) | Arg::Str(_) | Arg::None
            )
        });
        if !literal {
            return None;
        }
        let x = f32_tensor("self");
        let step = |op: Elem, operands: Vec<Operand>| Some(ElemStep { op, operands, out });
        if let Some(&name) = UNARY.iter().find(|&&n| n == op) {
            return (overload == "default" && node.inputs.len() == 1)
                .then(|| step(Elem::Unary(name), vec![x?]))
                .flatten();
        }
        if let Some(&(name, overloads, other)) = BINARY.iter().find(|(n, ..)| *n == op) {
            if !overloads.contains(&overload) {
                return None;
            }
            let b = match node.arg(other)? {
                Arg::Tensor(_) => f32_tensor(other)?,
                a => Operand::Number(number(a)?),
            };
            let alpha = match node.arg("alpha") {
                None | Some(Arg::None) => 1.0,
                Some(a) => number(a)?,
            };
            let known = ["self", other, "alpha"];
            if node
                .inputs
                .iter()
                .any(|(n, _)| !known.contains(&n.as_str()))
            {
                return None;
            }
            return step(Elem::Binary { op: name, alpha }, vec![x?, b]);
        }
        let ctx_of = |f: &dyn Fn(&OpCtx) -> Result<Elem>| {
            let mut st = RunState::default();
            let ctx = OpCtx {
                node,
                graph: g,
                env: &[],
                state: &mut st,
            };
            f(&ctx).ok()
        };
        let elem = match (op, overload) {
            ("gelu", "default") => ctx_of(&|c| {
                Ok(Elem::Gelu {
                    tanh: crate::ops::activation::params::gelu_tanh(c)?,
                })
            })?,
            ("leaky_relu", "default") => Elem::LeakyRelu {
                slope: node.arg("negative_slope").map_or(Some(0.01), number)?,
            },
            ("clamp" | "clip", "default") => {
                let bound = |n: &str, inf: f64| match node.arg(n) {
                    None | Some(Arg::None) => Some(inf),
                    Some(a) => number(a),
                };
                let (lo, hi) = (
                    bound("min", f64::NEG_INFINITY)?,
                    bound("max", f64::INFINITY)?,
                );
                if lo == f64::NEG_INFINITY && hi == f64::INFINITY {
                    return None;
                }
                Elem::Clamp { lo, hi }
            }
            ("hardtanh" | "relu6", "default") => ctx_of(&|c| {
                let b = crate::ops::activation::params::Bounds::parse(c)?;
                Ok(Elem::Clamp {
                    lo: b.lo.as_f64(),
                    hi: b.hi.as_f64(),
                })
            })?,
            ("where", "self") => {
                let c = match node.arg("condition")? {
                    Arg::Tensor(v) if dtype_of(g, *v) == Some(DType::Bool) => Operand::Value(*v),
                    _ => return None,
                };
                return step(Elem::Where, vec![c, x?, f32_tensor("other")?]);
            }
            _ => return None,
        };
        step(elem, vec![x?])
    }
}

pub(super) fn register(r: &mut OpTable) {
    r.define(TARGET, run, rule);
}

fn body(node: &Node) -> std::result::Result<&Graph, String> {
    match node.arg("body") {
        Some(Arg::Graph(g)) => Ok(g),
        _ => Err("a fused node needs its body subgraph".into()),
    }
}

fn input_ids(node: &Node) -> std::result::Result<&[ValueId], String> {
    match node.arg("inputs") {
        Some(Arg::Tensors(ids)) => Ok(ids),
        _ => Err("a fused node needs its list of inputs".into()),
    }
}

/// The CPU kernel: the body's ops, one by one.
fn run(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let g = body(ctx.node).map_err(|e| ctx.err(e))?;
    let ids = input_ids(ctx.node).map_err(|e| ctx.err(e))?;
    let inputs = ids
        .iter()
        .map(|&id| ctx.resolve(&Arg::Tensor(id)))
        .collect::<Result<Vec<_>>>()?;
    run_graph(g, inputs, ctx.state).map_err(|e| e.within(&ctx.node.target, "in the fused body"))
}

/// The shape rule: the body's rules.
fn rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let g = body(ctx.node)?;
    let ids = input_ids(ctx.node)?;
    let inputs = ids
        .iter()
        .map(|&id| ctx.resolve(&Arg::Tensor(id)))
        .collect::<RuleResult<Vec<_>>>()?;
    ctx.run_subgraph(g, inputs)
        .map_err(|e| format!("in the fused body: {e}"))
}
