//! Runtime values flowing between nodes.

use crate::cpu::Tensor;

#[derive(Clone, Debug)]
pub enum RValue {
    None,
    Tensor(Tensor),
    Tensors(Vec<Tensor>),
    OptTensors(Vec<Option<Tensor>>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl RValue {
    pub fn kind(&self) -> &'static str {
        match self {
            RValue::None => "None",
            RValue::Tensor(_) => "Tensor",
            RValue::Tensors(_) => "Tensor[]",
            RValue::OptTensors(_) => "Tensor?[]",
            RValue::Int(_) => "int",
            RValue::Float(_) => "float",
            RValue::Bool(_) => "bool",
            RValue::Str(_) => "str",
        }
    }
    pub fn as_tensor(&self) -> Option<&Tensor> {
        if let RValue::Tensor(t) = self {
            Some(t)
        } else {
            None
        }
    }
}

impl From<Tensor> for RValue {
    fn from(t: Tensor) -> Self {
        RValue::Tensor(t)
    }
}
