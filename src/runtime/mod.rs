//! The interpreter: runs a program's graph node by node on the CPU backend, with torch.export
//! semantics (guards checked first; parameters, buffers and constants from the program state;
//! buffer mutations written back so the next call sees them; user-input mutations applied to
//! the caller's tensors).

mod inputs;
pub mod profile;
mod run_scope;
mod stop;
mod unwind;
mod value;

pub use inputs::order_named_inputs;
pub use profile::{OpEvent, OpSummary, Profiler};
pub(crate) use run_scope::RunScope;
pub(crate) use stop::Stop;
pub use stop::{CancelToken, RunOptions};
pub(crate) use unwind::{guarded, guarded_async};
pub use unwind::{inject_kernel_panic, panic_message};
pub use value::RValue;

use crate::cpu::Tensor;
use crate::error::{Error, Result};
use crate::ops::{table, OpCtx};
use crate::program::{Arg, Graph, InputKind, OutputKind, Program};
use crate::sym;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Mutable state of one run shared with kernels.
#[derive(Debug, Default)]
pub struct RunState {
    /// Dynamic symbol values bound from the inputs (`s0 -> 4`).
    pub bindings: sym::Bindings,
    /// Seeded generator for rand/randn/bernoulli/dropout-in-train.
    pub rng: Rng,
    /// The device default generator the session draws from ([`crate::random`]): `rng` is
    /// taken from it when a run starts and given back when it ends. `None`: `rng` is the
    /// session's own stream (`manual_seed`, `seed`, `set_rng_state`).
    pub(crate) generator: Option<Arc<crate::random::DeviceGenerator>>,
    /// The session's number in this process (from 1; profiler scopes tell sessions of
    /// programs with one name apart by it).
    pub(crate) session: u64,
    /// Nodes executed (including subgraphs).
    pub nodes_run: usize,
    /// Per-kernel timings while profiling (`Some`), see [`Profiler`].
    pub profiler: Option<Profiler>,
    /// The [`GraphPlan`](crate::plan::GraphPlan)s of the graphs run so far (the program's
    /// and its subgraphs'): kernels bound and liveness computed once per graph.
    pub graph_plans: crate::plan::GraphPlans,
    /// Weights in the form kernels read them (packed GEMM panels), derived on first use.
    pub prepared: crate::plan::Prepared,
    /// An activation the CPU's fused-epilogue kernel offers the convolution it runs next,
    /// which takes it when it applies it to its result's tiles.
    pub(crate) tile_act: Option<crate::ops::elementwise::epilogue::TileAct>,
    /// The run's cancel token and deadline ([`RunOptions`]), checked before each node.
    pub(crate) stop: Stop,
    /// The program's limits: iterations of one `while_loop`, bytes of one tensor (checked
    /// by kernels whose output size depends on tensor data).
    pub(crate) limits: crate::Limits,
}

impl RunState {
    /// Iterations one `while_loop` may run.
    pub(crate) fn loop_limit(&self) -> u64 {
        self.limits.max_loop_iterations
    }
}

/// A small, seedable generator (SplitMix64); streams are reproducible for a seed.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    pub initial_seed: u64,
}

impl Default for Rng {
    fn default() -> Self {
        Rng::new(0x5EED)
    }
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng {
            state: seed,
            initial_seed: seed,
        }
    }
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(f64::MIN_POSITIVE);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// The state: the seed plus `GAMMA` times the draws made so far (mod 2^64).
    pub fn state(&self) -> u64 {
        self.state
    }
    /// Skip `n` draws (what a GPU kernel that made them leaves behind).
    pub fn advance(&mut self, n: u64) {
        self.state = self
            .state
            .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    pub fn set_state(&mut self, s: u64) {
        self.state = s;
    }
    /// 16 bytes, `torch.get_rng_state`'s byte tensor: the state, then the initial seed
    /// (little-endian).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.state.to_le_bytes().to_vec();
        v.extend_from_slice(&self.initial_seed.to_le_bytes());
        v
    }
    /// The generator [`Rng::to_bytes`] gave `bytes`; other lengths are an input error
    /// naming `input`.
    pub fn from_bytes(bytes: &[u8], input: &str) -> Result<Rng> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        match (bytes.len(), word(0), word(1)) {
            (16, Some(state), Some(initial_seed)) => Ok(Rng {
                state,
                initial_seed,
            }),
            (n, ..) => Err(Error::Input {
                input: input.into(),
                msg: format!("expected the 16 bytes get_rng_state returns, got {n}"),
            }),
        }
    }
}

/// A seed from the clock, a process-wide counter and `salt` (`torch.seed`).
pub(crate) fn clock_seed(salt: u64) -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Rng::new(profile::now_ms().to_bits() ^ salt ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64()
}

/// Run a graph with its placeholders bound to `inputs` (in graph-input order).
pub fn run_graph(graph: &Graph, inputs: Vec<RValue>, st: &mut RunState) -> Result<Vec<RValue>> {
    if inputs.len() != graph.inputs.len() {
        return Err(Error::Verify(format!(
            "graph takes {} inputs, got {}",
            graph.inputs.len(),
            inputs.len()
        )));
    }
    let mut env: Vec<Option<RValue>> = vec![None; graph.values.len()];
    for (a, v) in graph.inputs.iter().zip(inputs) {
        bind(graph, &mut env, a, v)?;
    }
    // Kernels and liveness come from the graph's plan (built on the first run).
    let plan = st.graph_plans.get(graph);
    for step in &plan.steps {
        let node = &graph.nodes[step.node];
        st.stop.check(&node.name)?;
        let kernel = step
            .kernel
            .ok_or_else(|| crate::passes::decompose::unsupported(node, "cpu"))?;
        let start = st.profiler.as_mut().map(|p| {
            p.depth += 1;
            p.elapsed()
        });
        let verbose_start = (crate::backends::verbose() > 0).then(profile::now_ms);
        let outs = {
            let mut ctx = OpCtx {
                node,
                graph,
                env: &env,
                state: st,
            };
            guarded(node, || kernel(&mut ctx))
        };
        if let (Some(p), Some(start)) = (st.profiler.as_mut(), start) {
            p.depth -= 1;
            let dur_ms = p.elapsed() - start;
            p.events.push(OpEvent {
                node: node.name.clone(),
                target: node.target.clone(),
                start_ms: start,
                dur_ms,
                depth: p.depth,
                cat: "op",
            });
        }
        if let Some(t0) = verbose_start {
            let ms = profile::now_ms() - t0;
            let inputs = step.reads.iter().map(|&id| match env.get(id) {
                Some(Some(RValue::Tensor(t))) => Some((t.dtype, t.sizes.as_slice())),
                _ => None,
            });
            profile::verbose_kernel("cpu", node, inputs, "cpu", ms);
        }
        let outs = outs?;
        st.nodes_run += 1;
        if outs.len() < node.outputs.len() {
            return Err(Error::op(
                &node.target,
                format!(
                    "kernel returned {} values for {} outputs",
                    outs.len(),
                    node.outputs.len()
                ),
            ));
        }
        for (a, v) in node.outputs.iter().zip(outs) {
            bind(graph, &mut env, a, v).map_err(|e| Error::op(&node.target, e))?;
        }
        // Intermediates are dropped as soon as their last reader has run.
        for &id in &step.frees {
            env[id] = None;
        }
    }
    graph
        .outputs
        .iter()
        .map(|a| {
            let ctx_env = &env;
            resolve_output(graph, ctx_env, a)
        })
        .collect()
}

fn resolve_output(graph: &Graph, env: &[Option<RValue>], a: &Arg) -> Result<RValue> {
    let get = |id: usize| -> Result<RValue> {
        env[id].clone().ok_or_else(|| {
            Error::Verify(format!(
                "output '{}' was never computed",
                graph.value(id).name
            ))
        })
    };
    Ok(match a {
        Arg::Tensor(id) => get(*id)?,
        Arg::SymInt(crate::program::IntArg::Sym(id)) => get(*id)?,
        Arg::SymInt(crate::program::IntArg::Int(i)) | Arg::Int(i) => RValue::Int(*i),
        Arg::Tensors(ids) => RValue::Tensors(
            ids.iter()
                .map(|id| {
                    get(*id).and_then(|v| {
                        v.as_tensor()
                            .cloned()
                            .ok_or_else(|| Error::Verify("not a tensor".into()))
                    })
                })
                .collect::<Result<_>>()?,
        ),
        Arg::Float(f) => RValue::Float(*f),
        Arg::Bool(b) => RValue::Bool(*b),
        Arg::None => RValue::None,
        other => return Err(Error::Verify(format!("unsupported graph output {other:?}"))),
    })
}

/// Bind a node output or graph input `a` to the value `v` in `env`.
pub(crate) fn bind(graph: &Graph, env: &mut [Option<RValue>], a: &Arg, v: RValue) -> Result<()> {
    match (a, v) {
        (Arg::None, _) => {}
        (Arg::Tensor(id), v @ RValue::Tensor(_)) => env[*id] = Some(v),
        (Arg::Tensor(id), RValue::Tensors(mut ts)) if ts.len() == 1 => {
            env[*id] = Some(RValue::Tensor(ts.remove(0)))
        }
        (Arg::Tensors(ids), RValue::Tensors(ts)) => {
            if ids.len() > ts.len() {
                return Err(Error::Verify(format!(
                    "expected {} tensors, got {}",
                    ids.len(),
                    ts.len()
                )));
            }
            for (id, t) in ids.iter().zip(ts) {
                env[*id] = Some(RValue::Tensor(t));
            }
        }
        (Arg::OptTensors(ids), RValue::Tensors(ts)) => {
            for (id, t) in ids.iter().zip(ts) {
                if let Some(id) = id {
                    env[*id] = Some(RValue::Tensor(t));
                }
            }
        }
        (Arg::SymInt(crate::program::IntArg::Sym(id)), v @ (RValue::Int(_) | RValue::Float(_))) => {
            env[*id] = Some(v)
        }
        (Arg::SymFloat(crate::program::FloatArg::Sym(id)), v) => env[*id] = Some(v),
        (Arg::SymBool(crate::program::BoolArg::Sym(id)), v) => env[*id] = Some(v),
        (Arg::CustomObj(id), v) => env[*id] = Some(v),
        // Constant placeholders (ints, floats...) carry their value in the graph itself.
        (
            Arg::Int(_)
            | Arg::Float(_)
            | Arg::Bool(_)
            | Arg::Str(_)
            | Arg::SymInt(crate::program::IntArg::Int(_)),
            _,
        ) => {}
        (a, v) => {
            let name = {
                let mut ids = Vec::new();
                a.values(&mut ids);
                ids.first()
                    .map(|i| graph.value(*i).name.clone())
                    .unwrap_or_default()
            };
            return Err(Error::Verify(format!(
                "cannot bind a {} to '{name}' ({a:?})",
                v.kind()
            )));
        }
    }
    Ok(())
}

/// A loaded program ready to run on the CPU, holding its state (mutated buffers persist
/// between calls, as module buffers do in eager PyTorch).
pub struct Session {
    pub program: Arc<Program>,
    /// Parameters, buffers and constants as CPU tensors, by FQN.
    pub state: BTreeMap<String, Tensor>,
    pub run_state: RunState,
    /// torch's `guards_code`, parsed; checked (with the shape guards) once per input
    /// signature, when its Plan is built.
    guards: Vec<sym::GuardCode>,
    /// Plans by input signature (bounded; see [`crate::plan`]).
    pub plans: crate::plan::PlanCache,
    /// What the graph passes did to the program when the session was created.
    pub passes: crate::passes::PassReport,
}

/// A user input as given by the caller.
pub type Inputs = Vec<RValue>;

impl Session {
    /// A session over `program` after the graph passes of [`crate::backends::graph_passes`].
    pub fn new(program: Program) -> Result<Session> {
        let set = crate::backends::session_graph_passes().map_err(Error::Verify)?;
        Session::with_passes(program, set)
    }

    /// A session over `program` after the graph passes `set` (whatever the process-wide
    /// choice).
    pub fn with_passes(program: Program, set: crate::passes::PassSet) -> Result<Session> {
        Session::with_state_sink(program, set, &mut |_, _, _| Ok(()))
    }

    /// [`Session::with_passes`] that hands each state tensor to `sink` as soon as it is made
    /// (a GPU session uploads it there and drops its host copy). With weights deferred in a
    /// file ([`crate::tensor::Storage::deferred`]) each one is read only then, so the host
    /// never holds more than one record besides what the session keeps.
    pub(crate) fn with_state_sink(
        program: Program,
        set: crate::passes::PassSet,
        sink: &mut dyn FnMut(&Program, &str, &Tensor) -> Result<()>,
    ) -> Result<Session> {
        let mut build = SessionBuild::new(program, set);
        while !build.is_done() {
            build.step(sink)?;
        }
        build.finish()
    }

    /// Prepare the program for user inputs of these dtypes and shapes (and scalar values)
    /// without running it: inputs checked against the guards, the meta pass, the memory
    /// estimate (see [`crate::plan`]). The next run with that signature starts from the
    /// Plan; a run with a signature never prepared builds its Plan first.
    pub fn prepare(&mut self, inputs: &[crate::meta::MValue]) -> Result<Arc<crate::plan::Plan>> {
        let sig = crate::plan::meta_signature(inputs);
        self.plan_for(sig)
    }

    /// The Plan of a signature, from the cache or built now (the signature checked against
    /// the program and its guards first, [`crate::plan::bind_signature`]).
    pub fn plan_for(&mut self, sig: crate::plan::Signature) -> Result<Arc<crate::plan::Plan>> {
        if let Some(p) = self.plans.get(&sig) {
            self.plans.hits += 1;
            return Ok(p);
        }
        self.plans.misses += 1;
        let start = profile::now_ms();
        let bindings = crate::plan::bind_signature(&self.program, &sig, &self.guards)?;
        self.run_state.graph_plans.get(&self.program.graph);
        let mut plan = crate::plan::Plan::build(&self.program, sig, bindings);
        crate::plan::budget::check(&self.program, &plan)?;
        plan.prepare_ms = profile::now_ms() - start;
        let plan = Arc::new(plan);
        self.plans.insert(plan.clone());
        Ok(plan)
    }

    /// Keep Plans for at most `n` input signatures (default
    /// [`crate::plan::DEFAULT_PLAN_CAPACITY`]); the least recently used go first.
    pub fn set_plan_capacity(&mut self, n: usize) {
        self.plans.set_capacity(n);
    }

    /// Ops of the program (and its subgraphs) that the CPU backend cannot run.
    pub fn unsupported_ops(program: &Program) -> Vec<String> {
        let reg = table();
        program
            .graph
            .op_histogram()
            .into_keys()
            .filter(|t| reg.cpu_kernel(t).is_none())
            .collect()
    }

    /// Check the user inputs (count, dtype, rank, guards) and bind the dynamic symbols.
    pub fn check_inputs(&self, inputs: &[RValue]) -> Result<sym::Bindings> {
        crate::plan::bind_signature(&self.program, &crate::plan::signature(inputs), &self.guards)
    }

    /// Seed the generator of the random ops (`torch.manual_seed`): the same seed gives the
    /// same streams on the CPU and the GPU device. The session then draws from a stream of
    /// its own, no longer from its device's default generator ([`crate::random`]).
    pub fn manual_seed(&mut self, seed: u64) {
        self.run_state.rng = Rng::new(seed);
        self.run_state.generator = None;
    }

    /// Seed the generator from the clock and return the seed (`torch.seed`).
    pub fn seed(&mut self) -> u64 {
        let seed = clock_seed(self as *const Session as u64);
        self.manual_seed(seed);
        seed
    }

    /// The generator the session draws from: its own, or its device's default one.
    fn current_rng(&self) -> Rng {
        match &self.run_state.generator {
            Some(g) => g.rng(),
            None => self.run_state.rng.clone(),
        }
    }

    /// The seed the generator started from (`torch.initial_seed`).
    pub fn initial_seed(&self) -> u64 {
        self.current_rng().initial_seed
    }

    /// The generator's state as 16 bytes (current state, initial seed; little-endian), as
    /// `torch.get_rng_state` returns a byte tensor.
    pub fn get_rng_state(&self) -> Vec<u8> {
        self.current_rng().to_bytes()
    }

    /// Restore a state from [`Session::get_rng_state`] (the session's own stream from now on).
    pub fn set_rng_state(&mut self, bytes: &[u8]) -> Result<()> {
        self.run_state.rng = Rng::from_bytes(bytes, "rng_state")?;
        self.run_state.generator = None;
        Ok(())
    }

    /// [`Session::run`] that `options` may stop (a cancel token, a timeout): the run ends
    /// with [`Error::Cancelled`] before the next node, and the session stays usable.
    pub fn run_options(&mut self, inputs: Inputs, options: &RunOptions) -> Result<Vec<RValue>> {
        self.run_state.stop = Stop::start(options);
        let r = self.run(inputs);
        self.run_state.stop = Stop::default();
        r
    }

    /// Run with flattened user inputs (pytree order); returns flattened user outputs.
    pub fn run(&mut self, inputs: Inputs) -> Result<Vec<RValue>> {
        let scope = RunScope::begin(&mut self.run_state);
        let r = self.run_in_scope(inputs);
        scope.end(&mut self.run_state, &self.program.name, "cpu");
        r
    }

    /// [`Session::run`] once the run holds its generator and profiler ([`RunScope`]).
    fn run_in_scope(&mut self, inputs: Inputs) -> Result<Vec<RValue>> {
        let plan = self.plan_for(crate::plan::signature(&inputs))?;
        crate::plan::budget::reserve(&plan)?;
        self.run_state.bindings = plan.bindings.clone();
        let p = self.program.clone();
        let mut user = inputs.clone().into_iter();
        let mut graph_inputs = Vec::with_capacity(p.inputs.len());
        for spec in &p.inputs {
            graph_inputs.push(match &spec.kind {
                InputKind::User => user.next().unwrap_or(RValue::None),
                InputKind::Parameter { name }
                | InputKind::Buffer { name, .. }
                | InputKind::Constant { name } => RValue::Tensor(
                    self.state
                        .get(name)
                        .cloned()
                        .ok_or_else(|| Error::Verify(format!("state '{name}' missing")))?,
                ),
                InputKind::ConstantValue { value } => match value {
                    crate::schema::ConstantValue::AsInt(i) => RValue::Int(*i),
                    crate::schema::ConstantValue::AsFloat(f) => RValue::Float(f.0),
                    crate::schema::ConstantValue::AsBool(b) => RValue::Bool(*b),
                    crate::schema::ConstantValue::AsString(s) => RValue::Str(s.clone()),
                    crate::schema::ConstantValue::AsNone(_) => RValue::None,
                },
                // torch's effect tokens are empty tensors; `with_effects` threads them.
                InputKind::Token => RValue::Tensor(Tensor::from_vec(Vec::<f32>::new(), &[0])),
                InputKind::CustomObj { name } => {
                    return Err(Error::op(
                        "custom object",
                        format!("'{name}' (torchbind objects are not supported)"),
                    ))
                }
            });
        }
        let run_state = &mut self.run_state;
        // On the calling thread, which takes a share of each op's split (`fork_each`).
        let outs = run_graph(&p.graph, graph_inputs, run_state)?;
        let user_names: Vec<String> = p.user_inputs().iter().map(|u| u.name.clone()).collect();
        let mut result = Vec::new();
        for (spec, v) in p.outputs.iter().zip(outs) {
            match &spec.kind {
                OutputKind::User => result.push(v),
                OutputKind::BufferMutation { buffer }
                | OutputKind::ParameterMutation { parameter: buffer } => {
                    let RValue::Tensor(t) = v else { continue };
                    // Write into the existing storage so views of the buffer see the update.
                    match self.state.get(buffer) {
                        Some(old) if old.sizes == t.sizes => old.copy_from(&t)?,
                        _ => {
                            self.state.insert(buffer.clone(), t);
                        }
                    }
                }
                OutputKind::UserInputMutation { input } => {
                    let RValue::Tensor(t) = v else { continue };
                    if let Some(i) = user_names.iter().position(|n| n == input) {
                        if let RValue::Tensor(dst) = &inputs[i] {
                            dst.copy_from(&t)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(result)
    }
}

/// A [`Session`] made one state tensor at a time ([`Session::with_state_sink`] in steps), so
/// that a caller can fetch each weight's bytes between steps: the browser's streaming load
/// on the main thread, which cannot read the network synchronously, downloads the record the
/// next step reads ([`SessionBuild::next_reads`]), then steps ([`crate::js`]'s
/// `WasmGpuBuild`).
pub(crate) struct SessionBuild {
    program: Program,
    passes: crate::passes::PassReport,
    /// State FQNs in the order the steps make them.
    order: Vec<String>,
    next: usize,
    state: BTreeMap<String, Tensor>,
    /// Tensors that share a storage in the archive (tied weights, views of a buffer) share
    /// one CPU storage too, so an in-place update of one is seen through the others.
    shared: BTreeMap<(usize, crate::DType), Tensor>,
    /// State tensors left to make per storage: a deferred one's archive bytes are released
    /// after the last (a streamed archive frees them then, [`crate::archive::stream`]).
    left: std::collections::HashMap<usize, usize>,
}

impl SessionBuild {
    /// Run the graph passes `set` over `program`; no state tensor is made yet.
    pub(crate) fn new(mut program: Program, set: crate::passes::PassSet) -> SessionBuild {
        let passes = crate::passes::run(&mut program, set);
        let mut left: std::collections::HashMap<usize, usize> = Default::default();
        for e in program.state.values() {
            *left.entry(e.tensor.storage.id()).or_default() += 1;
        }
        SessionBuild {
            order: program.state.keys().cloned().collect(),
            program,
            passes,
            next: 0,
            state: BTreeMap::new(),
            shared: BTreeMap::new(),
            left,
        }
    }

    /// Whether every state tensor was made.
    pub(crate) fn is_done(&self) -> bool {
        self.next >= self.order.len()
    }

    /// The archive records the steps left read, in the order they read them (each once): a
    /// state tensor reads its storage's record unless a tensor made before shares it.
    // Read by the browser's main-thread load (src/js/stream.rs) only.
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) fn next_reads(&self) -> Vec<Arc<crate::archive::source::EntryBytes>> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for fqn in &self.order[self.next.min(self.order.len())..] {
            let Some(e) = self.program.state.get(fqn) else {
                continue;
            };
            let key = (e.tensor.storage.id(), e.tensor.dtype);
            if self.shared.contains_key(&key) || !seen.insert(key) {
                continue;
            }
            if let Some(d) = e.tensor.storage.deferred_entry() {
                out.push(d.clone());
            }
        }
        out
    }

    /// Make the next state tensor and hand it to `sink`. A step whose record cannot be read
    /// fails before it changes anything, so it can be tried again once the bytes are there.
    pub(crate) fn step(
        &mut self,
        sink: &mut dyn FnMut(&Program, &str, &Tensor) -> Result<()>,
    ) -> Result<()> {
        let Some(fqn) = self.order.get(self.next) else {
            return Ok(());
        };
        let e = &self.program.state[fqn];
        let key = (e.tensor.storage.id(), e.tensor.dtype);
        let t = match self.shared.get(&key) {
            Some(base) => base.view_with(
                e.tensor.sizes.clone(),
                e.tensor.strides.clone(),
                e.tensor.storage_offset,
            ),
            None => {
                let t = Tensor::from_host(&e.tensor)?;
                self.shared.insert(key, t.clone());
                t
            }
        };
        self.next += 1;
        if let Some(n) = self.left.get_mut(&e.tensor.storage.id()) {
            *n -= 1;
            if let (0, Some(d)) = (*n, e.tensor.storage.deferred_entry()) {
                d.release();
            }
        }
        sink(&self.program, fqn, &t)?;
        self.state.insert(fqn.clone(), t);
        Ok(())
    }

    /// The session, once every step ran.
    pub(crate) fn finish(self) -> Result<Session> {
        let SessionBuild {
            mut program,
            passes,
            order,
            next,
            state,
            shared,
            ..
        } = self;
        if next < order.len() {
            return Err(Error::Verify(format!(
                "internal: a session was finished after {next} of its {} state tensors",
                order.len()
            )));
        }
        // The session holds the state now: the archive's bytes of it are not kept too.
        drop(shared);
        program.release_state_bytes();
        // A guard pt2web cannot parse is an error now rather than a silently skipped check.
        let guards = program
            .guards_code
            .iter()
            .map(|g| {
                sym::GuardCode::parse(g)
                    .map_err(|e| Error::Verify(format!("guards_code `{g}`: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut run_state = RunState {
            limits: program.limits,
            generator: Some(crate::random::cpu()),
            session: run_scope::next_session(),
            ..RunState::default()
        };
        run_state.prepared.freeze(&program, &state);
        Ok(Session {
            program: Arc::new(program),
            state,
            run_state,
            guards,
            plans: crate::plan::PlanCache::default(),
            passes,
        })
    }
}
