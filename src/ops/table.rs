//! The op table: every `aten.*` (and `_operator`, `math`, `torch.sym_*`) target pt2web knows,
//! with what each backend has for it. One table for the whole crate: the CPU interpreter, the
//! meta device (shapes and dtypes), the Plan builder and `pt2web check` all read it. The GPU
//! backend keeps its entries beside its kernels (`src/gpu/kernels/`) and is checked against
//! this table (`tests/op_table.rs`): every target with a GPU kernel has a CPU kernel and a
//! shape rule here.
//!
//! A family (`src/ops/<family>/`) registers each target it owns: its CPU kernel
//! ([`OpTable::cpu`]) in the family's kernel files, its shape rule ([`OpTable::rule`]) in
//! the family's `meta.rs`. A registration is either exact (`aten.add.Tensor`) or for every
//! overload of an op (`aten.add`, whose kernel reads its arguments by name); per backend, an
//! exact entry wins over the op-wide one.

use super::Kernel;
use crate::meta::Rule;
use std::collections::HashMap;

/// One registered name and what each backend has for it.
#[derive(Debug, Clone)]
pub struct OpDef {
    /// The target (`aten.layer_norm.default`) or, for an op-wide entry, the op (`aten.add`).
    pub name: String,
    /// Whether the entry covers every overload of `name`.
    pub any_overload: bool,
    /// The family that registered it (`norm`, `conv`, ...): the folder under `src/ops/`.
    pub family: &'static str,
    /// The CPU kernel.
    pub cpu: Option<Kernel>,
    /// The shape and dtype rule (meta device).
    pub rule: Option<Rule>,
    /// The CPU kernel of nodes that read or write complex tensors (None: such a node is
    /// refused with an error naming the op): the plan binds it instead of `cpu` (see
    /// [`OpTable::kernel_for`]), so real kernels never see complex data.
    pub complex: Option<Kernel>,
}

/// Targets → [`OpDef`]s.
#[derive(Default)]
pub struct OpTable {
    defs: Vec<OpDef>,
    exact: HashMap<String, usize>,
    any: HashMap<String, usize>,
    family: &'static str,
}

impl OpTable {
    /// The family the next registrations belong to.
    pub(crate) fn set_family(&mut self, family: &'static str) {
        self.family = family;
    }

    fn entry(&mut self, name: &str, any_overload: bool) -> &mut OpDef {
        let map = if any_overload {
            &mut self.any
        } else {
            &mut self.exact
        };
        let i = match map.get(name) {
            Some(&i) => i,
            None => {
                self.defs.push(OpDef {
                    name: name.to_string(),
                    any_overload,
                    family: self.family,
                    cpu: None,
                    rule: None,
                    complex: None,
                });
                map.insert(name.to_string(), self.defs.len() - 1);
                self.defs.len() - 1
            }
        };
        &mut self.defs[i]
    }

    /// The CPU kernel of one exact target.
    pub fn cpu(&mut self, target: &str, k: Kernel) {
        self.entry(target, false).cpu = Some(k);
    }
    /// The CPU kernel of every overload of an op (`aten.add` covers `aten.add.Tensor`,
    /// `aten.add.Scalar`...).
    pub fn cpu_op(&mut self, op: &str, k: Kernel) {
        self.entry(op, true).cpu = Some(k);
    }
    /// One exact target with its CPU kernel and its shape rule: the one declaration of a
    /// target (`r.define("aten.im2col.default", im2col, im2col_rule)`).
    pub fn define(&mut self, target: &str, k: Kernel, r: Rule) {
        let d = self.entry(target, false);
        d.cpu = Some(k);
        d.rule = Some(r);
    }
    /// [`OpTable::define`] for every overload of an op.
    pub fn define_op(&mut self, op: &str, k: Kernel, r: Rule) {
        let d = self.entry(op, true);
        d.cpu = Some(k);
        d.rule = Some(r);
    }
    /// [`OpTable::define`] for a target whose kernel serves complex tensors too.
    pub fn define_complex(&mut self, target: &str, k: Kernel, r: Rule) {
        self.define(target, k, r);
        self.entry(target, false).complex = Some(k);
    }
    /// The kernel of `name` (an exact target or an op) when its node reads or writes
    /// complex tensors; `name` must be registered already (by the family that owns it).
    pub fn complex(&mut self, name: &str, k: Kernel) {
        self.registered(name).complex = Some(k);
    }
    /// Complex tensors go through `name`'s own CPU kernel (data movement that is generic
    /// over the element type: views, copies).
    pub fn complex_same(&mut self, name: &str) {
        let d = self.registered(name);
        d.complex = d.cpu;
    }
    /// The entry already registered as `name` (exact first, then op-wide).
    fn registered(&mut self, name: &str) -> &mut OpDef {
        let i = self.exact.get(name).or_else(|| self.any.get(name));
        match i {
            Some(&i) => &mut self.defs[i],
            None => panic!("{name} is not registered: register its family first"),
        }
    }
    /// The shape rule of one exact target.
    pub fn rule(&mut self, target: &str, r: Rule) {
        self.entry(target, false).rule = Some(r);
    }
    /// The shape rule of every overload of an op.
    pub fn rule_op(&mut self, op: &str, r: Rule) {
        self.entry(op, true).rule = Some(r);
    }
    /// [`OpTable::rule_op`] for `aten.NAME`, for each name.
    pub fn rule_aten(&mut self, names: &[&str], r: Rule) {
        for n in names {
            self.rule_op(&format!("aten.{n}"), r);
        }
    }

    /// The entries a target resolves to, most specific first: the exact target, then the
    /// op-wide entry of its op (`aten.add` for `aten.add.Tensor`), then an op-wide entry
    /// named like the whole target (`_operator.add`).
    fn candidates(&self, target: &str) -> impl Iterator<Item = &OpDef> {
        let base = target.rsplit_once('.').map(|(b, _)| b).unwrap_or(target);
        [
            self.exact.get(target),
            self.any.get(base),
            self.any.get(target),
        ]
        .into_iter()
        .flatten()
        .map(|&i| &self.defs[i])
    }

    /// The CPU kernel that runs `target`.
    pub fn cpu_kernel(&self, target: &str) -> Option<Kernel> {
        self.candidates(target).find_map(|d| d.cpu)
    }
    /// The kernel a node runs: its target's CPU kernel, or where the node reads or writes
    /// a complex tensor (by the graph's tensor metadata, so this is decided once, when the
    /// plan is built) the target's complex kernel, or one that refuses with a clear error.
    pub fn kernel_for(
        &self,
        node: &crate::program::Node,
        graph: &crate::program::Graph,
    ) -> Option<Kernel> {
        let k = self.cpu_kernel(&node.target);
        if k.is_none() || !touches_complex(node, graph) {
            return k;
        }
        Some(
            self.complex_kernel(&node.target)
                .unwrap_or(no_complex_kernel),
        )
    }
    /// The kernel of `target` for nodes with complex tensors, if it has one.
    pub fn complex_kernel(&self, target: &str) -> Option<Kernel> {
        self.candidates(target).find_map(|d| d.complex)
    }
    /// The shape rule of `target`.
    pub fn shape_rule(&self, target: &str) -> Option<Rule> {
        self.candidates(target).find_map(|d| d.rule)
    }
    /// The family that owns `target` (the first entry that resolves it).
    pub fn family_of(&self, target: &str) -> Option<&'static str> {
        self.candidates(target).next().map(|d| d.family)
    }

    /// Every entry, in registration order.
    pub fn defs(&self) -> &[OpDef] {
        &self.defs
    }
    /// The names with a CPU kernel, sorted (for `pt2web check` and docs).
    pub fn cpu_names(&self) -> Vec<String> {
        self.names_where(|d| d.cpu.is_some())
    }
    /// The names with a shape rule, sorted.
    pub fn rule_names(&self) -> Vec<String> {
        self.names_where(|d| d.rule.is_some())
    }
    fn names_where(&self, f: impl Fn(&OpDef) -> bool) -> Vec<String> {
        let mut v: Vec<String> = self
            .defs
            .iter()
            .filter(|d| f(d))
            .map(|d| d.name.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// Whether one of the node's tensor arguments or results is complex (by the graph's
/// metadata of its values).
pub fn touches_complex(node: &crate::program::Node, graph: &crate::program::Graph) -> bool {
    let mut ids = Vec::new();
    node.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
    node.outputs.iter().for_each(|a| a.values(&mut ids));
    ids.iter().any(|&id| {
        matches!(
            graph.values.get(id).map(|v| &v.kind),
            Some(crate::program::ValueKind::Tensor { dtype, .. }) if dtype.is_complex()
        )
    })
}

/// The kernel of a node that reads or writes complex tensors where its op has no complex
/// kernel.
fn no_complex_kernel(ctx: &mut super::OpCtx) -> crate::error::Result<Vec<crate::runtime::RValue>> {
    Err(ctx.err(format!(
        "{} does not support complex tensors yet (complex64/complex128 run on the CPU for: \
         view_as_complex/view_as_real, arithmetic, abs/angle/exp, sum/mean, copies, views, \
         FFTs; see `pt2web check`)",
        ctx.target()
    )))
}
