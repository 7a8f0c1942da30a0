//! Input binding, one for every walker: the user inputs of a call (as a [`Signature`]:
//! dtypes and sizes, scalar values) checked against the program (count, dtype, rank), its
//! shape guards and range constraints and torch's `guards_code`, binding the dynamic
//! symbols. The CPU interpreter ([`crate::runtime::Session::check_inputs`], the Plan
//! cache), the GPU executor (through the Session) and the meta pass
//! ([`crate::meta::bind_inputs`]) all bind through [`bind_signature`].

use super::{InputSig, Signature};
use crate::error::{Error, Result};
use crate::program::{Dim, Program, ValueKind};
use crate::sym::{self, Bindings, DimSpec, InputShapeSpec};

impl InputSig {
    /// The kind of value, named as [`crate::runtime::RValue::kind`] names it.
    pub fn kind(&self) -> &'static str {
        match self {
            InputSig::Tensor { .. } => "Tensor",
            InputSig::Int(_) => "int",
            InputSig::Float(_) => "float",
            InputSig::Bool(_) => "bool",
            InputSig::Str(_) => "str",
            InputSig::Other(k) => k,
        }
    }
}

/// Check the user inputs `sig` (flattened pytree order) against `program` and bind its
/// dynamic symbols; `guards` is the program's `guards_code`, parsed.
pub fn bind_signature(
    program: &Program,
    sig: &Signature,
    guards: &[sym::GuardCode],
) -> Result<Bindings> {
    let users = program.user_inputs();
    if sig.len() != users.len() {
        let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
        return Err(Error::Input {
            input: if sig.len() < users.len() {
                names[sig.len()].to_string()
            } else {
                format!("#{}", users.len())
            },
            msg: format!(
                "the program takes {} user inputs ({}), got {}",
                users.len(),
                names.join(", "),
                sig.len()
            ),
        });
    }
    let mut specs = Vec::new();
    let mut shapes: Vec<(String, Vec<i64>)> = Vec::new();
    for (u, v) in users.iter().zip(sig) {
        let Some(val) = program.input_value(&u.name) else {
            continue;
        };
        let bad = |msg: String| Error::Input {
            input: u.name.clone(),
            msg,
        };
        match (&val.kind, v) {
            (
                ValueKind::Tensor { dtype, sizes, .. },
                InputSig::Tensor {
                    dtype: got,
                    sizes: got_sizes,
                },
            ) => {
                if got != dtype {
                    return Err(bad(format!("expected dtype {dtype}, got {got}")));
                }
                if got_sizes.len() != sizes.len() {
                    return Err(bad(format!(
                        "expected rank {} ([{}]), got shape {got_sizes:?}",
                        sizes.len(),
                        sizes
                            .iter()
                            .map(Dim::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                    )));
                }
                specs.push(InputShapeSpec {
                    name: u.name.clone(),
                    dims: sizes
                        .iter()
                        .map(|d| match d {
                            Dim::Static(s) => DimSpec::Static(*s),
                            Dim::Sym(e) => DimSpec::Sym(e.clone()),
                        })
                        .collect(),
                });
                shapes.push((
                    u.name.clone(),
                    got_sizes.iter().map(|&s| s as i64).collect(),
                ));
            }
            (ValueKind::Tensor { .. }, other) => {
                return Err(bad(format!("expected a tensor, got {}", other.kind())))
            }
            (ValueKind::SymInt(Dim::Sym(e)), InputSig::Int(i)) => {
                if let Some(s) = e.as_symbol() {
                    shapes.push((format!("{}#", u.name), vec![*i]));
                    specs.push(InputShapeSpec {
                        name: format!("{}#", u.name),
                        dims: vec![DimSpec::Sym(sym::Expr::Symbol(s.to_string()))],
                    });
                }
            }
            _ => {}
        }
    }
    let actual: Vec<(&str, &[i64])> = shapes
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_slice()))
        .collect();
    let bindings = sym::check_shapes(&specs, &actual, &program.range_constraints)?;
    let lookup = |r: &sym::GuardRef| -> Option<i64> {
        let name = match r.path.as_slice() {
            // A module whose forward torch.export traced through a wrapper taking the
            // flattened inputs (transformers' static-cache export): its guards name them by
            // position, `L['flat_args'][i]`, the i-th user input in pytree order.
            [sym::PathKey::Key(k), sym::PathKey::Index(i)]
                if k == "flat_args" && !users.iter().any(|u| u.name.starts_with("flat_args")) =>
            {
                users.get(usize::try_from(*i).ok()?)?.name.clone()
            }
            _ => r.flat_name(),
        };
        shapes
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, s)| r.read(s))
    };
    for g in guards {
        g.check(&lookup)?;
    }
    Ok(bindings)
}
