//! Argument access for kernels: typed getters by schema argument name, with errors that
//! name the op and the argument.

use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::program::{Arg, BoolArg, FloatArg, Graph, IntArg, Node};
use crate::runtime::{RValue, RunState};

/// A Python number argument (`Scalar` in ATen schemas).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
    pub fn operand(self) -> crate::cpu::promote::Operand {
        use crate::cpu::promote::Operand;
        match self {
            Scalar::Bool(_) => Operand::Bool,
            Scalar::Int(_) => Operand::Int,
            Scalar::Float(_) => Operand::Float,
        }
    }
}

/// What a kernel sees: the node, its resolved arguments, and the run state (RNG, options).
pub struct OpCtx<'a> {
    pub node: &'a Node,
    pub graph: &'a Graph,
    pub env: &'a [Option<RValue>],
    pub state: &'a mut RunState,
}

impl<'a> OpCtx<'a> {
    pub fn target(&self) -> &str {
        &self.node.target
    }
    /// An error naming this op.
    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::op(&self.node.target, msg)
    }
    pub fn has(&self, name: &str) -> bool {
        self.node.arg(name).is_some_and(|a| !matches!(a, Arg::None))
    }
    pub fn arg(&self, name: &str) -> Option<&'a Arg> {
        self.node.arg(name)
    }
    /// The i-th positional argument (schema order), for ops whose argument names vary.
    pub fn arg_at(&self, i: usize) -> Option<&'a Arg> {
        self.node.inputs.get(i).map(|(_, a)| a)
    }
    fn value(&self, id: usize) -> Result<&RValue> {
        self.env.get(id).and_then(|v| v.as_ref()).ok_or_else(|| {
            self.err(format!(
                "value '{}' has not been computed",
                self.graph.value(id).name
            ))
        })
    }
    fn need(&self, name: &str) -> Result<&'a Arg> {
        self.node
            .arg(name)
            .ok_or_else(|| self.err(format!("missing argument '{name}'")))
    }

    pub fn tensor_of(&self, a: &Arg, name: &str) -> Result<Tensor> {
        match a {
            Arg::Tensor(id) | Arg::OptTensor(Some(id)) => match self.value(*id)? {
                RValue::Tensor(t) => Ok(t.clone()),
                other => Err(self.err(format!(
                    "argument '{name}' is a {}, expected a tensor",
                    other.kind()
                ))),
            },
            other => Err(self.err(format!("argument '{name}' is {other:?}, expected a tensor"))),
        }
    }
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let a = self.need(name)?;
        self.tensor_of(a, name)
    }
    /// The derived form of argument `name` (the tensor `weight`) that `derive` makes, kept
    /// by the session when the argument is a frozen weight (see [`crate::plan::Prepared`]);
    /// `None` otherwise, and the kernel derives it for this run.
    pub fn prepared<T: std::any::Any + Send + Sync>(
        &mut self,
        name: &str,
        weight: &Tensor,
        derive: impl FnOnce() -> Result<(T, usize)>,
    ) -> Result<Option<std::sync::Arc<T>>> {
        let Some(Arg::Tensor(id)) = self.node.arg(name) else {
            return Ok(None);
        };
        self.state
            .prepared
            .get_or_derive(self.graph, self.node, *id, weight, derive)
    }
    pub fn opt_tensor(&self, name: &str) -> Result<Option<Tensor>> {
        match self.node.arg(name) {
            None | Some(Arg::None) | Some(Arg::OptTensor(None)) => Ok(None),
            Some(a) => self.tensor_of(a, name).map(Some),
        }
    }
    pub fn tensors(&self, name: &str) -> Result<Vec<Tensor>> {
        match self.need(name)? {
            Arg::Tensors(ids) => ids
                .iter()
                .map(|id| self.tensor_of(&Arg::Tensor(*id), name))
                .collect(),
            Arg::OptTensors(ids) => ids
                .iter()
                .map(|id| {
                    id.ok_or_else(|| self.err(format!("'{name}' has a None entry")))
                        .and_then(|id| self.tensor_of(&Arg::Tensor(id), name))
                })
                .collect(),
            other => Err(self.err(format!(
                "argument '{name}' is {other:?}, expected a list of tensors"
            ))),
        }
    }
    pub fn opt_tensors(&self, name: &str) -> Result<Vec<Option<Tensor>>> {
        match self.need(name)? {
            Arg::OptTensors(ids) => ids
                .iter()
                .map(|id| {
                    id.map(|id| self.tensor_of(&Arg::Tensor(id), name))
                        .transpose()
                })
                .collect(),
            Arg::Tensors(ids) => ids
                .iter()
                .map(|id| self.tensor_of(&Arg::Tensor(*id), name).map(Some))
                .collect(),
            other => Err(self.err(format!(
                "argument '{name}' is {other:?}, expected a list of optional tensors"
            ))),
        }
    }

    fn sym_int(&self, a: &IntArg) -> Result<i64> {
        match a {
            IntArg::Int(i) => Ok(*i),
            IntArg::Sym(id) => match self.value(*id)? {
                RValue::Int(i) => Ok(*i),
                other => Err(self.err(format!(
                    "symbolic int '{}' is a {}",
                    self.graph.value(*id).name,
                    other.kind()
                ))),
            },
        }
    }
    pub fn int_of(&self, a: &Arg, name: &str) -> Result<i64> {
        match a {
            Arg::Int(i) => Ok(*i),
            Arg::SymInt(x) => self.sym_int(x),
            Arg::Bool(b) => Ok(*b as i64),
            other => Err(self.err(format!("argument '{name}' is {other:?}, expected an int"))),
        }
    }
    pub fn int(&self, name: &str) -> Result<i64> {
        let a = self.need(name)?;
        self.int_of(a, name)
    }
    pub fn int_or(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.opt_int(name)?.unwrap_or(default))
    }
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(a) => self.int_of(a, name).map(Some),
        }
    }
    pub fn ints(&self, name: &str) -> Result<Vec<i64>> {
        let a = self.need(name)?;
        self.ints_of(a, name)
    }
    pub fn ints_of(&self, a: &Arg, name: &str) -> Result<Vec<i64>> {
        match a {
            Arg::Ints(v) => Ok(v.clone()),
            Arg::SymInts(v) => v.iter().map(|x| self.sym_int(x)).collect(),
            Arg::Int(i) => Ok(vec![*i]),
            Arg::SymInt(x) => Ok(vec![self.sym_int(x)?]),
            other => Err(self.err(format!(
                "argument '{name}' is {other:?}, expected a list of ints"
            ))),
        }
    }
    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(a) => self.ints_of(a, name).map(Some),
        }
    }
    pub fn float(&self, name: &str) -> Result<f64> {
        self.scalar(name).map(Scalar::as_f64)
    }
    pub fn float_or(&self, name: &str, default: f64) -> Result<f64> {
        Ok(self
            .opt_scalar(name)?
            .map(Scalar::as_f64)
            .unwrap_or(default))
    }
    pub fn opt_float(&self, name: &str) -> Result<Option<f64>> {
        Ok(self.opt_scalar(name)?.map(Scalar::as_f64))
    }
    /// An optional list of floats (`float[]?`).
    pub fn opt_floats(&self, name: &str) -> Result<Option<Vec<f64>>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::Floats(v)) => Ok(Some(v.clone())),
            Some(Arg::SymFloats(v)) => v
                .iter()
                .map(|x| {
                    self.scalar_of(&Arg::SymFloat(x.clone()), name)
                        .map(Scalar::as_f64)
                })
                .collect::<Result<Vec<f64>>>()
                .map(Some),
            Some(a) => Ok(Some(vec![self.scalar_of(a, name)?.as_f64()])),
        }
    }
    pub fn scalar_of(&self, a: &Arg, name: &str) -> Result<Scalar> {
        Ok(match a {
            Arg::Int(i) => Scalar::Int(*i),
            Arg::Float(f) => Scalar::Float(*f),
            Arg::Bool(b) => Scalar::Bool(*b),
            Arg::SymInt(x) => Scalar::Int(self.sym_int(x)?),
            Arg::SymFloat(FloatArg::Float(f)) => Scalar::Float(*f),
            Arg::SymFloat(FloatArg::Sym(id)) => match self.value(*id)? {
                RValue::Float(f) => Scalar::Float(*f),
                RValue::Int(i) => Scalar::Float(*i as f64),
                other => return Err(self.err(format!("argument '{name}' is a {}", other.kind()))),
            },
            Arg::SymBool(BoolArg::Bool(b)) => Scalar::Bool(*b),
            Arg::SymBool(BoolArg::Sym(id)) => match self.value(*id)? {
                RValue::Bool(b) => Scalar::Bool(*b),
                other => return Err(self.err(format!("argument '{name}' is a {}", other.kind()))),
            },
            other => {
                return Err(self.err(format!("argument '{name}' is {other:?}, expected a number")))
            }
        })
    }
    pub fn scalar(&self, name: &str) -> Result<Scalar> {
        let a = self.need(name)?;
        self.scalar_of(a, name)
    }
    pub fn opt_scalar(&self, name: &str) -> Result<Option<Scalar>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(a) => self.scalar_of(a, name).map(Some),
        }
    }
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(default),
            Some(Arg::Bool(b)) => Ok(*b),
            Some(a) => Ok(self.scalar_of(a, name)?.as_f64() != 0.0),
        }
    }
    pub fn bools(&self, name: &str) -> Result<Vec<bool>> {
        match self.need(name)? {
            Arg::Bools(v) => Ok(v.clone()),
            other => Err(self.err(format!(
                "argument '{name}' is {other:?}, expected a list of bools"
            ))),
        }
    }
    pub fn opt_dtype(&self, name: &str) -> Result<Option<DType>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::ScalarType(d)) => Ok(Some(*d)),
            Some(other) => {
                Err(self.err(format!("argument '{name}' is {other:?}, expected a dtype")))
            }
        }
    }
    pub fn opt_str(&self, name: &str) -> Result<Option<String>> {
        match self.node.arg(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::Str(s)) => Ok(Some(s.clone())),
            Some(other) => {
                Err(self.err(format!("argument '{name}' is {other:?}, expected a string")))
            }
        }
    }
    pub fn graph_arg(&self, name: &str) -> Result<&'a Graph> {
        match self.need(name)? {
            Arg::Graph(g) => Ok(g),
            other => Err(self.err(format!(
                "argument '{name}' is {other:?}, expected a subgraph"
            ))),
        }
    }
    /// The value of any argument, resolved (for higher-order ops passing operands through).
    pub fn resolve(&self, a: &Arg) -> Result<RValue> {
        Ok(match a {
            Arg::None | Arg::OptTensor(None) => RValue::None,
            Arg::Tensor(id) | Arg::OptTensor(Some(id)) => self.value(*id)?.clone(),
            Arg::Tensors(ids) => RValue::Tensors(
                ids.iter()
                    .map(|id| self.tensor_of(&Arg::Tensor(*id), "list"))
                    .collect::<Result<_>>()?,
            ),
            Arg::OptTensors(ids) => RValue::OptTensors(
                ids.iter()
                    .map(|id| {
                        id.map(|id| self.tensor_of(&Arg::Tensor(id), "list"))
                            .transpose()
                    })
                    .collect::<Result<_>>()?,
            ),
            Arg::Int(i) => RValue::Int(*i),
            Arg::SymInt(x) => RValue::Int(self.sym_int(x)?),
            Arg::Float(f) => RValue::Float(*f),
            Arg::Bool(b) => RValue::Bool(*b),
            Arg::Str(s) => RValue::Str(s.clone()),
            a @ (Arg::SymFloat(_) | Arg::SymBool(_)) => match self.scalar_of(a, "operand")? {
                Scalar::Float(f) => RValue::Float(f),
                Scalar::Bool(b) => RValue::Bool(b),
                Scalar::Int(i) => RValue::Int(i),
            },
            other => return Err(self.err(format!("cannot pass {other:?} as a value"))),
        })
    }
}
