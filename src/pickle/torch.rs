//! The whitelisted globals and what REDUCE and BINPERSID do with them.
//!
//! `torch.save` pickles a tensor as `_rebuild_tensor_v2(storage, offset, size, stride,
//! requires_grad, backward_hooks[, metadata])`, where `storage` is a persistent id
//! `('storage', torch.FloatStorage, key, location, numel)`; dtypes that have no typed
//! storage class (uint16/32/64, float8...) use `_rebuild_tensor_v3` with an untyped
//! storage and the dtype as an extra argument. A parameter wraps that tensor in
//! `_rebuild_parameter(data, requires_grad, hooks)`. Each of these is re-implemented here
//! with its argument types checked; nothing else is callable.

use super::vm::{node_kind, Id, Machine, Node, StorageRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::HostTensor;

/// A callable or class the reader knows how to "call" without Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Global {
    RebuildTensorV2,
    RebuildTensorV3,
    RebuildParameter,
    RebuildParameterWithState,
    OrderedDict,
    Size,
    /// `torch.FloatStorage` and friends: only meaningful inside a persistent id.
    StorageClass(DType),
    /// `torch.UntypedStorage` (bytes; used with `_rebuild_tensor_v3`).
    UntypedStorage,
    /// Protocol 2 has no bytes opcode: `b"\x00\x01"` pickles as
    /// `_codecs.encode("\x00\x01", "latin1")` and `b""` as `builtins.bytes()`.
    CodecsEncode,
    Bytes,
}

impl Global {
    pub fn name(self) -> String {
        match self {
            Global::RebuildTensorV2 => "torch._utils._rebuild_tensor_v2".into(),
            Global::RebuildTensorV3 => "torch._utils._rebuild_tensor_v3".into(),
            Global::RebuildParameter => "torch._utils._rebuild_parameter".into(),
            Global::RebuildParameterWithState => {
                "torch._utils._rebuild_parameter_with_state".into()
            }
            Global::OrderedDict => "collections.OrderedDict".into(),
            Global::Size => "torch.Size".into(),
            Global::StorageClass(d) => format!("torch.{}", d.storage_class()),
            Global::UntypedStorage => "torch.UntypedStorage".into(),
            Global::CodecsEncode => "_codecs.encode".into(),
            Global::Bytes => "builtins.bytes".into(),
        }
    }
}

impl Machine<'_> {
    /// GLOBAL / STACK_GLOBAL: map `module.name` to a built-in node, or refuse.
    pub(super) fn global(&self, module: &str, name: &str) -> Result<Node> {
        let g = match (module, name) {
            ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
            ("torch._utils", "_rebuild_tensor_v3") => Global::RebuildTensorV3,
            ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
            ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
            ("collections", "OrderedDict") => Global::OrderedDict,
            ("torch", "Size") => Global::Size,
            ("_codecs", "encode") => Global::CodecsEncode,
            ("builtins" | "__builtin__", "bytes") => Global::Bytes,
            ("torch", "UntypedStorage") | ("torch.storage", "UntypedStorage") => {
                Global::UntypedStorage
            }
            ("torch", n) if DType::from_storage_class(n).is_some() => {
                Global::StorageClass(DType::from_storage_class(n).unwrap_or(DType::U8))
            }
            // A pickled dtype is the global itself: `torch.float32` is GLOBAL 'torch float32'.
            ("torch", n) if DType::from_name(n).is_some() => {
                return Ok(Node::Dtype(DType::from_name(n).unwrap_or(DType::U8)))
            }
            _ => {
                // A tensor subclass (a torchao quantized weight in a training-IR export) is
                // rebuilt by calling its class: say how to get plain tensors instead.
                let hint = if (module, name) == ("torch._tensor", "_rebuild_from_type_v2") {
                    "; this is a tensor subclass (e.g. a torchao quantized weight): export with \
                     `ep = ep.run_decompositions()` before `torch.export.save`, which stores its \
                     plain inner tensors (int8 values, scales) and the ops that use them"
                } else {
                    ""
                };
                return Err(self.err(format!(
                    "refusing to import {module}.{name}: pt2web never executes pickle; it only rebuilds tensors, \
                     nn.Parameter, storages, OrderedDict, torch.Size, dtypes and bytes (save plain tensors and containers instead){hint}"
                )));
            }
        };
        Ok(Node::Global(g))
    }

    /// REDUCE / NEWOBJ on a whitelisted global.
    pub(super) fn call(&self, f: Id, args: Id) -> Result<Node> {
        let g = match self.node(f) {
            Node::Global(g) => *g,
            other => return Err(self.err(format!("cannot call a {}", node_kind(other)))),
        };
        let args: Vec<Id> = match self.node(args) {
            Node::Tuple(a) => a.clone(),
            other => {
                return Err(self.err(format!(
                    "arguments of {} must be a tuple, not a {}",
                    g.name(),
                    node_kind(other)
                )))
            }
        };
        let arity = |ok: &[usize]| -> Result<()> {
            if ok.contains(&args.len()) {
                Ok(())
            } else {
                let want: Vec<String> = ok.iter().map(|n| n.to_string()).collect();
                Err(self.err(format!(
                    "{} takes {} arguments, got {}",
                    g.name(),
                    want.join(" or "),
                    args.len()
                )))
            }
        };
        match g {
            Global::RebuildTensorV2 => {
                arity(&[6, 7])?;
                self.rebuild_tensor(&args, None, args.get(6).copied())
            }
            Global::RebuildTensorV3 => {
                arity(&[7, 8])?;
                let dtype = match self.node(args[6]) {
                    Node::Dtype(d) => *d,
                    other => {
                        return Err(self.err(format!(
                            "_rebuild_tensor_v3 dtype must be a torch.dtype, not a {}",
                            node_kind(other)
                        )))
                    }
                };
                self.rebuild_tensor(&args, Some(dtype), args.get(7).copied())
            }
            Global::RebuildParameter | Global::RebuildParameterWithState => {
                // The state of `_with_state` holds Python attributes set on the parameter;
                // they do not change its data, so they are dropped.
                arity(if g == Global::RebuildParameter {
                    &[3]
                } else {
                    &[4]
                })?;
                let mut t = match self.node(args[0]) {
                    Node::Tensor(t) => t.clone(),
                    other => {
                        return Err(self.err(format!(
                            "{} needs a tensor, got a {}",
                            g.name(),
                            node_kind(other)
                        )))
                    }
                };
                t.requires_grad = self.bool_arg(args[1], "requires_grad")?;
                Ok(Node::Tensor(t))
            }
            Global::OrderedDict => {
                arity(&[0])?;
                Ok(Node::Dict {
                    items: Vec::new(),
                    ordered: true,
                })
            }
            Global::Size => {
                arity(&[1])?;
                let dims = self.dims(args[0], "torch.Size")?;
                // torch.Size is a tuple subclass; keep it a tuple of ints. The items are
                // fresh nodes: the argument's own nodes are checked ints already.
                let ids = match self.node(args[0]) {
                    Node::Tuple(v) | Node::List(v) => v.clone(),
                    _ => Vec::new(),
                };
                debug_assert_eq!(ids.len(), dims.len());
                Ok(Node::Tuple(ids))
            }
            Global::CodecsEncode => {
                arity(&[2])?;
                match (self.node(args[0]), self.node(args[1])) {
                    (Node::Str(s), Node::Str(enc)) if enc == "latin1" || enc == "latin-1" => s
                        .chars()
                        .map(|c| u8::try_from(u32::from(c)).ok())
                        .collect::<Option<Vec<u8>>>()
                        .map(Node::Bytes)
                        .ok_or_else(|| self.err("_codecs.encode: a character above U+00FF cannot be latin1")),
                    _ => Err(self.err("_codecs.encode is only allowed as (str, 'latin1'), the way pickle writes bytes")),
                }
            }
            Global::Bytes => {
                arity(&[0])?;
                Ok(Node::Bytes(Vec::new()))
            }
            Global::StorageClass(_) | Global::UntypedStorage => Err(self.err(format!(
                "{} may only appear in a persistent id, not be called",
                g.name()
            ))),
        }
    }

    /// BINPERSID: `('storage', storage_type, key, location, numel)` -> a shared storage.
    pub(super) fn persistent_load(&mut self, pid: Id) -> Result<Node> {
        let items = match self.node(pid) {
            Node::Tuple(v) if v.len() == 5 => v.clone(),
            other => {
                return Err(self.err(format!(
                "persistent id must be ('storage', storage_type, key, location, numel), got a {}",
                node_kind(other)
            )))
            }
        };
        if !matches!(self.node(items[0]), Node::Str(s) if s == "storage") {
            return Err(self.err("persistent id does not start with 'storage'"));
        }
        let dtype = match self.node(items[1]) {
            Node::Global(Global::StorageClass(d)) => *d,
            Node::Global(Global::UntypedStorage) => DType::U8,
            other => {
                return Err(self.err(format!(
                    "persistent id names a {} where a storage class belongs",
                    node_kind(other)
                )))
            }
        };
        let key = match self.node(items[2]) {
            Node::Str(s) => s.clone(),
            other => {
                return Err(self.err(format!(
                    "storage key must be a str, not a {}",
                    node_kind(other)
                )))
            }
        };
        if !matches!(self.node(items[3]), Node::Str(_)) {
            return Err(self.err("storage location must be a str such as 'cpu'"));
        }
        let numel = self.usize_arg(items[4], "storage numel")?;
        let want = numel.checked_mul(dtype.size()).ok_or_else(|| {
            self.err(format!(
                "storage '{key}': {numel} elements of {dtype} overflow"
            ))
        })?;

        let storage = match self.storages.get(&key) {
            Some(s) => s.clone(),
            None => {
                let s = (self.resolve)(&key, dtype, numel)?;
                self.storages.insert(key.clone(), s.clone());
                s
            }
        };
        if storage.len() != want {
            return Err(Error::pickle(
                self.file,
                format!(
                    "storage '{key}' holds {} bytes but the pickle declares {numel} elements of {dtype} ({want} bytes)",
                    storage.len()
                ),
            ));
        }
        Ok(Node::Storage(StorageRef {
            key,
            dtype,
            storage,
        }))
    }

    /// `_rebuild_tensor_v2/v3(storage, offset, size, stride, requires_grad, hooks, [dtype], [metadata])`.
    fn rebuild_tensor(
        &self,
        args: &[Id],
        v3_dtype: Option<DType>,
        metadata: Option<Id>,
    ) -> Result<Node> {
        let sref = match self.node(args[0]) {
            Node::Storage(s) => s,
            other => {
                return Err(self.err(format!(
                    "tensor rebuild needs a storage (persistent id), got a {}",
                    node_kind(other)
                )))
            }
        };
        let dtype = v3_dtype.unwrap_or(sref.dtype);
        let offset = self.usize_arg(args[1], "storage_offset")?;
        let sizes = self.dims(args[2], "size")?;
        let strides = self.dims(args[3], "stride")?;
        let requires_grad = self.bool_arg(args[4], "requires_grad")?;
        // args[5] is backward_hooks: always an empty OrderedDict in files torch writes, and
        // any hook function inside would already have been refused at its GLOBAL.
        if let Some(m) = metadata {
            // Tensor metadata records the conj and neg bits; data saved with either set
            // would read as different numbers, so refuse instead of guessing.
            match self.node(m) {
                Node::Dict { items, .. } => {
                    for &(k, v) in items {
                        if !matches!(self.node(v), Node::Bool(false)) {
                            let k = match self.node(k) {
                                Node::Str(s) => s.clone(),
                                other => node_kind(other).to_string(),
                            };
                            return Err(self.err(format!(
                                "tensor on storage '{}' has metadata {k:?} set; call .resolve_conj()/.resolve_neg() before saving",
                                sref.key
                            )));
                        }
                    }
                }
                other => {
                    return Err(self.err(format!(
                        "tensor metadata must be a dict, not a {}",
                        node_kind(other)
                    )))
                }
            }
        }
        if sizes.len() != strides.len() {
            return Err(self.err(format!(
                "tensor has {} sizes but {} strides",
                sizes.len(),
                strides.len()
            )));
        }
        let name = format!("{}: view of storage '{}'", self.file, sref.key);
        let mut t = HostTensor::new(&name, dtype, sizes, strides, offset, sref.storage.clone())?;
        t.requires_grad = requires_grad;
        Ok(Node::Tensor(t))
    }

    fn usize_arg(&self, id: Id, what: &str) -> Result<usize> {
        match self.node(id) {
            Node::Int(i) => {
                usize::try_from(*i).map_err(|_| self.err(format!("{what} must be >= 0, got {i}")))
            }
            other => Err(self.err(format!("{what} must be an int, not a {}", node_kind(other)))),
        }
    }

    fn bool_arg(&self, id: Id, what: &str) -> Result<bool> {
        match self.node(id) {
            Node::Bool(b) => Ok(*b),
            other => Err(self.err(format!("{what} must be a bool, not a {}", node_kind(other)))),
        }
    }

    /// A tuple/list of non-negative ints no longer than `Limits::max_rank`.
    fn dims(&self, id: Id, what: &str) -> Result<Vec<usize>> {
        let ids = match self.node(id) {
            Node::Tuple(v) | Node::List(v) => v,
            other => {
                return Err(self.err(format!(
                    "{what} must be a tuple of ints, not a {}",
                    node_kind(other)
                )))
            }
        };
        if ids.len() > self.limits.max_rank {
            return Err(Error::limit(
                format!("rank of a tensor in {}", self.file),
                ids.len() as u64,
                self.limits.max_rank as u64,
            ));
        }
        ids.iter().map(|&i| self.usize_arg(i, what)).collect()
    }
}
