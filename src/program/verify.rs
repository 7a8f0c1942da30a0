//! Structural checks on a program: every value defined before use and once, the signature
//! matching the graph's inputs and outputs, and stored state matching the graph's metadata.

use super::graph::{Arg, Dim, Graph, ValueKind};
use super::{InputKind, Program};
use crate::error::{Error, Result};

pub(super) fn verify(p: &Program, file: &str) -> Result<()> {
    let g = &p.graph;
    let err = |m: String| Err(Error::Verify(format!("{file}: {m}")));
    if g.inputs.len() != p.inputs.len() {
        return err(format!(
            "the graph has {} inputs but the signature describes {}",
            g.inputs.len(),
            p.inputs.len()
        ));
    }
    for (i, (a, spec)) in g.inputs.iter().zip(&p.inputs).enumerate() {
        let name = placeholder_name(g, a);
        let constant = matches!(spec.kind, InputKind::ConstantValue { .. });
        if !constant && name.as_deref() != Some(spec.name.as_str()) {
            return err(format!(
                "graph input {i} is {name:?} but the signature names '{}'",
                spec.name
            ));
        }
    }
    if g.outputs.len() != p.outputs.len() {
        return err(format!(
            "the graph has {} outputs but the signature describes {}",
            g.outputs.len(),
            p.outputs.len()
        ));
    }
    for (i, (a, spec)) in g.outputs.iter().zip(&p.outputs).enumerate() {
        if matches!(spec.arg, Arg::None) {
            continue;
        }
        if *a != spec.arg {
            return err(format!("graph output {i} does not match its output spec"));
        }
    }
    check_def_use(g, file, &mut vec![false; g.values.len()], true)?;

    for spec in &p.inputs {
        let fqn = match &spec.kind {
            InputKind::Parameter { name }
            | InputKind::Buffer { name, .. }
            | InputKind::Constant { name } => name,
            _ => continue,
        };
        let Some(entry) = p.state.get(fqn) else {
            continue;
        };
        let Some(v) = p.input_value(&spec.name) else {
            return err(format!(
                "placeholder '{}' of '{fqn}' has no metadata",
                spec.name
            ));
        };
        if let ValueKind::Tensor { dtype, sizes, .. } = &v.kind {
            let t = &entry.tensor;
            let static_sizes: Option<Vec<usize>> = sizes
                .iter()
                .map(|d| {
                    if let Dim::Static(s) = d {
                        usize::try_from(*s).ok()
                    } else {
                        None
                    }
                })
                .collect();
            if *dtype != t.dtype || static_sizes.as_deref() != Some(&t.sizes[..]) {
                return err(format!(
                    "'{fqn}' is stored as {}{:?} but the graph expects {}[{}]",
                    t.dtype,
                    t.sizes,
                    dtype,
                    sizes
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        } else {
            return err(format!(
                "placeholder '{}' of '{fqn}' is not a tensor",
                spec.name
            ));
        }
    }
    Ok(())
}

fn placeholder_name(g: &Graph, a: &Arg) -> Option<String> {
    match a {
        Arg::Tensor(id) | Arg::CustomObj(id) => Some(g.value(*id).name.clone()),
        Arg::SymInt(super::IntArg::Sym(id))
        | Arg::SymFloat(super::FloatArg::Sym(id))
        | Arg::SymBool(super::BoolArg::Sym(id)) => Some(g.value(*id).name.clone()),
        _ => None,
    }
}

/// Walk nodes in order: every read value must already be defined; every value defined once.
/// Subgraphs have their own value tables and are checked on their own.
fn check_def_use(g: &Graph, file: &str, defined: &mut [bool], top: bool) -> Result<()> {
    let define = |a: &Arg, defined: &mut [bool], what: &str| -> Result<()> {
        let mut ids = Vec::new();
        a.values(&mut ids);
        for id in ids {
            if defined[id] {
                return Err(Error::Verify(format!(
                    "{file}: value '{}' is defined twice ({what})",
                    g.value(id).name
                )));
            }
            defined[id] = true;
        }
        Ok(())
    };
    for a in &g.inputs {
        define(a, defined, "graph input")?;
    }
    let _ = top;
    for n in &g.nodes {
        for (argname, a) in &n.inputs {
            if let Arg::Graph(sub) = a {
                check_def_use(sub, file, &mut vec![false; sub.values.len()], false)?;
                continue;
            }
            let mut ids = Vec::new();
            a.values(&mut ids);
            for id in ids {
                if !defined[id] {
                    return Err(Error::Verify(format!(
                        "{file}: node '{}' ({}) argument '{argname}' uses '{}' before it is defined",
                        n.name,
                        n.target,
                        g.value(id).name
                    )));
                }
            }
        }
        for o in &n.outputs {
            define(o, defined, &format!("output of node '{}'", n.name))?;
        }
    }
    for a in &g.outputs {
        let mut ids = Vec::new();
        a.values(&mut ids);
        for id in ids {
            if !defined[id] {
                return Err(Error::Verify(format!(
                    "{file}: graph output '{}' is never defined",
                    g.value(id).name
                )));
            }
        }
    }
    Ok(())
}
