//! Argument access for shape rules: typed getters by schema argument name (as `ops::OpCtx`
//! has for kernels), over meta values.

use super::{MValue, MetaTensor, RuleResult, ScalarKind};
use crate::cpu::promote::Operand;
use crate::dtype::DType;
use crate::ops::OpCtx;
use crate::program::{Arg, BoolArg, FloatArg, Graph, IntArg, Node};
use crate::runtime::RunState;
use crate::sym::Bindings;

/// What a rule sees: the node and the meta values computed so far.
pub struct MetaCtx<'a> {
    pub node: &'a Node,
    pub graph: &'a Graph,
    pub env: &'a [Option<MValue>],
    pub bindings: &'a Bindings,
}

impl<'a> MetaCtx<'a> {
    pub fn new(
        node: &'a Node,
        graph: &'a Graph,
        env: &'a [Option<MValue>],
        bindings: &'a Bindings,
    ) -> Self {
        MetaCtx {
            node,
            graph,
            env,
            bindings,
        }
    }
    pub fn target(&self) -> &str {
        &self.node.target
    }
    /// The overload name (`Tensor` of `aten.add.Tensor`).
    pub fn overload(&self) -> &str {
        self.node
            .target
            .rsplit_once('.')
            .map(|(_, o)| o)
            .unwrap_or("")
    }

    /// Run a CPU shape helper that takes an `OpCtx` only to name the op in its errors.
    pub fn with_op<T>(&self, f: impl FnOnce(&OpCtx) -> crate::Result<T>) -> RuleResult<T> {
        let mut st = RunState::default();
        let ctx = OpCtx {
            node: self.node,
            graph: self.graph,
            env: &[],
            state: &mut st,
        };
        f(&ctx).map_err(|e| match e {
            crate::Error::Op { msg, .. } => msg,
            other => other.to_string(),
        })
    }
    /// Wrap a possibly negative dim (torch's `maybe_wrap_dim`).
    pub fn wrap_dim(&self, dim: i64, rank: usize) -> RuleResult<usize> {
        self.with_op(|c| crate::ops::util::wrap_dim(c, dim, rank))
    }

    pub fn has(&self, name: &str) -> bool {
        self.node
            .arg(name)
            .is_some_and(|a| !matches!(a, Arg::None | Arg::OptTensor(None)))
    }
    pub fn arg(&self, name: &str) -> Option<&'a Arg> {
        self.node.arg(name)
    }
    pub fn arg_at(&self, i: usize) -> Option<&'a Arg> {
        self.node.inputs.get(i).map(|(_, a)| a)
    }
    fn need(&self, name: &str) -> RuleResult<&'a Arg> {
        self.node
            .arg(name)
            .ok_or_else(|| format!("missing argument '{name}'"))
    }
    pub fn value(&self, id: usize) -> RuleResult<&'a MValue> {
        self.env.get(id).and_then(|v| v.as_ref()).ok_or_else(|| {
            format!(
                "value '{}' has not been computed",
                self.graph
                    .values
                    .get(id)
                    .map(|v| v.name.as_str())
                    .unwrap_or("?")
            )
        })
    }

    pub fn tensor_of(&self, a: &Arg, name: &str) -> RuleResult<MetaTensor> {
        match a {
            Arg::Tensor(id) | Arg::OptTensor(Some(id)) => match self.value(*id)? {
                MValue::Tensor(t) => Ok(t.clone()),
                other => Err(format!(
                    "argument '{name}' is a {}, expected a tensor",
                    other.kind()
                )),
            },
            other => Err(format!("argument '{name}' is {other:?}, expected a tensor")),
        }
    }
    pub fn tensor(&self, name: &str) -> RuleResult<MetaTensor> {
        self.tensor_of(self.need(name)?, name)
    }
    /// The first argument (`self`, `input`, ...), which must be a tensor.
    pub fn first(&self) -> RuleResult<MetaTensor> {
        let a = self.arg_at(0).ok_or("the op has no arguments")?;
        self.tensor_of(a, &self.node.inputs[0].0)
    }
    pub fn opt_tensor(&self, name: &str) -> RuleResult<Option<MetaTensor>> {
        match self.node.arg(name) {
            None | Some(Arg::None) | Some(Arg::OptTensor(None)) => Ok(None),
            Some(a) => self.tensor_of(a, name).map(Some),
        }
    }
    pub fn tensors(&self, name: &str) -> RuleResult<Vec<MetaTensor>> {
        Ok(self.opt_tensors(name)?.into_iter().flatten().collect())
    }
    pub fn opt_tensors(&self, name: &str) -> RuleResult<Vec<Option<MetaTensor>>> {
        match self.need(name)? {
            Arg::Tensors(ids) => ids
                .iter()
                .map(|id| self.tensor_of(&Arg::Tensor(*id), name).map(Some))
                .collect(),
            Arg::OptTensors(ids) => ids
                .iter()
                .map(|id| {
                    id.map(|id| self.tensor_of(&Arg::Tensor(id), name))
                        .transpose()
                })
                .collect(),
            other => Err(format!(
                "argument '{name}' is {other:?}, expected a list of tensors"
            )),
        }
    }

    fn sym_int(&self, a: &IntArg) -> RuleResult<i64> {
        match a {
            IntArg::Int(i) => Ok(*i),
            IntArg::Sym(id) => match self.value(*id)? {
                MValue::Int(i) => Ok(*i),
                MValue::Unknown(_) => Err(format!(
                    "the size '{}' depends on tensor data; the meta device cannot know it",
                    self.graph.value(*id).name
                )),
                other => Err(format!(
                    "symbolic int '{}' is a {}",
                    self.graph.value(*id).name,
                    other.kind()
                )),
            },
        }
    }
    /// Whether the argument is a size that depends on tensor data (`item()`).
    pub fn is_unknown(&self, name: &str) -> bool {
        matches!(
            self.node.arg(name),
            Some(Arg::SymInt(IntArg::Sym(id))) if matches!(self.env.get(*id), Some(Some(MValue::Unknown(_))))
        )
    }
    pub fn int_of(&self, a: &Arg, name: &str) -> RuleResult<i64> {
        match a {
            Arg::Int(i) => Ok(*i),
            Arg::SymInt(x) => self.sym_int(x),
            Arg::Bool(b) => Ok(*b as i64),
            other => Err(format!("argument '{name}' is {other:?}, expected an int")),
        }
    }
    pub fn int(&self, name: &str) -> RuleResult<i64> {
        self.int_of(self.need(name)?, name)
    }
    pub fn opt_int(&self, name: &str) -> RuleResult<Option<i64>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(a) => self.int_of(a, name).map(Some),
        }
    }
    pub fn int_or(&self, name: &str, default: i64) -> RuleResult<i64> {
        Ok(self.opt_int(name)?.unwrap_or(default))
    }
    pub fn ints_of(&self, a: &Arg, name: &str) -> RuleResult<Vec<i64>> {
        match a {
            Arg::Ints(v) => Ok(v.clone()),
            Arg::SymInts(v) => v.iter().map(|x| self.sym_int(x)).collect(),
            Arg::Int(i) => Ok(vec![*i]),
            Arg::SymInt(x) => Ok(vec![self.sym_int(x)?]),
            other => Err(format!(
                "argument '{name}' is {other:?}, expected a list of ints"
            )),
        }
    }
    pub fn ints(&self, name: &str) -> RuleResult<Vec<i64>> {
        self.ints_of(self.need(name)?, name)
    }
    pub fn opt_ints(&self, name: &str) -> RuleResult<Option<Vec<i64>>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(a) => self.ints_of(a, name).map(Some),
        }
    }
    /// A list of sizes (`int[]` / `SymInt[]`), checked non-negative where `-1` is not allowed.
    pub fn sizes(&self, name: &str) -> RuleResult<Vec<usize>> {
        self.ints(name)?
            .into_iter()
            .map(|s| usize::try_from(s).map_err(|_| format!("'{name}' has a negative size {s}")))
            .collect()
    }
    pub fn bool_or(&self, name: &str, default: bool) -> RuleResult<bool> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(default),
            Some(Arg::Bool(b)) | Some(Arg::SymBool(BoolArg::Bool(b))) => Ok(*b),
            Some(Arg::Int(i)) => Ok(*i != 0),
            Some(Arg::SymBool(BoolArg::Sym(id))) => match self.value(*id)? {
                MValue::Bool(b) => Ok(*b),
                MValue::Int(i) => Ok(*i != 0),
                other => Err(format!("argument '{name}' is a {}", other.kind())),
            },
            Some(other) => Err(format!("argument '{name}' is {other:?}, expected a bool")),
        }
    }
    pub fn opt_float(&self, name: &str) -> RuleResult<Option<f64>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::Float(f)) | Some(Arg::SymFloat(FloatArg::Float(f))) => Ok(Some(*f)),
            Some(Arg::Int(i)) => Ok(Some(*i as f64)),
            Some(Arg::SymInt(x)) => Ok(Some(self.sym_int(x)? as f64)),
            Some(Arg::SymFloat(FloatArg::Sym(id))) => match self.value(*id)? {
                MValue::Float(f) => Ok(Some(*f)),
                MValue::Int(i) => Ok(Some(*i as f64)),
                other => Err(format!("argument '{name}' is a {}", other.kind())),
            },
            Some(other) => Err(format!("argument '{name}' is {other:?}, expected a float")),
        }
    }
    pub fn opt_floats(&self, name: &str) -> RuleResult<Option<Vec<f64>>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::Floats(v)) => Ok(Some(v.clone())),
            Some(Arg::SymFloats(v)) => v
                .iter()
                .map(|x| match x {
                    FloatArg::Float(f) => Ok(*f),
                    FloatArg::Sym(id) => match self.value(*id)? {
                        MValue::Float(f) => Ok(*f),
                        MValue::Int(i) => Ok(*i as f64),
                        other => Err(format!("argument '{name}' holds a {}", other.kind())),
                    },
                })
                .collect::<RuleResult<Vec<f64>>>()
                .map(Some),
            Some(Arg::Float(f)) => Ok(Some(vec![*f])),
            Some(other) => Err(format!(
                "argument '{name}' is {other:?}, expected a list of floats"
            )),
        }
    }
    pub fn opt_dtype(&self, name: &str) -> RuleResult<Option<DType>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::ScalarType(d)) => Ok(Some(*d)),
            Some(other) => Err(format!("argument '{name}' is {other:?}, expected a dtype")),
        }
    }
    pub fn opt_str(&self, name: &str) -> RuleResult<Option<String>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::Str(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("argument '{name}' is {other:?}, expected a string")),
        }
    }

    /// An argument as an operand of type promotion: a tensor (0-d or not) or a Python number.
    /// `None` for absent arguments.
    pub fn operand(&self, name: &str) -> RuleResult<Option<(Operand, Option<MetaTensor>)>> {
        let Some(a) = self.node.arg(name) else {
            return Ok(None);
        };
        self.operand_of(a, name)
    }
    pub fn operand_of(
        &self,
        a: &Arg,
        name: &str,
    ) -> RuleResult<Option<(Operand, Option<MetaTensor>)>> {
        let scalar = |k: ScalarKind| match k {
            ScalarKind::Int => Operand::Int,
            ScalarKind::Float => Operand::Float,
            ScalarKind::Bool => Operand::Bool,
        };
        Ok(Some(match a {
            Arg::None | Arg::OptTensor(None) => return Ok(None),
            Arg::Tensor(_) | Arg::OptTensor(Some(_)) => {
                let t = self.tensor_of(a, name)?;
                (
                    Operand::Tensor {
                        dtype: t.dtype,
                        zero_dim: t.rank() == 0,
                    },
                    Some(t),
                )
            }
            Arg::Int(_) | Arg::SymInt(_) => (Operand::Int, None),
            Arg::Float(_) | Arg::SymFloat(FloatArg::Float(_)) => (Operand::Float, None),
            Arg::Bool(_) | Arg::SymBool(_) => (Operand::Bool, None),
            Arg::SymFloat(FloatArg::Sym(id)) => match self.value(*id)? {
                MValue::Int(_) => (Operand::Int, None),
                MValue::Unknown(k) => (scalar(*k), None),
                _ => (Operand::Float, None),
            },
            Arg::Complex(..) => return Err(format!("complex argument '{name}' is not supported")),
            other => {
                return Err(format!(
                    "argument '{name}' is {other:?}, expected a number or a tensor"
                ))
            }
        }))
    }

    /// Run a subgraph's rules (higher-order ops) and return its outputs.
    pub fn run_subgraph(&self, g: &Graph, inputs: Vec<MValue>) -> RuleResult<Vec<MValue>> {
        let env = super::run_graph(g, inputs, self.bindings).map_err(|e| e.to_string())?;
        g.outputs
            .iter()
            .map(|a| resolve(&env, a))
            .collect::<RuleResult<Vec<_>>>()
    }
    /// The meta value of any argument (to pass operands through).
    pub fn resolve(&self, a: &Arg) -> RuleResult<MValue> {
        resolve(self.env, a)
    }
}

/// The meta value of an argument in `env`.
pub(crate) fn resolve(env: &[Option<MValue>], a: &Arg) -> RuleResult<MValue> {
    let get = |id: usize| -> RuleResult<MValue> {
        env.get(id)
            .and_then(|v| v.clone())
            .ok_or_else(|| format!("value #{id} was never computed"))
    };
    let tensor = |id: usize| -> RuleResult<MetaTensor> {
        match get(id)? {
            MValue::Tensor(t) => Ok(t),
            other => Err(format!(
                "value #{id} is a {}, expected a tensor",
                other.kind()
            )),
        }
    };
    Ok(match a {
        Arg::None | Arg::OptTensor(None) => MValue::None,
        Arg::Tensor(id)
        | Arg::OptTensor(Some(id))
        | Arg::CustomObj(id)
        | Arg::SymInt(IntArg::Sym(id))
        | Arg::SymFloat(FloatArg::Sym(id))
        | Arg::SymBool(BoolArg::Sym(id)) => get(*id)?,
        Arg::Tensors(ids) => {
            MValue::Tensors(ids.iter().map(|i| tensor(*i)).collect::<RuleResult<_>>()?)
        }
        Arg::OptTensors(ids) => MValue::OptTensors(
            ids.iter()
                .map(|i| i.map(tensor).transpose())
                .collect::<RuleResult<_>>()?,
        ),
        Arg::Int(i) | Arg::SymInt(IntArg::Int(i)) => MValue::Int(*i),
        Arg::Float(f) | Arg::SymFloat(FloatArg::Float(f)) => MValue::Float(*f),
        Arg::Bool(b) | Arg::SymBool(BoolArg::Bool(b)) => MValue::Bool(*b),
        Arg::Str(s) => MValue::Str(s.clone()),
        other => return Err(format!("cannot pass {other:?} as a value")),
    })
}
