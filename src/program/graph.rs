//! The graph of a program: values with dtypes and symbolic shapes, and nodes calling
//! `aten.x.overload` (or higher-order ops such as `cond`) with typed arguments.

use crate::dtype::DType;
use crate::sym::Expr;
use std::collections::BTreeMap;
use std::fmt;

/// Index of a value in its graph's value table.
pub type ValueId = usize;

/// One dimension (or stride) of a tensor: concrete, or a symbolic expression over the
/// program's dynamic symbols.
#[derive(Debug, Clone, PartialEq)]
pub enum Dim {
    Static(i64),
    Sym(Expr),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(v) => write!(f, "{v}"),
            Dim::Sym(e) => write!(f, "{e}"),
        }
    }
}

/// What a value is.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueKind {
    Tensor {
        dtype: DType,
        sizes: Vec<Dim>,
        strides: Vec<Dim>,
        requires_grad: bool,
    },
    SymInt(Dim),
    SymFloat(Option<Expr>),
    SymBool(Option<Expr>),
    CustomObj {
        class_fqn: String,
    },
    Token,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub name: String,
    pub kind: ValueKind,
}

/// An integer argument that may be symbolic (a sym int value of the graph).
#[derive(Debug, Clone, PartialEq)]
pub enum IntArg {
    Int(i64),
    Sym(ValueId),
}

/// A float argument that may be symbolic.
#[derive(Debug, Clone, PartialEq)]
pub enum FloatArg {
    Float(f64),
    Sym(ValueId),
}

/// A bool argument that may be symbolic.
#[derive(Debug, Clone, PartialEq)]
pub enum BoolArg {
    Bool(bool),
    Sym(ValueId),
}

/// A typed node argument (every argument kind of the export schema).
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    None,
    Tensor(ValueId),
    Tensors(Vec<ValueId>),
    OptTensor(Option<ValueId>),
    OptTensors(Vec<Option<ValueId>>),
    NestedTensors(Vec<Vec<ValueId>>),
    Int(i64),
    Ints(Vec<i64>),
    IntLists(Vec<Vec<i64>>),
    Float(f64),
    Floats(Vec<f64>),
    FloatLists(Vec<Vec<f64>>),
    Bool(bool),
    Bools(Vec<bool>),
    Str(String),
    Strs(Vec<String>),
    SymInt(IntArg),
    SymInts(Vec<IntArg>),
    SymFloat(FloatArg),
    SymFloats(Vec<FloatArg>),
    SymBool(BoolArg),
    SymBools(Vec<BoolArg>),
    ScalarType(DType),
    MemoryFormat(i64),
    Layout(i64),
    Device(String),
    Graph(Box<Graph>),
    CustomObj(ValueId),
    Operator(String),
    Complex(f64, f64),
    StrMap(BTreeMap<String, Arg>),
}

impl Arg {
    /// Every value this argument reads.
    pub fn values(&self, out: &mut Vec<ValueId>) {
        match self {
            Arg::Tensor(v) | Arg::CustomObj(v) => out.push(*v),
            Arg::Tensors(vs) => out.extend(vs),
            Arg::OptTensor(v) => out.extend(v),
            Arg::OptTensors(vs) => out.extend(vs.iter().flatten()),
            Arg::NestedTensors(vv) => out.extend(vv.iter().flatten()),
            Arg::SymInt(IntArg::Sym(v))
            | Arg::SymFloat(FloatArg::Sym(v))
            | Arg::SymBool(BoolArg::Sym(v)) => out.push(*v),
            Arg::SymInts(xs) => out.extend(xs.iter().filter_map(|x| {
                if let IntArg::Sym(v) = x {
                    Some(*v)
                } else {
                    None
                }
            })),
            Arg::SymFloats(xs) => out.extend(xs.iter().filter_map(|x| {
                if let FloatArg::Sym(v) = x {
                    Some(*v)
                } else {
                    None
                }
            })),
            Arg::SymBools(xs) => out.extend(xs.iter().filter_map(|x| {
                if let BoolArg::Sym(v) = x {
                    Some(*v)
                } else {
                    None
                }
            })),
            Arg::StrMap(m) => m.values().for_each(|a| a.values(out)),
            _ => {}
        }
    }
}

/// One call in the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's name in the exported graph (FX node name), when torch saved it.
    pub name: String,
    /// The op: `aten.conv2d.default`, `higher_order.cond`, `_operator.getitem`...
    /// (torch's `torch.ops.` prefix is removed).
    pub target: String,
    /// Arguments by schema name, in schema order.
    pub inputs: Vec<(String, Arg)>,
    /// What the node defines (tensors, lists of tensors, sym ints, `None` for unused outputs).
    pub outputs: Vec<Arg>,
    /// torch's node metadata (`nn_module_stack`, `source_fn_stack`, `torch_fn`...) as saved,
    /// without the stack traces and `from_node` (the serialized program keeps those).
    pub metadata: BTreeMap<String, String>,
}

impl Node {
    /// The argument named `name`.
    pub fn arg(&self, name: &str) -> Option<&Arg> {
        self.inputs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }
}

/// A graph: the program's, or the body of a higher-order op (`cond` branches).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    pub values: Vec<Value>,
    pub by_name: BTreeMap<String, ValueId>,
    pub inputs: Vec<Arg>,
    pub outputs: Vec<Arg>,
    pub nodes: Vec<Node>,
    /// Subgraphs of higher-order ops return a single tensor rather than a list.
    pub is_single_tensor_return: bool,
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id]
    }
    pub fn id(&self, name: &str) -> Option<ValueId> {
        self.by_name.get(name).copied()
    }
    /// Op histogram of this graph and its subgraphs (`target -> count`).
    pub fn op_histogram(&self) -> BTreeMap<String, usize> {
        let mut h = BTreeMap::new();
        self.count_ops(&mut h);
        h
    }
    fn count_ops(&self, h: &mut BTreeMap<String, usize>) {
        for n in &self.nodes {
            *h.entry(n.target.clone()).or_default() += 1;
            for (_, a) in &n.inputs {
                if let Arg::Graph(g) = a {
                    g.count_ops(h);
                }
            }
        }
    }
    /// Nodes of this graph and every subgraph.
    pub fn node_count(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| {
                1 + n
                    .inputs
                    .iter()
                    .map(|(_, a)| {
                        if let Arg::Graph(g) = a {
                            g.node_count()
                        } else {
                            0
                        }
                    })
                    .sum::<usize>()
            })
            .sum()
    }
}
