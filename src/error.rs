//! One error type for the whole core. Every variant names what the user has to look at:
//! the archive entry, the input, the dimension, the op.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while loading or running a program.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The bytes are not a readable zip/PT2 archive, or an entry is malformed.
    #[error("archive: {file}: {msg}")]
    Archive { file: String, msg: String },

    /// A configured safety limit was exceeded (sizes, nesting, entry counts).
    #[error("limit exceeded: {what} is {value}, the limit is {limit} (raise it in pt2web::Limits if the file is trusted)")]
    Limit {
        what: String,
        value: u64,
        limit: u64,
    },

    /// A pickle (torch.save) entry used something pt2web refuses to interpret.
    #[error("pickle: {file}: {msg}")]
    Pickle { file: String, msg: String },

    /// model.json or a payload config does not match the export schema.
    #[error("schema: {file}: {msg}")]
    Schema { file: String, msg: String },

    /// A schema, opset or archive version pt2web does not support.
    #[error("unsupported version in {file}: {what} is {found}, supported: {supported}")]
    Version {
        file: String,
        what: String,
        found: String,
        supported: String,
    },

    /// A tensor's declared sizes/strides/offset do not fit its storage.
    #[error("tensor '{name}': {msg}")]
    Tensor { name: String, msg: String },

    /// The program graph is inconsistent (undefined value, signature mismatch...).
    #[error("invalid program: {0}")]
    Verify(String),

    /// A sympy expression could not be parsed or evaluated.
    #[error("symbolic expression: {0}")]
    Sym(String),

    /// A concrete input violates a static dim, a range constraint or an equality guard.
    #[error("input '{input}' dimension {dim}: got {value}, but {constraint}")]
    Guard {
        input: String,
        dim: usize,
        value: i64,
        constraint: String,
    },

    /// A call does not match the program's inputs (missing, extra, dtype, rank).
    #[error("input '{input}': {msg}")]
    Input { input: String, msg: String },

    /// A program name that the archive does not contain.
    #[error("no program named '{name}' in the archive (available: {available})")]
    NoSuchProgram { name: String, available: String },

    /// An operator pt2web has no implementation for on the chosen device.
    #[error("op {op}: {msg}")]
    Op { op: String, msg: String },

    /// Writing an archive failed.
    #[error("write: {0}")]
    Write(String),

    /// A DLPack tensor pt2web cannot take or make (`crate::dlpack`): `field` names the
    /// `DLTensor` field at fault (`data`, `device.device_type`, `dtype.code`, `shape[1]`…).
    #[error("dlpack: {field}: {msg}")]
    DLPack { field: String, msg: String },

    /// The GPU backend failed: no adapter, a device or pipeline error, a value it cannot hold.
    #[error("gpu: {0}")]
    Gpu(String),

    /// An allocation would pass a memory limit: on the GPU the one set with
    /// `set_per_process_memory_fraction`; in a WebAssembly instance, the memory it could not
    /// reserve for a run. Nothing was allocated and the session stays usable.
    #[error("{memory} out of memory: allocating {requested} bytes for {what} with {allocated} bytes in use would exceed the limit of {limit} bytes ({hint})", hint = oom_hint(memory))]
    OutOfMemory {
        /// Which memory: [`GPU_MEMORY`] or [`WASM_MEMORY`].
        memory: &'static str,
        what: String,
        requested: u64,
        allocated: u64,
        limit: u64,
    },

    /// A run was stopped from outside ([`crate::runtime::RunOptions`]: its cancel token or
    /// its timeout) before node `at`; the session stays usable.
    #[error("run stopped ({reason}) before node '{at}'")]
    Cancelled { reason: String, at: String },

    /// The GPU device was lost (destroyed, or dropped by the driver or the browser): every
    /// session on it fails with this. Open a new device (JS `gpu.open()`) and load the
    /// model again.
    #[error("gpu device lost ({reason}): open the device again and reload the model")]
    DeviceLost { reason: String },
    /// A kernel panicked: a pt2web bug, caught at the node that ran it (natively; wasm32
    /// aborts). The run fails, the session stays usable.
    #[error("internal error in node '{node}' ({op}): {msg} (a bug in pt2web: please report it with the program)")]
    Internal {
        node: String,
        op: String,
        msg: String,
    },
}

/// [`Error::OutOfMemory`] of a GPU device.
pub const GPU_MEMORY: &str = "gpu";
/// [`Error::OutOfMemory`] of a WebAssembly instance's linear memory.
pub const WASM_MEMORY: &str = "wasm";

fn oom_hint(memory: &str) -> &'static str {
    match memory {
        GPU_MEMORY => "raise it with set_per_process_memory_fraction or free tensors",
        _ => "the instance could not grow its memory: use smaller inputs, or the GPU",
    }
}

impl Error {
    pub fn dlpack(field: impl Into<String>, msg: impl fmt::Display) -> Self {
        Error::DLPack {
            field: field.into(),
            msg: msg.to_string(),
        }
    }
    pub fn archive(file: impl Into<String>, msg: impl fmt::Display) -> Self {
        Error::Archive {
            file: file.into(),
            msg: msg.to_string(),
        }
    }
    pub fn schema(file: impl Into<String>, msg: impl fmt::Display) -> Self {
        Error::Schema {
            file: file.into(),
            msg: msg.to_string(),
        }
    }
    pub fn pickle(file: impl Into<String>, msg: impl fmt::Display) -> Self {
        Error::Pickle {
            file: file.into(),
            msg: msg.to_string(),
        }
    }
    pub fn tensor(name: impl Into<String>, msg: impl fmt::Display) -> Self {
        Error::Tensor {
            name: name.into(),
            msg: msg.to_string(),
        }
    }
    pub fn limit(what: impl Into<String>, value: u64, limit: u64) -> Self {
        Error::Limit {
            what: what.into(),
            value,
            limit,
        }
    }
    pub fn op(op: impl Into<String>, msg: impl fmt::Display) -> Self {
        Error::Op {
            op: op.into(),
            msg: msg.to_string(),
        }
    }
    /// An error of a subgraph (`what`: "in cond_fn", ...) as an error of the node `op` that
    /// ran it; a stopped run ([`Error::Cancelled`]), a lost device, a caught panic
    /// ([`Error::Internal`]), a limit and an out-of-memory error keep their kind (and code).
    pub fn within(self, op: &str, what: impl fmt::Display) -> Self {
        match self {
            e @ (Error::Cancelled { .. }
            | Error::DeviceLost { .. }
            | Error::OutOfMemory { .. }
            | Error::Internal { .. }) => e,
            // A limit stays a limit (its code is what callers act on), with the context.
            Error::Limit {
                what: w,
                value,
                limit,
            } => Error::Limit {
                what: format!("{op}: {what}: {w}"),
                value,
                limit,
            },
            e => Error::op(op, format!("{what}: {e}")),
        }
    }
    /// A short machine-readable code (used by the JS bindings as `error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Archive { .. } => "ARCHIVE",
            Error::Limit { .. } => "LIMIT",
            Error::Pickle { .. } => "PICKLE",
            Error::Schema { .. } => "SCHEMA",
            Error::Version { .. } => "VERSION",
            Error::Tensor { .. } => "TENSOR",
            Error::Verify(_) => "VERIFY",
            Error::Sym(_) => "SYM",
            Error::Guard { .. } => "GUARD",
            Error::Input { .. } => "INPUT",
            Error::NoSuchProgram { .. } => "NO_SUCH_PROGRAM",
            Error::Op { .. } => "OP",
            Error::Write(_) => "WRITE",
            Error::DLPack { .. } => "DLPACK",
            Error::Gpu(_) => "GPU",
            Error::OutOfMemory { .. } => "OUT_OF_MEMORY",
            Error::Cancelled { .. } => "CANCELLED",
            Error::DeviceLost { .. } => "DEVICE_LOST",
            Error::Internal { .. } => "INTERNAL",
        }
    }
}
