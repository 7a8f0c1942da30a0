//! Conversion of the serialized graph (schema types) into the IR, resolving every value name.

use super::graph::*;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::schema as s;
use crate::sym::{self, Expr};

/// How symbolic expressions are spelled in this file: sympy `srepr` (torch ≥ 2.6) or `str()`
/// (torch 2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExprStyle {
    Srepr,
    Infix,
}

pub(crate) struct Builder<'a> {
    pub file: &'a str,
    pub style: ExprStyle,
    pub limits: &'a Limits,
    pub nodes_seen: usize,
}

impl Builder<'_> {
    pub fn expr(&self, what: &str, src: &str) -> Result<Expr> {
        // Try the file's own spelling first and report its error if neither parser succeeds.
        let r = match self.style {
            ExprStyle::Srepr => {
                sym::parse_srepr(src).or_else(|e| sym::parse_infix(src).map_err(|_| e))
            }
            ExprStyle::Infix => {
                sym::parse_infix(src).or_else(|e| sym::parse_srepr(src).map_err(|_| e))
            }
        };
        r.map_err(|e| {
            Error::schema(
                self.file,
                format!("{what}: cannot parse symbolic expression '{src}': {e}"),
            )
        })
    }

    pub fn dim(&self, what: &str, v: &s::SymInt) -> Result<Dim> {
        Ok(match v {
            s::SymInt::AsInt(i) => Dim::Static(*i),
            s::SymInt::AsExpr(e) => {
                let x = self.expr(what, &e.expr_str)?;
                match x {
                    Expr::Int(c) => Dim::Static(c),
                    x => Dim::Sym(x),
                }
            }
        })
    }

    pub fn graph(&mut self, g: &s::Graph, depth: usize) -> Result<Graph> {
        if depth > self.limits.max_depth {
            return Err(Error::limit(
                format!("{}: subgraph nesting depth", self.file),
                depth as u64,
                self.limits.max_depth as u64,
            ));
        }
        self.nodes_seen += g.nodes.len();
        if self.nodes_seen > self.limits.max_nodes {
            return Err(Error::limit(
                format!("{}: graph nodes", self.file),
                self.nodes_seen as u64,
                self.limits.max_nodes as u64,
            ));
        }
        let mut out = Graph {
            is_single_tensor_return: g.is_single_tensor_return,
            ..Default::default()
        };
        let add = |out: &mut Graph, name: &str, kind: ValueKind| -> Result<()> {
            if out.by_name.contains_key(name) {
                return Err(Error::Verify(format!(
                    "{}: value '{name}' is declared twice",
                    self.file
                )));
            }
            out.by_name.insert(name.to_string(), out.values.len());
            out.values.push(Value {
                name: name.to_string(),
                kind,
            });
            Ok(())
        };
        for (name, m) in &g.tensor_values {
            if m.sizes.len() > self.limits.max_rank {
                return Err(Error::limit(
                    format!("rank of '{name}'"),
                    m.sizes.len() as u64,
                    self.limits.max_rank as u64,
                ));
            }
            let what = format!("tensor '{name}'");
            let sizes = m
                .sizes
                .iter()
                .map(|d| self.dim(&what, d))
                .collect::<Result<Vec<_>>>()?;
            let strides = m
                .strides
                .iter()
                .map(|d| self.dim(&what, d))
                .collect::<Result<Vec<_>>>()?;
            add(
                &mut out,
                name,
                ValueKind::Tensor {
                    dtype: m.dtype,
                    sizes,
                    strides,
                    requires_grad: m.requires_grad,
                },
            )?;
        }
        for (name, v) in &g.sym_int_values {
            let d = self.dim(&format!("sym int '{name}'"), v)?;
            add(&mut out, name, ValueKind::SymInt(d))?;
        }
        for (name, v) in &g.sym_float_values {
            let e = match v {
                s::SymFloat::AsExpr(e) => {
                    Some(self.expr(&format!("sym float '{name}'"), &e.expr_str)?)
                }
                s::SymFloat::AsFloat(_) => None,
            };
            add(&mut out, name, ValueKind::SymFloat(e))?;
        }
        for (name, v) in &g.sym_bool_values {
            let e = match v {
                s::SymBool::AsExpr(e) => {
                    Some(self.expr(&format!("sym bool '{name}'"), &e.expr_str)?)
                }
                s::SymBool::AsBool(_) => None,
            };
            add(&mut out, name, ValueKind::SymBool(e))?;
        }
        for (name, c) in &g.custom_obj_values {
            add(
                &mut out,
                name,
                ValueKind::CustomObj {
                    class_fqn: c.class_fqn.clone(),
                },
            )?;
        }
        // Tokens (effect ordering) appear only as arguments; declare them on first sight.
        let mut token_names = Vec::new();
        collect_tokens(g, &mut token_names);
        for t in token_names {
            if !out.by_name.contains_key(&t) {
                add(&mut out, &t, ValueKind::Token)?;
            }
        }
        out.inputs = g
            .inputs
            .iter()
            .map(|a| self.arg(&mut out, a, "graph input", depth))
            .collect::<Result<_>>()?;
        for n in &g.nodes {
            let target = n
                .target
                .strip_prefix("torch.ops.")
                .unwrap_or(&n.target)
                .to_string();
            let ctx = format!("node '{}' ({target})", n.name.clone().unwrap_or_default());
            let inputs = n
                .inputs
                .iter()
                .map(|na| Ok((na.name.clone(), self.arg(&mut out, &na.arg, &ctx, depth)?)))
                .collect::<Result<Vec<_>>>()?;
            let outputs = n
                .outputs
                .iter()
                .map(|a| self.arg(&mut out, a, &ctx, depth))
                .collect::<Result<_>>()?;
            out.nodes.push(Node {
                name: n.name.clone().unwrap_or_default(),
                target,
                inputs,
                outputs,
                metadata: kept_metadata(&n.metadata),
            });
        }
        out.outputs = g
            .outputs
            .iter()
            .map(|a| self.arg(&mut out, a, "graph output", depth))
            .collect::<Result<_>>()?;
        Ok(out)
    }

    fn arg(&mut self, g: &mut Graph, a: &s::Argument, ctx: &str, depth: usize) -> Result<Arg> {
        use s::Argument as A;
        let id = |g: &Graph, name: &str| -> Result<ValueId> {
            g.id(name)
                .ok_or_else(|| Error::Verify(format!("{ctx}: uses undefined value '{name}'")))
        };
        let int_arg = |g: &Graph, x: &s::SymIntArgument| -> Result<IntArg> {
            Ok(match x {
                s::SymIntArgument::AsInt(i) => IntArg::Int(*i),
                s::SymIntArgument::AsName(n) => IntArg::Sym(id(g, n)?),
            })
        };
        let float_arg = |g: &Graph, x: &s::SymFloatArgument| -> Result<FloatArg> {
            Ok(match x {
                s::SymFloatArgument::AsFloat(f) => FloatArg::Float(f.0),
                s::SymFloatArgument::AsName(n) => FloatArg::Sym(id(g, n)?),
            })
        };
        let bool_arg = |g: &Graph, x: &s::SymBoolArgument| -> Result<BoolArg> {
            Ok(match x {
                s::SymBoolArgument::AsBool(b) => BoolArg::Bool(*b),
                s::SymBoolArgument::AsName(n) => BoolArg::Sym(id(g, n)?),
            })
        };
        let opt = |g: &Graph, x: &s::OptionalTensorArgument| -> Result<Option<ValueId>> {
            Ok(match x {
                s::OptionalTensorArgument::AsTensor(t) => Some(id(g, &t.name)?),
                s::OptionalTensorArgument::AsNone(_) => None,
            })
        };
        Ok(match a {
            A::AsNone(_) => Arg::None,
            A::AsTensor(t) => Arg::Tensor(id(g, &t.name)?),
            A::AsTensors(ts) => {
                Arg::Tensors(ts.iter().map(|t| id(g, &t.name)).collect::<Result<_>>()?)
            }
            A::AsNestedTensors(tss) => Arg::NestedTensors(
                tss.iter()
                    .map(|ts| ts.iter().map(|t| id(g, &t.name)).collect::<Result<_>>())
                    .collect::<Result<_>>()?,
            ),
            A::AsInt(i) => Arg::Int(*i),
            A::AsInts(v) => Arg::Ints(v.clone()),
            A::AsIntLists(v) => Arg::IntLists(v.clone()),
            A::AsFloat(f) => Arg::Float(f.0),
            A::AsFloats(v) => Arg::Floats(v.iter().map(|f| f.0).collect()),
            A::AsFloatLists(v) => {
                Arg::FloatLists(v.iter().map(|l| l.iter().map(|f| f.0).collect()).collect())
            }
            A::AsString(st) => Arg::Str(st.clone()),
            A::AsStrings(v) => Arg::Strs(v.clone()),
            A::AsSymInt(x) => Arg::SymInt(int_arg(g, x)?),
            A::AsSymInts(xs) => {
                Arg::SymInts(xs.iter().map(|x| int_arg(g, x)).collect::<Result<_>>()?)
            }
            A::AsSymFloat(x) => Arg::SymFloat(float_arg(g, x)?),
            A::AsSymFloats(xs) => {
                Arg::SymFloats(xs.iter().map(|x| float_arg(g, x)).collect::<Result<_>>()?)
            }
            A::AsSymBool(x) => Arg::SymBool(bool_arg(g, x)?),
            A::AsSymBools(xs) => {
                Arg::SymBools(xs.iter().map(|x| bool_arg(g, x)).collect::<Result<_>>()?)
            }
            A::AsScalarType(d) => Arg::ScalarType(*d),
            A::AsMemoryFormat(m) => Arg::MemoryFormat(*m),
            A::AsLayout(l) => Arg::Layout(*l),
            A::AsDevice(d) => Arg::Device(match d.index {
                Some(i) => format!("{}:{i}", d.type_),
                None => d.type_.clone(),
            }),
            A::AsBool(b) => Arg::Bool(*b),
            A::AsBools(v) => Arg::Bools(v.clone()),
            A::AsGraph(ga) => Arg::Graph(Box::new(self.graph(&ga.graph, depth + 1)?)),
            A::AsOptionalTensors(v) => {
                Arg::OptTensors(v.iter().map(|x| opt(g, x)).collect::<Result<_>>()?)
            }
            A::AsOptionalTensor(x) => Arg::OptTensor(opt(g, x)?),
            A::AsCustomObj(c) => Arg::CustomObj(id(g, &c.name)?),
            A::AsOperator(o) => Arg::Operator(o.clone()),
            A::AsComplex(c) => Arg::Complex(c.real.0, c.imag.0),
            A::AsStringToArgument(m) => Arg::StrMap(
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), self.arg(g, v, ctx, depth)?)))
                    .collect::<Result<_>>()?,
            ),
        })
    }
}

fn collect_tokens(g: &s::Graph, out: &mut Vec<String>) {
    let visit = |a: &s::Argument, out: &mut Vec<String>| {
        if let s::Argument::AsTensor(t) = a {
            if t.name.starts_with("token") && !g.tensor_values.contains_key(&t.name) {
                out.push(t.name.clone());
            }
        }
    };
    for a in g.inputs.iter().chain(&g.outputs) {
        visit(a, out);
    }
    for n in &g.nodes {
        for a in n.inputs.iter().map(|na| &na.arg).chain(&n.outputs) {
            visit(a, out);
        }
    }
}

/// The node metadata the IR keeps: all but the Python stack traces and `from_node`
/// provenance, which are most of its bytes (1.9 of the 3.2 MB a 600-node Llama's graph takes)
/// and which nothing in pt2web reads; the serialized program keeps them for the writer.
fn kept_metadata(
    m: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    m.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "stack_trace" | "from_node"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
