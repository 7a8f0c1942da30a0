//! Load-time f16 execution of a float32 program (`LoadOptions::dtype`, `pt2web run/generate
//! --dtype f16`, JS `load(url, { dtype: 'float16' })`): the program's float32 computation
//! becomes float16, so its weights and activations take half the memory and bandwidth, while
//! its signature stays the same (float32 inputs are converted on entry, float32 outputs on
//! exit).
//!
//! What becomes f16 follows the data, not the op:
//! - the seeds: float32 parameters, the buffers the program mutates (a KV cache) and float32
//!   user inputs (through one `_to_copy` at the start of the graph);
//! - every float32 result of a node that reads an f16 value; its other float32 operands are
//!   converted at that node (one `_to_copy` each, folded at load where they are constants),
//!   and its `dtype=torch.float32` arguments become float16.
//!
//! What derives only from integers, constants and unmutated buffers stays float32: rotary
//! position angles (positions times `inv_freq`), masks, `arange`s. Rounding those to f16
//! would put errors of a radian into the angles of late positions; they meet the f16
//! activations already computed, and are rounded once there.
//!
//! The kernels do the rest as torch does for f16: matrix products, reductions, softmax and
//! norm statistics accumulate in f32 and round once per op. On the GPU this needs the
//! adapter's `shader-f16` (a session refuses such a program without it); the CPU runs it
//! too (f32 math, one rounding per op: what torch's CPU kernels compute for f16).
//!
//! Not yet: programs with control-flow subgraphs (`cond`, `while_loop`, `map`) and programs
//! that mutate a float32 user input; both are refused with the reason.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::program::{Arg, Graph, InputKind, Node, OutputKind, Program, Value, ValueId, ValueKind};
use crate::tensor::{HostTensor, Storage};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The dtype a program computes in after loading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// As the archive has it.
    #[default]
    Keep,
    /// float32 computation as float16 ([`to_f16`]).
    F16,
}

impl std::str::FromStr for Precision {
    type Err = String;
    /// `f32` / `float32` / `keep`, or `f16` / `float16` / `half`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "f32" | "float32" | "keep" => Ok(Precision::Keep),
            "f16" | "float16" | "half" => Ok(Precision::F16),
            _ => Err(format!("expected f32 or f16 (float32, float16), got '{s}'")),
        }
    }
}

/// What [`to_f16`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HalfReport {
    /// State tensors converted, and their bytes before and after.
    pub tensors: usize,
    pub f32_bytes: usize,
    pub f16_bytes: usize,
    /// Nodes computing in f16, and those left in f32.
    pub f16_nodes: usize,
    pub f32_nodes: usize,
    /// Conversions added (inputs, operands, outputs).
    pub casts: usize,
}

/// Whether `v` is a float32 tensor of `g`.
fn is_f32(values: &[Value], v: ValueId) -> bool {
    matches!(
        values[v].kind,
        ValueKind::Tensor {
            dtype: DType::F32,
            ..
        }
    )
}

fn set_dtype(values: &mut [Value], v: ValueId, d: DType) {
    if let ValueKind::Tensor { dtype, .. } = &mut values[v].kind {
        *dtype = d;
    }
}

/// Rewrite `p` to compute its float32 work in float16 (module doc).
pub fn to_f16(p: &mut Program) -> Result<HalfReport> {
    let refuse = |why: String| Err(Error::Verify(format!("dtype float16: {why}")));
    if let Some(n) = p
        .graph
        .nodes
        .iter()
        .find(|n| n.inputs.iter().any(|(_, a)| matches!(a, Arg::Graph(_))))
    {
        return refuse(format!(
            "programs with control flow ({} at node '{}') are not converted yet; load without dtype",
            n.target, n.name
        ));
    }
    let mutated: BTreeSet<String> = p.mutated_state();
    for o in &p.outputs {
        if let OutputKind::UserInputMutation { input } = &o.kind {
            return refuse(format!(
                "the program mutates its input '{input}'; load without dtype"
            ));
        }
    }
    let mut report = HalfReport::default();
    let placeholders = p.graph.inputs.clone();
    let state_of: HashMap<ValueId, &str> = p
        .inputs
        .iter()
        .zip(&placeholders)
        .filter_map(|(spec, a)| match (a, state_name(&spec.kind)) {
            (Arg::Tensor(v), Some(name)) => Some((*v, name)),
            _ => None,
        })
        .collect();
    let user: BTreeSet<ValueId> = p
        .inputs
        .iter()
        .zip(&placeholders)
        .filter_map(|(spec, a)| match (&spec.kind, a) {
            (InputKind::User, Arg::Tensor(v)) if is_f32(&p.graph.values, *v) => Some(*v),
            _ => None,
        })
        .collect();

    // Seeds: parameters and mutated buffers; then, until nothing changes, the state and the
    // intermediates an f16 node writes into in place (training IR: `index_copy_` into a
    // KV cache the signature does not list), which must be f16 where they are defined.
    let mut seed_state: BTreeSet<String> = p
        .inputs
        .iter()
        .filter_map(|spec| match &spec.kind {
            InputKind::Parameter { name } => Some(name.clone()),
            InputKind::Buffer { name, .. } if mutated.contains(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    let mut forced = vec![false; p.graph.values.len()];
    let (converted, half_nodes, mut is_half) = loop {
        // State sharing a storage with a seed is converted with it (tied weights).
        let seed_storages: BTreeSet<usize> = seed_state
            .iter()
            .filter_map(|n| p.state.get(n))
            .map(|e| e.tensor.storage.id())
            .collect();
        let converted: BTreeSet<String> = p
            .state
            .iter()
            .filter(|(_, e)| {
                e.tensor.dtype == DType::F32 && seed_storages.contains(&e.tensor.storage.id())
            })
            .map(|(n, _)| n.clone())
            .collect();
        let mut seeds = forced.clone();
        for (&v, name) in &state_of {
            seeds[v] |= converted.contains(*name) && is_f32(&p.graph.values, v);
        }
        for &v in &user {
            seeds[v] = true;
        }
        let (is_half, half_nodes) = classify(&p.graph, &seeds);
        let mut grew = false;
        for (n, _) in p.graph.nodes.iter().zip(&half_nodes).filter(|(_, h)| **h) {
            let Some(w) = written(n) else { continue };
            if is_half[w] || !is_f32(&p.graph.values, w) {
                continue;
            }
            if user.contains(&w) {
                return refuse(format!(
                    "node '{}' ({}) writes into the input '{}'; load without dtype",
                    n.name, n.target, p.graph.values[w].name
                ));
            }
            match state_of.get(&w) {
                Some(name) => seed_state.insert(name.to_string()),
                None => !std::mem::replace(&mut forced[w], true),
            };
            grew = true;
        }
        if !grew {
            break (converted, half_nodes, is_half);
        }
    };

    let g = &mut p.graph;
    for (v, h) in is_half.iter().enumerate() {
        if *h && !user.contains(&v) {
            set_dtype(&mut g.values, v, DType::F16);
        }
    }
    // The user inputs' conversions open the graph; their readers read the f16 copies.
    let mut fresh = Fresh::new(&g.by_name);
    let mut nodes: Vec<Node> = Vec::with_capacity(g.nodes.len() + user.len());
    let mut renamed: HashMap<ValueId, ValueId> = HashMap::new();
    for &v in &user {
        let (c, cast) = fresh.convert(g, v, DType::F16);
        is_half.push(true);
        nodes.push(cast);
        renamed.insert(v, c);
        report.casts += 1;
    }
    // One conversion per float32 value read by f16 nodes.
    let mut cast_of: HashMap<ValueId, ValueId> = HashMap::new();
    for (mut n, half_node) in std::mem::take(&mut g.nodes).into_iter().zip(half_nodes) {
        for (_, a) in n.inputs.iter_mut() {
            map_values(a, &mut |v| *renamed.get(&v).unwrap_or(&v));
        }
        if !half_node {
            report.f32_nodes += 1;
            nodes.push(n);
            continue;
        }
        let mut ins = Vec::new();
        n.inputs.iter().for_each(|(_, a)| a.values(&mut ins));
        // Its float32 operands, converted.
        for v in ins {
            if is_half[v] || !is_f32(&g.values, v) || cast_of.contains_key(&v) {
                continue;
            }
            let (c, cast) = fresh.convert(g, v, DType::F16);
            is_half.push(true);
            nodes.push(cast);
            cast_of.insert(v, c);
            report.casts += 1;
        }
        for (_, a) in n.inputs.iter_mut() {
            map_values(a, &mut |v| *cast_of.get(&v).unwrap_or(&v));
            if let Arg::ScalarType(d) = a {
                if *d == DType::F32 {
                    *d = DType::F16;
                }
            }
        }
        report.f16_nodes += 1;
        nodes.push(n);
    }

    // Outputs: the user's back to float32; mutations in the dtype of their state.
    let state_dtype = |name: &str| {
        if converted.contains(name) {
            DType::F16
        } else {
            DType::F32
        }
    };
    for i in 0..p.outputs.len() {
        let want = match &p.outputs[i].kind {
            OutputKind::User | OutputKind::Loss => DType::F32,
            OutputKind::BufferMutation { buffer } => state_dtype(buffer),
            OutputKind::ParameterMutation { parameter } => state_dtype(parameter),
            _ => continue,
        };
        let mut a = p.outputs[i].arg.clone();
        map_values(&mut a, &mut |v| {
            let have = match g.values[v].kind {
                ValueKind::Tensor { dtype, .. } => dtype,
                _ => return v,
            };
            // f16 results of the conversion go back to float32 for the user; float32
            // values written into converted state become f16.
            let back = want == DType::F32 && have == DType::F16 && is_half[v];
            let into = want == DType::F16 && have == DType::F32;
            if !(back || into) {
                return v;
            }
            let (c, cast) = fresh.convert(g, v, want);
            is_half.push(want == DType::F16);
            nodes.push(cast);
            report.casts += 1;
            c
        });
        p.outputs[i].arg = a.clone();
        if let Some(ga) = g.outputs.get_mut(i) {
            *ga = a;
        }
    }
    g.nodes = nodes;

    // The state itself, one storage at a time (views of one storage stay views of one).
    let mut new_storage: HashMap<usize, Storage> = HashMap::new();
    for name in &converted {
        let e = p.state.get_mut(name).expect("converted state entry");
        let id = e.tensor.storage.id();
        let s = match new_storage.get(&id) {
            Some(s) => s.clone(),
            None => {
                let b = e.tensor.storage.load()?;
                if !b.len().is_multiple_of(4) {
                    return refuse(format!(
                        "the storage of '{name}' is {} bytes, not whole float32s",
                        b.len()
                    ));
                }
                let mut out = Vec::with_capacity(b.len() / 2);
                for w in b.chunks_exact(4) {
                    let x = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    out.extend_from_slice(&half::f16::from_f32(x).to_le_bytes());
                }
                report.f32_bytes += b.len();
                report.f16_bytes += out.len();
                let s = Storage::new(out);
                new_storage.insert(id, s.clone());
                s
            }
        };
        let t = &e.tensor;
        e.tensor = HostTensor::new(
            name,
            DType::F16,
            t.sizes.clone(),
            t.strides.clone(),
            t.storage_offset,
            s,
        )?;
        report.tensors += 1;
    }
    p.precision = Precision::F16;
    Ok(report)
}

/// Which values, and which nodes, compute in f16 given the `seeds`: a node reading an f16
/// value or defining a seed is an f16 node, and its float32 results are f16.
fn classify(g: &Graph, seeds: &[bool]) -> (Vec<bool>, Vec<bool>) {
    let mut half = seeds.to_vec();
    let mut nodes = Vec::with_capacity(g.nodes.len());
    let (mut ins, mut outs) = (Vec::new(), Vec::new());
    for n in &g.nodes {
        ins.clear();
        outs.clear();
        n.inputs.iter().for_each(|(_, a)| a.values(&mut ins));
        n.outputs.iter().for_each(|a| a.values(&mut outs));
        let h = ins.iter().chain(&outs).any(|&v| half[v]);
        if h {
            for &o in &outs {
                half[o] |= is_f32(&g.values, o);
            }
        }
        nodes.push(h);
    }
    (half, nodes)
}

/// The value an in-place (`index_copy_`) or `out=` node writes into.
fn written(n: &Node) -> Option<ValueId> {
    let (op, overload) = n.target.rsplit_once('.')?;
    let key = if super::dce::writes_an_input(op.rsplit('.').next()?, overload) {
        if overload.starts_with("out") || overload.ends_with("_out") {
            "out"
        } else {
            "self"
        }
    } else {
        return None;
    };
    match n.arg(key) {
        Some(Arg::Tensor(v)) => Some(*v),
        _ => None,
    }
}

fn state_name(k: &InputKind) -> Option<&str> {
    match k {
        InputKind::Parameter { name }
        | InputKind::Buffer { name, .. }
        | InputKind::Constant { name } => Some(name),
        _ => None,
    }
}

/// Replace every value `a` reads by `f(value)`.
fn map_values(a: &mut Arg, f: &mut impl FnMut(ValueId) -> ValueId) {
    match a {
        Arg::Tensor(v) => *v = f(*v),
        Arg::Tensors(vs) => vs.iter_mut().for_each(|v| *v = f(*v)),
        Arg::OptTensor(Some(v)) => *v = f(*v),
        Arg::OptTensors(vs) => vs.iter_mut().flatten().for_each(|v| *v = f(*v)),
        Arg::NestedTensors(vss) => vss.iter_mut().flatten().for_each(|v| *v = f(*v)),
        Arg::StrMap(m) => m.values_mut().for_each(|a| map_values(a, f)),
        _ => {}
    }
}

/// New values and conversion nodes with names the graph does not have.
struct Fresh {
    taken: BTreeMap<String, ValueId>,
    next: usize,
}

impl Fresh {
    fn new(by_name: &BTreeMap<String, ValueId>) -> Self {
        Fresh {
            taken: by_name.clone(),
            next: 0,
        }
    }

    fn name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        while self.taken.contains_key(&name) {
            self.next += 1;
            name = format!("{base}_{}", self.next);
        }
        name
    }

    /// A value shaped like `like`, of dtype `d`.
    fn value(
        &mut self,
        g: &mut crate::program::Graph,
        base: &str,
        like: ValueId,
        d: DType,
    ) -> ValueId {
        let name = self.name(base);
        let mut kind = g.values[like].kind.clone();
        if let ValueKind::Tensor { dtype, .. } = &mut kind {
            *dtype = d;
        }
        let id = g.values.len();
        g.values.push(Value {
            name: name.clone(),
            kind,
        });
        g.by_name.insert(name.clone(), id);
        self.taken.insert(name, id);
        id
    }

    /// `x` converted to `d`: a new value `<x>_f16` / `<x>_float32` and the node defining it.
    fn convert(&mut self, g: &mut crate::program::Graph, x: ValueId, d: DType) -> (ValueId, Node) {
        let suffix = if d == DType::F16 { "f16" } else { d.name() };
        let base = format!("{}_{suffix}", g.values[x].name);
        let c = self.value(g, &base, x, d);
        (c, self.cast(x, c, d))
    }

    /// `out = aten._to_copy(x, dtype=d)`.
    fn cast(&mut self, x: ValueId, out: ValueId, d: DType) -> Node {
        let name = self.name(&format!("pt2web_to_{}", d.name()));
        self.taken.insert(name.clone(), usize::MAX);
        Node {
            name,
            target: "aten._to_copy.default".into(),
            inputs: vec![
                ("self".into(), Arg::Tensor(x)),
                ("dtype".into(), Arg::ScalarType(d)),
            ],
            outputs: vec![Arg::Tensor(out)],
            metadata: BTreeMap::new(),
        }
    }
}
