//! The meta backend: shapes and dtypes, no data (torch's meta device).
//!
//! Every op target has one shape+dtype rule, registered in the op table by its family
//! (`src/ops/<family>/meta.rs`). [`infer`] walks a program's graph with concrete input shapes and
//! gives every value its [`MValue`]; planning, `pt2web check` and the memory estimate
//! ([`memory`]) run on it. Rules reuse the CPU code's helpers (type promotion, broadcasting,
//! dim wrapping, view geometry) so the two backends cannot disagree on a rule.

mod ctx;
pub mod memory;

pub use ctx::MetaCtx;
pub use memory::{estimate, MemoryEstimate};

use crate::dtype::DType;
use crate::program::{Arg, BoolArg, Dim, FloatArg, Graph, InputKind, IntArg, Program, ValueKind};
use crate::sym::{self, Bindings};
use std::fmt;

/// A tensor without data: what a rule knows about a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaTensor {
    pub dtype: DType,
    /// Concrete sizes (symbols already bound).
    pub sizes: Vec<usize>,
    /// Sizes that depend on the data (`nonzero`, `masked_select`...): `sizes` is an upper bound.
    pub data_dependent: bool,
}

impl MetaTensor {
    pub fn new(dtype: DType, sizes: Vec<usize>) -> MetaTensor {
        MetaTensor {
            dtype,
            sizes,
            data_dependent: false,
        }
    }
    pub fn rank(&self) -> usize {
        self.sizes.len()
    }
    /// Element count (saturating: a hostile graph cannot overflow it).
    pub fn numel(&self) -> usize {
        self.sizes.iter().fold(1usize, |a, &b| a.saturating_mul(b))
    }
    /// Bytes of a contiguous tensor of this shape.
    pub fn nbytes(&self) -> u64 {
        (self.numel() as u64).saturating_mul(self.dtype.size() as u64)
    }
    /// Contiguous strides (meta tensors are laid out densely).
    pub fn strides(&self) -> Vec<usize> {
        let mut s = vec![1usize; self.sizes.len()];
        for i in (0..self.sizes.len().saturating_sub(1)).rev() {
            s[i] = s[i + 1].saturating_mul(self.sizes[i + 1].max(1));
        }
        s
    }
    /// The same tensor with another dtype.
    pub fn with_dtype(&self, dtype: DType) -> MetaTensor {
        MetaTensor {
            dtype,
            ..self.clone()
        }
    }
    /// The same dtype with other sizes.
    pub fn with_sizes(&self, sizes: Vec<usize>) -> MetaTensor {
        MetaTensor::new(self.dtype, sizes)
    }
}

impl fmt::Display for MetaTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.sizes)
    }
}

/// A value of the meta pass.
#[derive(Debug, Clone, PartialEq)]
pub enum MValue {
    None,
    Tensor(MetaTensor),
    Tensors(Vec<MetaTensor>),
    OptTensors(Vec<Option<MetaTensor>>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    /// A scalar whose value depends on tensor data (`item()`): known kind, unknown value.
    Unknown(ScalarKind),
    /// A token or a custom object (no shape).
    Opaque,
}

/// The kind of a data-dependent scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    Int,
    Float,
    Bool,
}

impl MValue {
    pub fn kind(&self) -> &'static str {
        match self {
            MValue::None => "None",
            MValue::Tensor(_) => "Tensor",
            MValue::Tensors(_) => "Tensor[]",
            MValue::OptTensors(_) => "Tensor?[]",
            MValue::Int(_) => "int",
            MValue::Float(_) => "float",
            MValue::Bool(_) => "bool",
            MValue::Str(_) => "str",
            MValue::Unknown(_) => "data-dependent scalar",
            MValue::Opaque => "opaque object",
        }
    }
    pub fn as_tensor(&self) -> Option<&MetaTensor> {
        match self {
            MValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// Why the meta pass stopped. Every variant names the node and the op.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetaError {
    /// No shape rule is registered for the op.
    #[error("node '{node}': op {target} has no shape rule on the meta device yet")]
    MissingRule { node: String, target: String },
    /// The rule refused the arguments (mismatched shapes, bad dims...).
    #[error("node '{node}' ({target}): {msg}")]
    Invalid {
        node: String,
        target: String,
        msg: String,
    },
    /// The inputs do not fit the program (count, dtype, rank, guards).
    #[error("{0}")]
    Input(String),
}

impl From<MetaError> for crate::Error {
    fn from(e: MetaError) -> crate::Error {
        match e {
            MetaError::MissingRule { node, target } => crate::Error::Op {
                op: target,
                msg: format!("node '{node}' has no shape rule on the meta device yet"),
            },
            MetaError::Invalid { node, target, msg } => crate::Error::Op {
                op: target,
                msg: format!("node '{node}': {msg}"),
            },
            MetaError::Input(m) => crate::Error::Verify(m),
        }
    }
}

/// What a rule returns on failure: a message; [`infer`] adds the node and the op.
pub type RuleResult<T> = std::result::Result<T, String>;

/// A shape+dtype rule: one [`MValue`] per schema return, in order.
pub type Rule = fn(&mut MetaCtx) -> RuleResult<Vec<MValue>>;

/// Ops of the program (and its subgraphs) without a shape rule.
pub fn missing_rules(program: &Program) -> Vec<String> {
    let table = crate::ops::table();
    program
        .graph
        .op_histogram()
        .into_keys()
        .filter(|t| table.shape_rule(t).is_none())
        .collect()
}

/// The result of the meta pass over a program's graph.
#[derive(Debug, Clone)]
pub struct Inferred {
    /// Dynamic symbol values bound from the input shapes.
    pub bindings: Bindings,
    /// The value of every graph value (by `ValueId`); `None` for values never defined.
    pub values: Vec<Option<MValue>>,
}

impl Inferred {
    /// The meta of each user output, in flattened pytree order: what a run with these input
    /// shapes returns.
    pub fn user_outputs(&self, program: &Program) -> RuleResult<Vec<MValue>> {
        program
            .outputs
            .iter()
            .zip(&program.graph.outputs)
            .filter(|(spec, _)| spec.kind == crate::program::OutputKind::User)
            .map(|(_, a)| ctx::resolve(&self.values, a))
            .collect()
    }

    /// The meta of each output of node `i` of the top-level graph, in `node.outputs` order
    /// (lists flattened), paired with its value id.
    pub fn node_outputs(&self, graph: &Graph, i: usize) -> Vec<(usize, Option<&MValue>)> {
        let mut ids = Vec::new();
        for a in &graph.nodes[i].outputs {
            a.values(&mut ids);
        }
        ids.into_iter()
            .map(|id| (id, self.values.get(id).and_then(Option::as_ref)))
            .collect()
    }
}

/// The meta of a user input: a tensor's dtype and concrete sizes, or a number.
pub fn input_meta(program: &Program) -> Vec<(String, Option<MValue>)> {
    program
        .user_inputs()
        .iter()
        .map(|u| {
            let v = program.input_value(&u.name).and_then(|v| match &v.kind {
                ValueKind::Tensor { dtype, sizes, .. } => sizes
                    .iter()
                    .map(|d| match d {
                        Dim::Static(s) => usize::try_from(*s).ok(),
                        Dim::Sym(_) => None,
                    })
                    .collect::<Option<Vec<usize>>>()
                    .map(|s| MValue::Tensor(MetaTensor::new(*dtype, s))),
                ValueKind::SymInt(Dim::Static(i)) => Some(MValue::Int(*i)),
                _ => None,
            });
            (u.name.clone(), v)
        })
        .collect()
}

/// Bind the dynamic symbols from the user inputs' shapes (the same checks `Session::run`
/// makes: count, dtype, rank, static dims, ranges, equalities, guards).
pub fn bind_inputs(program: &Program, inputs: &[MValue]) -> Result<Bindings, MetaError> {
    let guards = program
        .guards_code
        .iter()
        .map(|g| {
            sym::GuardCode::parse(g)
                .map_err(|e| MetaError::Input(format!("guards_code `{g}`: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    crate::plan::bind_signature(program, &crate::plan::meta_signature(inputs), &guards)
        .map_err(|e| MetaError::Input(e.to_string()))
}

/// Run the meta pass: bind the symbols from `inputs` (user inputs in flattened pytree order),
/// take the state's dtypes and shapes, and apply every node's rule.
pub fn infer(program: &Program, inputs: &[MValue]) -> Result<Inferred, MetaError> {
    infer_with(program, inputs, false)
}

/// [`infer`] that goes on past a node it cannot size (no rule, or a size that depends on
/// tensor data): that node's outputs, and whatever is computed from them, stay `None`, and
/// everything else is sized. The run's byte budget is checked on what this knows.
pub fn infer_partial(program: &Program, inputs: &[MValue]) -> Result<Inferred, MetaError> {
    infer_with(program, inputs, true)
}

fn infer_with(program: &Program, inputs: &[MValue], partial: bool) -> Result<Inferred, MetaError> {
    let bindings = bind_inputs(program, inputs)?;
    let mut user = inputs.iter();
    let mut graph_inputs = Vec::with_capacity(program.inputs.len());
    for spec in &program.inputs {
        graph_inputs.push(match &spec.kind {
            InputKind::User => user.next().cloned().unwrap_or(MValue::None),
            InputKind::Parameter { name }
            | InputKind::Buffer { name, .. }
            | InputKind::Constant { name } => match program.state.get(name) {
                Some(e) => MValue::Tensor(MetaTensor::new(e.tensor.dtype, e.tensor.sizes.clone())),
                None => {
                    return Err(MetaError::Input(format!(
                        "the program state has no tensor '{name}'"
                    )))
                }
            },
            InputKind::CustomObj { .. } | InputKind::Token => MValue::Opaque,
            InputKind::ConstantValue { .. } => MValue::None,
        });
    }
    let values = run_graph_with(&program.graph, graph_inputs, &bindings, partial)?;
    Ok(Inferred { bindings, values })
}

/// Apply the rules of `graph` with its placeholders bound to `inputs`; returns every value.
pub fn run_graph(
    graph: &Graph,
    inputs: Vec<MValue>,
    bindings: &Bindings,
) -> Result<Vec<Option<MValue>>, MetaError> {
    run_graph_with(graph, inputs, bindings, false)
}

/// [`run_graph`]; `partial`: a node whose rule is missing or fails leaves its outputs
/// `None` instead of ending the pass ([`infer_partial`]).
fn run_graph_with(
    graph: &Graph,
    inputs: Vec<MValue>,
    bindings: &Bindings,
    partial: bool,
) -> Result<Vec<Option<MValue>>, MetaError> {
    if inputs.len() != graph.inputs.len() {
        return Err(MetaError::Input(format!(
            "graph takes {} inputs, got {}",
            graph.inputs.len(),
            inputs.len()
        )));
    }
    let mut env: Vec<Option<MValue>> = vec![None; graph.values.len()];
    for (a, v) in graph.inputs.iter().zip(inputs) {
        bind(&mut env, a, v).map_err(MetaError::Input)?;
    }
    let table = crate::ops::table();
    for node in &graph.nodes {
        let invalid = |msg: String| MetaError::Invalid {
            node: node.name.clone(),
            target: node.target.clone(),
            msg,
        };
        let Some(rule) = table.shape_rule(&node.target) else {
            if partial {
                continue;
            }
            return Err(MetaError::MissingRule {
                node: node.name.clone(),
                target: node.target.clone(),
            });
        };
        let outs = {
            let mut ctx = MetaCtx::new(node, graph, &env, bindings);
            match rule(&mut ctx) {
                Ok(outs) => outs,
                Err(_) if partial => continue,
                Err(e) => return Err(invalid(e)),
            }
        };
        let declared = node
            .outputs
            .iter()
            .filter(|a| !matches!(a, Arg::None))
            .count();
        if outs.len() < node.outputs.len() && outs.len() < declared {
            return Err(invalid(format!(
                "the rule gave {} values for {} outputs",
                outs.len(),
                node.outputs.len()
            )));
        }
        for (a, v) in node.outputs.iter().zip(outs) {
            bind(&mut env, a, v).map_err(invalid)?;
        }
    }
    Ok(env)
}

fn bind(env: &mut [Option<MValue>], a: &Arg, v: MValue) -> RuleResult<()> {
    let mut set = |id: usize, v: MValue| -> RuleResult<()> {
        let slot = env
            .get_mut(id)
            .ok_or_else(|| format!("value id {id} is out of range"))?;
        *slot = Some(v);
        Ok(())
    };
    match (a, v) {
        (Arg::None, _) => {}
        (Arg::Tensor(id), v @ MValue::Tensor(_)) => set(*id, v)?,
        (Arg::Tensor(id), MValue::Tensors(mut ts)) if ts.len() == 1 => {
            set(*id, MValue::Tensor(ts.remove(0)))?
        }
        (Arg::Tensors(ids), MValue::Tensors(ts)) => {
            if ids.len() > ts.len() {
                return Err(format!(
                    "the graph expects {} tensors, the rule gave {}",
                    ids.len(),
                    ts.len()
                ));
            }
            for (id, t) in ids.iter().zip(ts) {
                set(*id, MValue::Tensor(t))?;
            }
        }
        (Arg::OptTensors(ids), MValue::Tensors(ts)) => {
            for (id, t) in ids.iter().zip(ts) {
                if let Some(id) = id {
                    set(*id, MValue::Tensor(t))?;
                }
            }
        }
        (Arg::OptTensors(ids), MValue::OptTensors(ts)) => {
            for (id, t) in ids.iter().zip(ts) {
                if let (Some(id), Some(t)) = (id, t) {
                    set(*id, MValue::Tensor(t))?;
                }
            }
        }
        (Arg::SymInt(IntArg::Sym(id)), v)
        | (Arg::SymFloat(FloatArg::Sym(id)), v)
        | (Arg::SymBool(BoolArg::Sym(id)), v)
        | (Arg::CustomObj(id), v) => set(*id, v)?,
        (Arg::Tensor(id), MValue::Opaque | MValue::None) => set(*id, MValue::Opaque)?,
        (
            Arg::Int(_)
            | Arg::Float(_)
            | Arg::Bool(_)
            | Arg::Str(_)
            | Arg::SymInt(IntArg::Int(_))
            | Arg::SymFloat(FloatArg::Float(_))
            | Arg::SymBool(BoolArg::Bool(_)),
            _,
        ) => {}
        (a, v) => return Err(format!("cannot bind a {} to {a:?}", v.kind())),
    }
    Ok(())
}

/// Where the example inputs of [`example_inputs`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExampleOrigin {
    /// Every user input has static sizes.
    Static,
    /// Dynamic symbols were set to the upper end of their ranges.
    UpperBound,
}

/// The largest symbol value taken as "the upper end" of a range; larger (or unbounded)
/// ranges need a value from the user.
pub const MAX_EXAMPLE_DIM: i64 = 1 << 20;

/// User-input metas when no inputs are given: the program's static shapes, or each dynamic
/// symbol at the upper end of its range constraint. `Err` lists the symbols that have no
/// usable upper bound (with the inputs and dims they size), so the caller can ask for them.
pub fn example_inputs(program: &Program) -> Result<(Vec<MValue>, ExampleOrigin), Vec<String>> {
    let mut values = Bindings::new();
    let mut needs: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut origin = ExampleOrigin::Static;
    for u in program.user_inputs() {
        let Some(v) = program.input_value(&u.name) else {
            continue;
        };
        let dims: Vec<(usize, &Dim)> = match &v.kind {
            ValueKind::Tensor { sizes, .. } => sizes.iter().enumerate().collect(),
            ValueKind::SymInt(d) => vec![(0, d)],
            _ => vec![],
        };
        for (i, d) in dims {
            let Dim::Sym(e) = d else { continue };
            origin = ExampleOrigin::UpperBound;
            for s in e.free_symbols() {
                let max = program
                    .range_constraints
                    .get(&s)
                    .and_then(|r| r.max)
                    .filter(|&m| m <= MAX_EXAMPLE_DIM);
                match max {
                    Some(m) => {
                        values.insert(s, m);
                    }
                    None => needs
                        .entry(s)
                        .or_default()
                        .push(format!("dim {i} of '{}'", u.name)),
                }
            }
        }
    }
    if !needs.is_empty() {
        return Err(needs
            .into_iter()
            .map(|(s, uses)| {
                let range = program
                    .range_constraints
                    .get(&s)
                    .map(|r| {
                        format!(
                            "[{}, {}]",
                            r.min,
                            r.max.map_or("inf".to_string(), |m| m.to_string())
                        )
                    })
                    .unwrap_or_else(|| "unconstrained".into());
                format!("{s} (range {range}; sizes {})", uses.join(", "))
            })
            .collect());
    }
    let mut out = Vec::new();
    for u in program.user_inputs() {
        let v = program.input_value(&u.name).map(|v| &v.kind);
        let eval = |d: &Dim| -> Result<usize, Vec<String>> {
            let n = match d {
                Dim::Static(s) => *s,
                Dim::Sym(e) => e
                    .eval_int(&|s| values.get(s).copied())
                    .map_err(|err| vec![format!("input '{}': {err}", u.name)])?,
            };
            usize::try_from(n).map_err(|_| vec![format!("input '{}': size {n}", u.name)])
        };
        out.push(match v {
            Some(ValueKind::Tensor { dtype, sizes, .. }) => MValue::Tensor(MetaTensor::new(
                *dtype,
                sizes.iter().map(eval).collect::<Result<_, _>>()?,
            )),
            Some(ValueKind::SymInt(d)) => MValue::Int(eval(d)? as i64),
            _ => MValue::None,
        });
    }
    Ok((out, origin))
}

/// Every dtype of the program's values (graph and subgraphs), with how many values have it.
pub fn dtypes(program: &Program) -> std::collections::BTreeMap<DType, usize> {
    fn walk(g: &Graph, out: &mut std::collections::BTreeMap<DType, usize>) {
        for v in &g.values {
            if let ValueKind::Tensor { dtype, .. } = &v.kind {
                *out.entry(*dtype).or_default() += 1;
            }
        }
        for n in &g.nodes {
            for (_, a) in &n.inputs {
                if let Arg::Graph(sub) = a {
                    walk(sub, out);
                }
            }
        }
    }
    let mut out = Default::default();
    walk(&program.graph, &mut out);
    out
}
