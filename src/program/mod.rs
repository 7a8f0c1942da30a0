//! The validated program IR: graph, signature, state, pytree specs, dynamic symbols.
//!
//! A [`Program`] is what `torch.export.load` returns, without Python: the graph with resolved
//! values, the graph signature mapping placeholders to parameters/buffers/constants/user
//! inputs, the state by fully qualified name, the input/output TreeSpecs, the range
//! constraints of the dynamic symbols, and the module call graph.

mod build;
pub mod graph;
mod verify;

pub use build::ExprStyle;
pub use graph::{Arg, BoolArg, Dim, FloatArg, Graph, IntArg, Node, Value, ValueId, ValueKind};

use crate::archive::pt2::{Layout, LoadOptions, Payload, Pt2File, RawProgram};
use crate::error::{Error, Result};
use crate::pickle::PyValue;
use crate::pytree::TreeSpec;
use crate::schema;
use crate::sym::RangeConstraint;
use crate::tensor::HostTensor;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a graph input is, per the graph signature.
#[derive(Debug, Clone, PartialEq)]
pub enum InputKind {
    User,
    Parameter {
        name: String,
    },
    Buffer {
        name: String,
        persistent: bool,
    },
    Constant {
        name: String,
    },
    CustomObj {
        name: String,
    },
    Token,
    /// A non-tensor constant input (`constant_input` spec): its value is baked in.
    ConstantValue {
        value: schema::ConstantValue,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    /// Placeholder name in the graph.
    pub name: String,
    pub kind: InputKind,
}

/// What a graph output is, per the graph signature.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputKind {
    User,
    Loss,
    BufferMutation { buffer: String },
    ParameterMutation { parameter: String },
    UserInputMutation { input: String },
    GradientToParameter { parameter: String },
    GradientToUserInput { input: String },
    Token,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    /// The graph output argument (a tensor, a sym int or a constant).
    pub arg: Arg,
    pub kind: OutputKind,
}

/// The kind of state a tensor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    Parameter,
    Buffer { persistent: bool },
    Constant,
}

/// One tensor of the program's state.
#[derive(Debug, Clone, PartialEq)]
pub struct StateEntry {
    pub kind: StateKind,
    pub tensor: HostTensor,
    /// The archive entry its storage came from (tensors that share one share storage).
    pub path_name: String,
}

/// Which IR the graph is in: `torch.export.export` gives the training IR; after
/// `run_decompositions()` the graph is core ATen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrKind {
    Training,
    CoreAten,
}

impl IrKind {
    pub fn name(self) -> &'static str {
        match self {
            IrKind::Training => "training",
            IrKind::CoreAten => "core_aten",
        }
    }
}

/// A module's calling convention in `module_call_graph`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleCall {
    pub fqn: String,
    pub in_spec: Option<TreeSpec>,
    pub out_spec: Option<TreeSpec>,
    pub forward_arg_names: Vec<String>,
}

/// The program as the archive serialized it, held as deflated JSON: only the writer reads it
/// (to save the program back), and parsed it is the largest thing a loaded program keeps
/// besides its weights (3.5 MB for a 600-node Llama; about 0.3 MB deflated).
#[derive(Clone)]
pub struct Serialized(Arc<[u8]>);

impl Serialized {
    pub fn new(ep: &schema::ExportedProgram) -> Result<Serialized> {
        use std::io::Write;
        let err = |e: &dyn std::fmt::Display| Error::Verify(format!("serialized program: {e}"));
        let json = serde_json::to_vec(ep).map_err(|e| err(&e))?;
        let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(1))
            .large_file(json.len() >= u32::MAX as usize);
        z.start_file("program.json", opts).map_err(|e| err(&e))?;
        z.write_all(&json).map_err(|e| err(&e))?;
        let bytes = z.finish().map_err(|e| err(&e))?.into_inner();
        Ok(Serialized(bytes.into()))
    }

    /// The program as serialized.
    pub fn get(&self) -> Result<schema::ExportedProgram> {
        use std::io::Read;
        let err = |e: &dyn std::fmt::Display| Error::Verify(format!("serialized program: {e}"));
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(&self.0[..])).map_err(|e| err(&e))?;
        let mut f = z.by_index(0).map_err(|e| err(&e))?;
        let mut json = Vec::new();
        f.read_to_end(&mut json).map_err(|e| err(&e))?;
        serde_json::from_slice(&json).map_err(|e| err(&e))
    }
}

impl std::fmt::Debug for Serialized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Serialized({} bytes deflated)", self.0.len())
    }
}

/// A validated exported program.
#[derive(Debug, Clone)]
pub struct Program {
    pub name: String,
    pub graph: Graph,
    pub inputs: Vec<InputSpec>,
    pub outputs: Vec<OutputSpec>,
    /// Parameters, buffers and tensor constants by fully qualified name.
    pub state: BTreeMap<String, StateEntry>,
    /// Range constraints of the dynamic symbols, keyed as torch keys them (`s0`, `s0 + 1`).
    pub range_constraints: BTreeMap<String, RangeConstraint>,
    /// The root module's call signature (`module_call_graph[0]`, fqn "").
    pub in_spec: Option<TreeSpec>,
    pub out_spec: Option<TreeSpec>,
    pub module_call_graph: Vec<ModuleCall>,
    pub verifiers: Vec<String>,
    pub ir: IrKind,
    pub guards_code: Vec<String>,
    pub torch_version: Option<String>,
    pub schema_version: (i64, i64),
    pub opset_version: BTreeMap<String, i64>,
    pub metadata: BTreeMap<String, String>,
    pub custom_objects: Vec<String>,
    pub sample_inputs: Option<std::result::Result<PyValue, String>>,
    /// How the file spelled symbolic expressions.
    pub expr_style: ExprStyle,
    /// The program as serialized (the writer saves it back with the current state).
    pub serialized: Serialized,
    /// The pickled sample inputs as stored.
    pub sample_inputs_bytes: Option<Vec<u8>>,
    /// What loading made of its float32 computation (`LoadOptions::dtype`):
    /// [`Precision::F16`] after [`crate::passes::half::to_f16`].
    pub precision: crate::passes::half::Precision,
    /// The limits it was loaded under; runs keep to them too (`max_loop_iterations`).
    pub limits: crate::Limits,
}

impl Program {
    /// The state (parameters and buffers, by name) that outputs of the graph signature
    /// mutate.
    pub fn mutated_state(&self) -> std::collections::BTreeSet<String> {
        self.outputs
            .iter()
            .filter_map(|o| match &o.kind {
                OutputKind::BufferMutation { buffer } => Some(buffer.clone()),
                OutputKind::ParameterMutation { parameter } => Some(parameter.clone()),
                _ => None,
            })
            .collect()
    }

    /// Drop the bytes of every state tensor ([`crate::tensor::Storage::released`]), keeping
    /// dtypes, shapes, lengths and sharing: a session does this once it holds the state in its
    /// own form, so the archive's copy of the weights is not kept next to it. Returns the
    /// bytes dropped (storages other handles still share are freed when those go too).
    pub fn release_state_bytes(&mut self) -> usize {
        let mut released: std::collections::HashMap<usize, crate::tensor::Storage> =
            Default::default();
        let mut bytes = 0;
        for e in self.state.values_mut() {
            let st = &mut e.tensor.storage;
            if st.is_released() {
                continue;
            }
            let r = released.entry(st.id()).or_insert_with(|| {
                bytes += st.len();
                crate::tensor::Storage::released(st.len())
            });
            *st = r.clone();
        }
        bytes
    }

    /// Validate a raw program into the IR.
    pub fn from_raw(raw: RawProgram, style: ExprStyle, limits: &crate::Limits) -> Result<Program> {
        let serialized = Serialized::new(&raw.ep)?;
        let ep = raw.ep;
        let gm = ep.graph_module;
        let mut b = build::Builder {
            file: &raw.file,
            style,
            limits,
            nodes_seen: 0,
        };
        let graph = b.graph(&gm.graph, 0)?;

        let inputs = gm
            .signature
            .input_specs
            .iter()
            .map(input_spec)
            .collect::<Vec<_>>();
        let outputs = gm
            .signature
            .output_specs
            .iter()
            .map(|o| output_spec(&graph, o))
            .collect::<Result<Vec<_>>>()?;

        let mut state = BTreeMap::new();
        let take = |fqn: &str, from: &BTreeMap<String, Payload>, what: &str| -> Result<Payload> {
            from.get(fqn).cloned().ok_or_else(|| {
                Error::Verify(format!(
                    "{}: the signature lifts {what} '{fqn}' but the archive holds no such tensor",
                    raw.file
                ))
            })
        };
        for spec in &inputs {
            let (fqn, kind, payload) = match &spec.kind {
                InputKind::Parameter { name } => (
                    name,
                    StateKind::Parameter,
                    take(name, &raw.weights, "parameter")?,
                ),
                InputKind::Buffer { name, persistent } => {
                    // torch stores non-persistent buffers with the constants.
                    let p = take(name, &raw.weights, "buffer")
                        .or_else(|_| take(name, &raw.constants, "buffer"))?;
                    (
                        name,
                        StateKind::Buffer {
                            persistent: *persistent,
                        },
                        p,
                    )
                }
                InputKind::Constant { name } => (
                    name,
                    StateKind::Constant,
                    take(name, &raw.constants, "tensor constant")?,
                ),
                _ => continue,
            };
            state.insert(
                fqn.clone(),
                StateEntry {
                    kind,
                    tensor: payload.tensor,
                    path_name: payload.path_name,
                },
            );
        }

        let nt: BTreeMap<String, Vec<String>> = gm
            .treespec_namedtuple_fields
            .iter()
            .map(|(k, v)| (k.clone(), v.field_names.clone()))
            .collect();
        let mut module_call_graph = Vec::new();
        for e in &gm.module_call_graph {
            let (in_spec, out_spec, names) = match &e.signature {
                Some(sig) => (
                    Some(TreeSpec::parse(&sig.in_spec, &nt, limits.max_depth)?),
                    Some(TreeSpec::parse(&sig.out_spec, &nt, limits.max_depth)?),
                    sig.forward_arg_names.clone().unwrap_or_default(),
                ),
                None => (None, None, vec![]),
            };
            module_call_graph.push(ModuleCall {
                fqn: e.fqn.clone(),
                in_spec,
                out_spec,
                forward_arg_names: names,
            });
        }
        let root = module_call_graph.iter().find(|m| m.fqn.is_empty());
        let (in_spec, out_spec) = (
            root.and_then(|m| m.in_spec.clone()),
            root.and_then(|m| m.out_spec.clone()),
        );

        let range_constraints = ep
            .range_constraints
            .iter()
            .map(|(k, r)| {
                (
                    k.clone(),
                    RangeConstraint {
                        min: r.min_val.unwrap_or(i64::MIN),
                        max: r.max_val,
                    },
                )
            })
            .collect();
        // torch records the dialect as the verifier name; older files have none, so fall back
        // to looking for ops that only the training IR contains.
        let ir = if ep.verifiers.iter().any(|v| v == "TRAINING") {
            IrKind::Training
        } else if ep.verifiers.iter().any(|v| v == "ATEN")
            || !graph.op_histogram().keys().any(|t| is_training_only(t))
        {
            IrKind::CoreAten
        } else {
            IrKind::Training
        };
        let p = Program {
            name: raw.name,
            graph,
            inputs,
            outputs,
            state,
            range_constraints,
            in_spec,
            out_spec,
            module_call_graph,
            verifiers: ep.verifiers,
            ir,
            guards_code: ep.guards_code,
            torch_version: ep.torch_version,
            schema_version: (ep.schema_version.major, ep.schema_version.minor),
            opset_version: ep.opset_version,
            metadata: gm.metadata,
            custom_objects: raw.custom_objects,
            sample_inputs: raw.sample_inputs,
            expr_style: style,
            serialized,
            sample_inputs_bytes: raw.sample_inputs_bytes,
            precision: Default::default(),
            limits: *limits,
        };
        verify::verify(&p, &raw.file)?;
        Ok(p)
    }

    /// Whether output `i` is a buffer or parameter mutation whose value is that state's own
    /// placeholder: the graph wrote the state in place (`passes::reinplace`), so a runtime
    /// has nothing to write back.
    pub fn mutation_in_place(&self, i: usize) -> bool {
        let state = match self.outputs.get(i).map(|o| &o.kind) {
            Some(OutputKind::BufferMutation { buffer }) => buffer,
            Some(OutputKind::ParameterMutation { parameter }) => parameter,
            _ => return false,
        };
        let Some(out) = self.graph.outputs.get(i) else {
            return false;
        };
        self.inputs.iter().zip(&self.graph.inputs).any(|(spec, a)| {
            let name = match &spec.kind {
                InputKind::Buffer { name, .. } | InputKind::Parameter { name } => name,
                _ => return false,
            };
            name == state && a == out
        })
    }
    /// Placeholder names of the user inputs, in flattened pytree order.
    pub fn user_inputs(&self) -> Vec<&InputSpec> {
        self.inputs
            .iter()
            .filter(|i| i.kind == InputKind::User)
            .collect()
    }
    /// The graph value of a placeholder.
    pub fn input_value(&self, name: &str) -> Option<&Value> {
        self.graph.id(name).map(|id| self.graph.value(id))
    }
    /// Graph outputs that are user outputs, in flattened pytree order.
    pub fn user_outputs(&self) -> Vec<&OutputSpec> {
        self.outputs
            .iter()
            .filter(|o| o.kind == OutputKind::User)
            .collect()
    }
    /// `named_parameters()`.
    pub fn named_parameters(&self) -> impl Iterator<Item = (&str, &HostTensor)> {
        self.state
            .iter()
            .filter(|(_, e)| e.kind == StateKind::Parameter)
            .map(|(k, e)| (k.as_str(), &e.tensor))
    }
    /// `named_buffers()` (persistent and not).
    pub fn named_buffers(&self) -> impl Iterator<Item = (&str, &HostTensor)> {
        self.state
            .iter()
            .filter(|(_, e)| matches!(e.kind, StateKind::Buffer { .. }))
            .map(|(k, e)| (k.as_str(), &e.tensor))
    }
    /// `constants` (tensor constants).
    pub fn named_constants(&self) -> impl Iterator<Item = (&str, &HostTensor)> {
        self.state
            .iter()
            .filter(|(_, e)| e.kind == StateKind::Constant)
            .map(|(k, e)| (k.as_str(), &e.tensor))
    }
    /// `state_dict()`: parameters and persistent buffers, as torch's ExportedProgram.state_dict.
    pub fn state_dict(&self) -> BTreeMap<&str, &HostTensor> {
        self.state
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e.kind,
                    StateKind::Parameter | StateKind::Buffer { persistent: true }
                )
            })
            .map(|(k, e)| (k.as_str(), &e.tensor))
            .collect()
    }
    /// Dynamic symbols of the user inputs' shapes.
    pub fn dynamic_symbols(&self) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        for i in self.user_inputs() {
            if let Some(Value {
                kind: ValueKind::Tensor { sizes, .. },
                ..
            }) = self.input_value(&i.name)
            {
                for d in sizes {
                    if let Dim::Sym(e) = d {
                        out.extend(e.free_symbols());
                    }
                }
            }
        }
        out
    }
}

/// Ops that exist only in the training IR (core ATen decomposes them).
fn is_training_only(target: &str) -> bool {
    const T: &[&str] = &[
        "aten.linear.",
        "aten.conv2d.",
        "aten.conv1d.",
        "aten.conv3d.",
        "aten.batch_norm.",
        "aten.layer_norm.",
        "aten.dropout.",
        "aten.scaled_dot_product_attention.",
        "aten.matmul.",
        "aten.add_.",
        "aten.relu_.",
        "aten.hardswish_.",
        "aten.adaptive_avg_pool2d.",
        "aten.flatten.",
        "aten.group_norm.",
        "aten.embedding.",
        "aten.softmax.",
        "aten.gelu_.",
        "aten.reshape.",
        "aten.contiguous.",
    ];
    T.iter().any(|p| target.starts_with(p))
}

fn input_spec(s: &schema::InputSpec) -> InputSpec {
    use schema::InputSpec as S;
    let arg_name = |a: &schema::Argument| -> String {
        match a {
            schema::Argument::AsTensor(t) => t.name.clone(),
            schema::Argument::AsSymInt(schema::SymIntArgument::AsName(n)) => n.clone(),
            schema::Argument::AsSymFloat(schema::SymFloatArgument::AsName(n)) => n.clone(),
            schema::Argument::AsSymBool(schema::SymBoolArgument::AsName(n)) => n.clone(),
            schema::Argument::AsCustomObj(c) => c.name.clone(),
            other => format!("<{}>", other.kind()),
        }
    };
    match s {
        S::UserInput(u) => InputSpec {
            name: arg_name(&u.arg),
            kind: InputKind::User,
        },
        S::Parameter(p) => InputSpec {
            name: p.arg.name.clone(),
            kind: InputKind::Parameter {
                name: p.parameter_name.clone(),
            },
        },
        S::Buffer(b) => InputSpec {
            name: b.arg.name.clone(),
            kind: InputKind::Buffer {
                name: b.buffer_name.clone(),
                persistent: b.persistent,
            },
        },
        S::TensorConstant(c) => InputSpec {
            name: c.arg.name.clone(),
            kind: InputKind::Constant {
                name: c.tensor_constant_name.clone(),
            },
        },
        S::CustomObj(c) => InputSpec {
            name: c.arg.name.clone(),
            kind: InputKind::CustomObj {
                name: c.custom_obj_name.clone(),
            },
        },
        S::Token(t) => InputSpec {
            name: t.arg.name.clone(),
            kind: InputKind::Token,
        },
        S::ConstantInput(c) => InputSpec {
            name: c.name.clone(),
            kind: InputKind::ConstantValue {
                value: c.value.clone(),
            },
        },
    }
}

fn output_spec(g: &Graph, s: &schema::OutputSpec) -> Result<OutputSpec> {
    use schema::OutputSpec as S;
    let t = |a: &schema::TensorArgument| -> Result<Arg> {
        g.id(&a.name)
            .map(Arg::Tensor)
            .ok_or_else(|| Error::Verify(format!("output spec names undefined value '{}'", a.name)))
    };
    Ok(match s {
        S::UserOutput(u) => {
            let arg = match &u.arg {
                schema::Argument::AsTensor(a) => t(a)?,
                schema::Argument::AsSymInt(schema::SymIntArgument::AsName(n)) => {
                    Arg::SymInt(IntArg::Sym(g.id(n).ok_or_else(|| {
                        Error::Verify(format!("output spec names undefined value '{n}'"))
                    })?))
                }
                schema::Argument::AsNone(_) => Arg::None,
                schema::Argument::AsInt(i) => Arg::Int(*i),
                schema::Argument::AsFloat(f) => Arg::Float(f.0),
                schema::Argument::AsBool(b) => Arg::Bool(*b),
                schema::Argument::AsString(s) => Arg::Str(s.clone()),
                other => {
                    return Err(Error::Verify(format!(
                        "user output of kind {} is not supported",
                        other.kind()
                    )))
                }
            };
            OutputSpec {
                arg,
                kind: OutputKind::User,
            }
        }
        S::LossOutput(l) => OutputSpec {
            arg: t(&l.arg)?,
            kind: OutputKind::Loss,
        },
        S::BufferMutation(b) => OutputSpec {
            arg: t(&b.arg)?,
            kind: OutputKind::BufferMutation {
                buffer: b.buffer_name.clone(),
            },
        },
        S::ParameterMutation(p) => OutputSpec {
            arg: t(&p.arg)?,
            kind: OutputKind::ParameterMutation {
                parameter: p.parameter_name.clone(),
            },
        },
        S::UserInputMutation(u) => OutputSpec {
            arg: t(&u.arg)?,
            kind: OutputKind::UserInputMutation {
                input: u.user_input_name.clone(),
            },
        },
        S::GradientToParameter(p) => OutputSpec {
            arg: t(&p.arg)?,
            kind: OutputKind::GradientToParameter {
                parameter: p.parameter_name.clone(),
            },
        },
        S::GradientToUserInput(u) => OutputSpec {
            arg: t(&u.arg)?,
            kind: OutputKind::GradientToUserInput {
                input: u.user_input_name.clone(),
            },
        },
        S::Token(_) => OutputSpec {
            arg: Arg::None,
            kind: OutputKind::Token,
        },
    })
}

/// An opened archive with its programs loaded on demand; the main entry point.
pub struct Pt2Archive {
    file: Pt2File,
}

impl Pt2Archive {
    /// Open a `.pt2` from bytes (`source` names it in errors).
    pub fn open(source: &str, bytes: impl Into<Arc<[u8]>>, limits: crate::Limits) -> Result<Self> {
        Ok(Pt2Archive {
            file: Pt2File::open(source, bytes, limits)?,
        })
    }
    /// Open a `.pt2` on a random-access source ([`crate::archive::source`]): only the zip
    /// directory and the programs are read up front; each weight is read when a session
    /// takes it, straight into its CPU tensor or GPU buffer.
    pub fn open_source(
        source: &str,
        src: Arc<dyn crate::archive::source::ByteSource>,
        limits: crate::Limits,
    ) -> Result<Self> {
        Ok(Pt2Archive {
            file: Pt2File::open_source(source, src, limits)?,
        })
    }
    /// An archive on a zip directory already read ([`crate::archive::stream`] reads it while
    /// bytes not pushed yet read as zeros, then the records with every byte checked).
    pub(crate) fn from_reader(reader: crate::archive::ArchiveReader) -> Result<Self> {
        Ok(Pt2Archive {
            file: Pt2File::from_reader(reader)?,
        })
    }
    /// Open a `.pt2` file natively without reading it whole ([`Pt2Archive::open_source`]
    /// over positioned reads of the file).
    #[cfg(any(unix, windows))]
    pub fn open_file(path: &std::path::Path, limits: crate::Limits) -> Result<Self> {
        let src = crate::archive::source::FileSource::open(path)?;
        Pt2Archive::open_source(&path.display().to_string(), Arc::new(src), limits)
    }
    pub fn program_names(&self) -> &[String] {
        self.file.program_names()
    }
    pub fn layout(&self) -> &Layout {
        &self.file.layout
    }
    pub fn reader(&self) -> &crate::archive::ArchiveReader {
        &self.file.reader
    }
    pub fn extra_files(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        self.file.extra_files()
    }
    /// Load and validate one program (`None`: the only program, or "model").
    pub fn program(&self, name: Option<&str>, opts: &LoadOptions) -> Result<Program> {
        let names = self.program_names();
        let name = match name {
            Some(n) => n.to_string(),
            None if names.len() == 1 => names[0].clone(),
            None if names.iter().any(|n| n == "model") => "model".into(),
            None => {
                return Err(Error::NoSuchProgram {
                    name: "<default>".into(),
                    available: names.join(", "),
                });
            }
        };
        let raw = self.file.load_raw(&name, opts)?;
        let style = match self.file.layout {
            Layout::Legacy { .. } => ExprStyle::Infix,
            Layout::Pt2 { .. } => ExprStyle::Srepr,
        };
        let mut p = Program::from_raw(raw, style, &opts.limits)?;
        crate::passes::decompose::run(&mut p);
        if opts.weights != crate::passes::quantize::WeightFormat::Keep {
            crate::passes::quantize::pt2e(&mut p)?;
            crate::passes::quantize::torchao_int8(&mut p)?;
            crate::passes::quantize::torchao_int4(&mut p)?;
        }
        crate::passes::quantize::run(&mut p, opts.weights)?;
        if opts.dtype == crate::passes::half::Precision::F16 {
            crate::passes::half::to_f16(&mut p)?;
        }
        Ok(p)
    }
}
