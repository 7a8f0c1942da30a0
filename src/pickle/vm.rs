//! The pickle machine: a stack, a mark stack and a memo over an arena of nodes.
//!
//! Values live in an arena and the stack, memo and containers hold indices into it. That
//! gives Python's reference semantics for free: a list memoized when it was still empty
//! and filled by later APPENDS is seen filled through every BINGET, and a storage or
//! tensor referenced twice stays one object. The arena is turned into a [`PyValue`] tree
//! once, at STOP, with a depth limit (which also stops self-referencing lists) and a
//! budget on the expanded size (shared subtrees are copied, so a chain of lists holding
//! two references to the previous one would otherwise grow exponentially).
//!
//! Every node comes from one opcode and every byte string from the input, so the arena is
//! bounded by the input size; the explicit caps below keep memory proportional to it.

use super::torch::Global;
use super::PyValue;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::tensor::{HostTensor, Storage};
use std::collections::HashMap;

pub(super) type Id = usize;

/// Most nodes one pickle may create (each opcode creates at most one).
const MAX_NODES: usize = 1 << 24;
/// Most items on the stack (torch batches SETITEMS/APPENDS by 1000, so real files stay tiny).
const MAX_STACK: usize = 1 << 20;
/// Most memo entries.
const MAX_MEMO: usize = 1 << 22;
/// Hard ceiling on container nesting whatever `Limits::max_depth` says: conversion and drop
/// recurse, and the native stack must not overflow.
const HARD_MAX_DEPTH: usize = 1000;

/// One Python object in the arena.
pub(super) enum Node {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Tuple(Vec<Id>),
    List(Vec<Id>),
    /// `ordered` marks a `collections.OrderedDict`, the only object BUILD may update.
    Dict {
        items: Vec<(Id, Id)>,
        ordered: bool,
    },
    Tensor(HostTensor),
    Dtype(DType),
    /// A whitelisted callable or class, waiting for REDUCE or a persistent id.
    Global(Global),
    /// A storage returned by BINPERSID, waiting to be wrapped by a tensor rebuild.
    Storage(StorageRef),
}

/// A typed view of a storage, as a persistent id describes it.
pub(super) struct StorageRef {
    pub key: String,
    pub dtype: DType,
    pub storage: Storage,
}

pub(super) struct Machine<'a> {
    pub file: &'a str,
    data: &'a [u8],
    pos: usize,
    pub limits: &'a Limits,
    pub nodes: Vec<Node>,
    stack: Vec<Id>,
    /// Stack lengths at each MARK; items below the top mark cannot be popped, as in
    /// CPython where MARK starts a fresh stack.
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
    pub storages: HashMap<String, Storage>,
    pub resolve: &'a mut dyn FnMut(&str, DType, usize) -> Result<Storage>,
    /// Where the opcode being executed starts, for error messages.
    pub at: usize,
    pub op: u8,
}

impl<'a> Machine<'a> {
    pub fn new(
        file: &'a str,
        data: &'a [u8],
        limits: &'a Limits,
        resolve: &'a mut dyn FnMut(&str, DType, usize) -> Result<Storage>,
    ) -> Self {
        Machine {
            file,
            data,
            pos: 0,
            limits,
            nodes: Vec::new(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            storages: HashMap::new(),
            resolve,
            at: 0,
            op: 0,
        }
    }

    /// An error about the opcode being executed.
    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        op_error(self.file, self.op, self.at, msg)
    }

    // ---- reading the stream -------------------------------------------------------------

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let left = self.data.len() - self.pos;
        if n > left {
            return Err(self.err(format!("truncated: needs {n} more bytes, only {left} left")));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.fixed::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.fixed()?))
    }
    /// A length prefix, checked against the bytes that remain before anything is allocated.
    fn len_u64(&mut self) -> Result<usize> {
        let n = u64::from_le_bytes(self.fixed()?);
        usize::try_from(n).map_err(|_| self.err(format!("length {n} does not fit this platform")))
    }
    fn text(&mut self, n: usize) -> Result<String> {
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| self.err("string is not valid UTF-8"))
    }
    /// One newline-terminated line (GLOBAL's operands).
    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..];
        let Some(n) = rest.iter().take(1024).position(|&b| b == b'\n') else {
            return Err(self.err("GLOBAL operand has no newline within 1024 bytes"));
        };
        let s = self.text(n)?;
        self.pos += 1;
        Ok(s)
    }
    /// LONG1/LONG4 payload: little-endian two's complement, only values that fit an i64.
    fn long(&mut self, n: usize) -> Result<i64> {
        let b = self.take(n)?;
        if n == 0 {
            return Ok(0);
        }
        let neg = b[n - 1] & 0x80 != 0;
        let fill = if neg { 0xff } else { 0 };
        if n > 8 && (b[8..].iter().any(|&x| x != fill) || (b[7] & 0x80 != 0) != neg) {
            return Err(self.err(format!("integer of {n} bytes does not fit in 64 bits")));
        }
        let mut a = [fill; 8];
        let k = n.min(8);
        a[..k].copy_from_slice(&b[..k]);
        Ok(i64::from_le_bytes(a))
    }

    // ---- stack, memo, arena -------------------------------------------------------------

    pub fn node(&self, id: Id) -> &Node {
        &self.nodes[id]
    }
    fn alloc(&mut self, n: Node) -> Result<Id> {
        if self.nodes.len() >= MAX_NODES {
            return Err(Error::limit(
                format!("objects in pickle {}", self.file),
                self.nodes.len() as u64 + 1,
                MAX_NODES as u64,
            ));
        }
        self.nodes.push(n);
        Ok(self.nodes.len() - 1)
    }
    fn push_id(&mut self, id: Id) -> Result<()> {
        if self.stack.len() >= MAX_STACK {
            return Err(Error::limit(
                format!("pickle stack depth in {}", self.file),
                self.stack.len() as u64 + 1,
                MAX_STACK as u64,
            ));
        }
        self.stack.push(id);
        Ok(())
    }
    fn push(&mut self, n: Node) -> Result<()> {
        let id = self.alloc(n)?;
        self.push_id(id)
    }
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }
    fn pop(&mut self) -> Result<Id> {
        if self.stack.len() <= self.floor() {
            return Err(self.err("stack underflow"));
        }
        Ok(self.stack.pop().unwrap_or_default())
    }
    fn top(&self) -> Result<Id> {
        if self.stack.len() <= self.floor() {
            return Err(self.err("stack underflow"));
        }
        Ok(self.stack[self.stack.len() - 1])
    }
    fn pop_mark(&mut self) -> Result<Vec<Id>> {
        let Some(m) = self.marks.pop() else {
            return Err(self.err("no MARK on the stack"));
        };
        Ok(self.stack.split_off(m.min(self.stack.len())))
    }
    fn memo_put(&mut self, idx: u32) -> Result<()> {
        let id = self.top()?;
        if self.memo.len() >= MAX_MEMO && !self.memo.contains_key(&idx) {
            return Err(Error::limit(
                format!("pickle memo entries in {}", self.file),
                self.memo.len() as u64 + 1,
                MAX_MEMO as u64,
            ));
        }
        self.memo.insert(idx, id);
        Ok(())
    }
    fn memo_get(&mut self, idx: u32) -> Result<()> {
        let Some(&id) = self.memo.get(&idx) else {
            return Err(self.err(format!("memo entry {idx} was never stored")));
        };
        self.push_id(id)
    }
    // The error paths below name fields, not `self.err`, so the borrow checker sees that
    // they do not overlap the mutable borrow of `self.nodes`.
    fn list_mut(&mut self, id: Id) -> Result<&mut Vec<Id>> {
        match &mut self.nodes[id] {
            Node::List(v) => Ok(v),
            other => Err(op_error(
                self.file,
                self.op,
                self.at,
                format!("can only append to a list, not a {}", node_kind(other)),
            )),
        }
    }
    fn dict_mut(&mut self, id: Id) -> Result<&mut Vec<(Id, Id)>> {
        match &mut self.nodes[id] {
            Node::Dict { items, .. } => Ok(items),
            other => Err(op_error(
                self.file,
                self.op,
                self.at,
                format!("can only set items on a dict, not a {}", node_kind(other)),
            )),
        }
    }

    // ---- the interpreter ----------------------------------------------------------------

    pub fn run(mut self) -> Result<PyValue> {
        loop {
            self.at = self.pos;
            if self.pos >= self.data.len() {
                return Err(Error::pickle(
                    self.file,
                    format!(
                        "truncated: the pickle ends at byte {} without STOP",
                        self.pos
                    ),
                ));
            }
            self.op = self.data[self.pos];
            self.pos += 1;
            match self.op {
                0x80 => {
                    // PROTO
                    let v = self.u8()?;
                    if v > 5 {
                        return Err(self.err(format!("pickle protocol {v} is newer than 5")));
                    }
                }
                0x95 => {
                    // FRAME: framing only batches reads; check the length and read on.
                    let n = self.len_u64()?;
                    if n > self.data.len() - self.pos {
                        return Err(self.err(format!("frame of {n} bytes runs past the end")));
                    }
                }
                0x2e => {
                    // STOP
                    let id = self.pop()?;
                    let mut conv = Convert::new(&self);
                    return conv.value(id, 0);
                }
                0x28 => {
                    // MARK
                    if self.marks.len() >= MAX_STACK {
                        return Err(Error::limit(format!("pickle marks in {}", self.file), self.marks.len() as u64 + 1, MAX_STACK as u64));
                    }
                    self.marks.push(self.stack.len());
                }
                0x30 => {
                    self.pop()?; // POP
                }
                0x31 => {
                    self.pop_mark()?; // POP_MARK
                }
                0x32 => {
                    let id = self.top()?; // DUP
                    self.push_id(id)?;
                }
                0x4e => self.push(Node::None)?,
                0x88 => self.push(Node::Bool(true))?,
                0x89 => self.push(Node::Bool(false))?,
                0x4b => {
                    let v = self.u8()?; // BININT1
                    self.push(Node::Int(v as i64))?;
                }
                0x4d => {
                    let v = u16::from_le_bytes(self.fixed()?); // BININT2
                    self.push(Node::Int(v as i64))?;
                }
                0x4a => {
                    let v = i32::from_le_bytes(self.fixed()?); // BININT
                    self.push(Node::Int(v as i64))?;
                }
                0x8a => {
                    let n = self.u8()? as usize; // LONG1
                    let v = self.long(n)?;
                    self.push(Node::Int(v))?;
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.fixed()?); // LONG4
                    let n = usize::try_from(n).map_err(|_| self.err("negative LONG4 length"))?;
                    let v = self.long(n)?;
                    self.push(Node::Int(v))?;
                }
                0x47 => {
                    let v = f64::from_be_bytes(self.fixed()?); // BINFLOAT (big-endian, per pickle)
                    self.push(Node::Float(v))?;
                }
                0x8c => {
                    let n = self.u8()? as usize; // SHORT_BINUNICODE
                    let s = self.text(n)?;
                    self.push(Node::Str(s))?;
                }
                0x58 => {
                    let n = self.u32()? as usize; // BINUNICODE
                    let s = self.text(n)?;
                    self.push(Node::Str(s))?;
                }
                0x8d => {
                    let n = self.len_u64()?; // BINUNICODE8
                    let s = self.text(n)?;
                    self.push(Node::Str(s))?;
                }
                0x43 | 0x42 | 0x8e | 0x96 => {
                    // SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8
                    let n = match self.op {
                        0x43 => self.u8()? as usize,
                        0x42 => self.u32()? as usize,
                        _ => self.len_u64()?,
                    };
                    let b = self.take(n)?.to_vec();
                    self.push(Node::Bytes(b))?;
                }
                0x29 => self.push(Node::Tuple(Vec::new()))?,
                0x5d => self.push(Node::List(Vec::new()))?,
                0x7d => self.push(Node::Dict { items: Vec::new(), ordered: false })?,
                0x74 => {
                    let items = self.pop_mark()?; // TUPLE
                    self.push(Node::Tuple(items))?;
                }
                0x85..=0x87 => {
                    // TUPLE1..TUPLE3
                    let n = (self.op - 0x84) as usize;
                    let mut items = vec![0; n];
                    for slot in items.iter_mut().rev() {
                        *slot = self.pop()?;
                    }
                    self.push(Node::Tuple(items))?;
                }
                0x6c => {
                    let items = self.pop_mark()?; // LIST
                    self.push(Node::List(items))?;
                }
                0x64 => {
                    let items = self.pop_mark()?; // DICT
                    let pairs = self.pairs(items)?;
                    self.push(Node::Dict { items: pairs, ordered: false })?;
                }
                0x61 => {
                    let v = self.pop()?; // APPEND
                    let l = self.top()?;
                    self.list_mut(l)?.push(v);
                }
                0x65 => {
                    let items = self.pop_mark()?; // APPENDS
                    let l = self.top()?;
                    self.list_mut(l)?.extend(items);
                }
                0x73 => {
                    let v = self.pop()?; // SETITEM
                    let k = self.pop()?;
                    let d = self.top()?;
                    self.dict_mut(d)?.push((k, v));
                }
                0x75 => {
                    let items = self.pop_mark()?; // SETITEMS
                    let pairs = self.pairs(items)?;
                    let d = self.top()?;
                    self.dict_mut(d)?.extend(pairs);
                }
                0x71 => {
                    let i = self.u8()?; // BINPUT
                    self.memo_put(i as u32)?;
                }
                0x72 => {
                    let i = self.u32()?; // LONG_BINPUT
                    self.memo_put(i)?;
                }
                0x94 => {
                    // MEMOIZE stores at the next free index, as CPython does.
                    let i = u32::try_from(self.memo.len()).map_err(|_| self.err("memo is full"))?;
                    self.memo_put(i)?;
                }
                0x68 => {
                    let i = self.u8()?; // BINGET
                    self.memo_get(i as u32)?;
                }
                0x6a => {
                    let i = self.u32()?; // LONG_BINGET
                    self.memo_get(i)?;
                }
                0x63 => {
                    let module = self.line()?; // GLOBAL
                    let name = self.line()?;
                    let n = self.global(&module, &name)?;
                    self.push(n)?;
                }
                0x93 => {
                    let name = self.pop()?; // STACK_GLOBAL
                    let module = self.pop()?;
                    let (Node::Str(m), Node::Str(n)) = (self.node(module), self.node(name)) else {
                        return Err(self.err("STACK_GLOBAL needs two strings"));
                    };
                    let (m, n) = (m.clone(), n.clone());
                    let node = self.global(&m, &n)?;
                    self.push(node)?;
                }
                0x52 | 0x81 => {
                    // REDUCE (callable, args) and NEWOBJ (class, args): both only ever
                    // reach the whitelisted globals in torch.rs.
                    let args = self.pop()?;
                    let f = self.pop()?;
                    let n = self.call(f, args)?;
                    self.push(n)?;
                }
                0x62 => {
                    // BUILD: torch only emits it to set OrderedDict attributes such as a
                    // state dict's `_metadata` (module versions), which we do not need.
                    let _state = self.pop()?;
                    let target = self.top()?;
                    if !matches!(self.node(target), Node::Dict { ordered: true, .. }) {
                        let k = node_kind(self.node(target));
                        return Err(self.err(format!("BUILD is only allowed on an OrderedDict, not on a {k}")));
                    }
                }
                0x51 => {
                    let pid = self.pop()?; // BINPERSID
                    let n = self.persistent_load(pid)?;
                    self.push(n)?;
                }
                op => {
                    return Err(Error::pickle(
                        self.file,
                        format!(
                            "opcode 0x{op:02x} ({}) at byte {} is not allowed: pt2web reads only what torch.save writes for tensors, containers and numbers",
                            op_name(op),
                            self.at
                        ),
                    ))
                }
            }
        }
    }

    fn pairs(&self, items: Vec<Id>) -> Result<Vec<(Id, Id)>> {
        if !items.len().is_multiple_of(2) {
            return Err(self.err(format!("odd number of items ({}) for a dict", items.len())));
        }
        Ok(items.chunks_exact(2).map(|c| (c[0], c[1])).collect())
    }
}

fn op_error(file: &str, op: u8, at: usize, msg: impl std::fmt::Display) -> Error {
    Error::pickle(
        file,
        format!("{msg} (opcode 0x{op:02x} {} at byte {at})", op_name(op)),
    )
}

/// Python type name of a node, for error messages.
pub(super) fn node_kind(n: &Node) -> &'static str {
    match n {
        Node::None => "None",
        Node::Bool(_) => "bool",
        Node::Int(_) => "int",
        Node::Float(_) => "float",
        Node::Str(_) => "str",
        Node::Bytes(_) => "bytes",
        Node::Tuple(_) => "tuple",
        Node::List(_) => "list",
        Node::Dict { ordered: false, .. } => "dict",
        Node::Dict { ordered: true, .. } => "OrderedDict",
        Node::Tensor(_) => "Tensor",
        Node::Dtype(_) => "torch.dtype",
        Node::Global(_) => "global",
        Node::Storage(_) => "storage",
    }
}

/// Hashable dict keys, so a repeated key replaces the value in place as in Python
/// (`True` and `1` are the same key there, hence bools map to ints).
#[derive(PartialEq, Eq, Hash)]
enum Key {
    None,
    Int(i64),
    Str(String),
    Bytes(Vec<u8>),
}

/// Arena -> tree, with a depth limit and a budget on the expanded size.
struct Convert<'m, 'a> {
    m: &'m Machine<'a>,
    max_depth: usize,
    values_left: usize,
    bytes_left: usize,
    values_budget: usize,
}

impl<'m, 'a> Convert<'m, 'a> {
    fn new(m: &'m Machine<'a>) -> Self {
        // A pickle without shared containers expands to fewer values and bytes than it has
        // input bytes; allow generous sharing on top, but not exponential blow-up.
        let budget = m.data.len().saturating_mul(16).max(1 << 16);
        Convert {
            m,
            max_depth: m.limits.max_depth.min(HARD_MAX_DEPTH),
            values_left: budget,
            bytes_left: budget,
            values_budget: budget,
        }
    }

    fn spend(&mut self, bytes: usize) -> Result<()> {
        if self.values_left == 0 || bytes > self.bytes_left {
            return Err(Error::limit(
                format!(
                    "values expanded from shared objects in pickle {}",
                    self.m.file
                ),
                self.values_budget as u64 + 1,
                self.values_budget as u64,
            ));
        }
        self.values_left -= 1;
        self.bytes_left -= bytes;
        Ok(())
    }

    fn seq(&mut self, ids: &[Id], depth: usize) -> Result<Vec<PyValue>> {
        ids.iter().map(|&i| self.value(i, depth + 1)).collect()
    }

    fn value(&mut self, id: Id, depth: usize) -> Result<PyValue> {
        if depth > self.max_depth {
            return Err(Error::limit(
                format!("container nesting in pickle {}", self.m.file),
                depth as u64,
                self.max_depth as u64,
            ));
        }
        let file = self.m.file;
        Ok(match self.m.node(id) {
            Node::None => {
                self.spend(0)?;
                PyValue::None
            }
            Node::Bool(b) => {
                self.spend(0)?;
                PyValue::Bool(*b)
            }
            Node::Int(i) => {
                self.spend(0)?;
                PyValue::Int(*i)
            }
            Node::Float(f) => {
                self.spend(0)?;
                PyValue::Float(*f)
            }
            Node::Str(s) => {
                self.spend(s.len())?;
                PyValue::Str(s.clone())
            }
            Node::Bytes(b) => {
                self.spend(b.len())?;
                PyValue::Bytes(b.clone())
            }
            Node::Dtype(d) => {
                self.spend(0)?;
                PyValue::Dtype(*d)
            }
            Node::Tensor(t) => {
                self.spend(0)?;
                PyValue::Tensor(t.clone())
            }
            Node::Tuple(ids) => {
                self.spend(0)?;
                PyValue::Tuple(self.seq(ids, depth)?)
            }
            Node::List(ids) => {
                self.spend(0)?;
                PyValue::List(self.seq(ids, depth)?)
            }
            Node::Dict { items, .. } => {
                self.spend(0)?;
                let mut out: Vec<(PyValue, PyValue)> = Vec::with_capacity(items.len().min(1 << 16));
                let mut index: HashMap<Key, usize> = HashMap::new();
                for &(k, v) in items {
                    let key = self.value(k, depth + 1)?;
                    let val = self.value(v, depth + 1)?;
                    let hk = match &key {
                        PyValue::None => Some(Key::None),
                        PyValue::Bool(b) => Some(Key::Int(*b as i64)),
                        PyValue::Int(i) => Some(Key::Int(*i)),
                        PyValue::Str(s) => Some(Key::Str(s.clone())),
                        PyValue::Bytes(b) => Some(Key::Bytes(b.clone())),
                        _ => None,
                    };
                    match hk.as_ref().and_then(|h| index.get(h)) {
                        Some(&pos) => out[pos].1 = val,
                        None => {
                            if let Some(h) = hk {
                                index.insert(h, out.len());
                            }
                            out.push((key, val));
                        }
                    }
                }
                PyValue::Dict(out)
            }
            Node::Global(g) => {
                return Err(Error::pickle(file, format!("{} was imported but never called; it cannot be a value", g.name())))
            }
            Node::Storage(s) => {
                return Err(Error::pickle(
                    file,
                    format!("storage '{}' is not wrapped in a tensor; bare storages are not supported (save tensors instead)", s.key),
                ))
            }
        })
    }
}

/// pickletools' name for every opcode, so refusals say what they refused.
pub(super) fn op_name(op: u8) -> &'static str {
    match op {
        0x28 => "MARK",
        0x2e => "STOP",
        0x30 => "POP",
        0x31 => "POP_MARK",
        0x32 => "DUP",
        0x46 => "FLOAT",
        0x49 => "INT",
        0x4a => "BININT",
        0x4b => "BININT1",
        0x4c => "LONG",
        0x4d => "BININT2",
        0x4e => "NONE",
        0x50 => "PERSID",
        0x51 => "BINPERSID",
        0x52 => "REDUCE",
        0x53 => "STRING",
        0x54 => "BINSTRING",
        0x55 => "SHORT_BINSTRING",
        0x56 => "UNICODE",
        0x58 => "BINUNICODE",
        0x61 => "APPEND",
        0x62 => "BUILD",
        0x63 => "GLOBAL",
        0x64 => "DICT",
        0x7d => "EMPTY_DICT",
        0x65 => "APPENDS",
        0x67 => "GET",
        0x68 => "BINGET",
        0x69 => "INST",
        0x6a => "LONG_BINGET",
        0x6c => "LIST",
        0x5d => "EMPTY_LIST",
        0x6f => "OBJ",
        0x70 => "PUT",
        0x71 => "BINPUT",
        0x72 => "LONG_BINPUT",
        0x73 => "SETITEM",
        0x74 => "TUPLE",
        0x29 => "EMPTY_TUPLE",
        0x75 => "SETITEMS",
        0x47 => "BINFLOAT",
        0x80 => "PROTO",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        0x42 => "BINBYTES",
        0x43 => "SHORT_BINBYTES",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => "unknown",
    }
}
