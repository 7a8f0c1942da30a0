"""Shared helpers for the pt2web fixture generators.

Used by gen_fixtures.py / gen_models.py (torch 2.15) and gen_torch25.py (torch 2.5),
so it must only use APIs both versions have (or guard them).

Everything recorded here comes from PyTorch itself (the ExportedProgram, eager runs of
the original nn.Module); nothing is computed by pt2web.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import json
import os
import re
import struct
import zipfile
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from torch.export.graph_signature import InputKind, OutputKind

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")

META_FORMAT_VERSION = 1


# --------------------------------------------------------------------------------------
# small utils
# --------------------------------------------------------------------------------------


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def dim_str(d: Any) -> Any:
    """A size as recorded in meta: a python int, or str(sympy expr) of a symbolic size."""
    if isinstance(d, int):
        return int(d)
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        if getattr(expr, "is_number", False):
            return int(expr)
        return str(expr)
    return str(d)


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def tensor_info(t: torch.Tensor) -> dict:
    return {
        "dtype": dtype_name(t.dtype),
        "shape": [int(s) for s in t.shape],
        "nbytes": int(t.numel() * t.element_size()),
        "stride": [int(s) for s in t.stride()],
        "storage_offset": int(t.storage_offset()),
    }


def target_name(target: Any) -> str:
    """Name of a call_function target: "aten.linear.default" for OpOverloads,
    "higher_order.cond" for higher-order ops, "_operator.getitem" for python callables."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.__name__}"
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
    return f"{mod}.{name}" if mod else name


def _upper(v) -> Any:
    s = str(v)
    if s in ("oo", "int_oo", "-oo", "-int_oo"):
        return None
    try:
        return int(v)
    except Exception:
        return s


def _lower(v) -> Any:
    s = str(v)
    if s in ("-oo", "-int_oo"):
        return None
    try:
        return int(v)
    except Exception:
        return s


# --------------------------------------------------------------------------------------
# safetensors (pure python fallback for the torch 2.5 venv, which has no safetensors)
# --------------------------------------------------------------------------------------

_ST_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.numel() == 0:
        return b""
    # view as bytes via uint8 reinterpretation (works for every dtype incl. bf16/bool)
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def save_safetensors(tensors: dict[str, torch.Tensor], path: str, metadata: dict[str, str] | None = None) -> None:
    """Write a safetensors file. Every tensor is stored as a contiguous copy.
    Uses the `safetensors` package when present, a tiny writer otherwise (same format)."""
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    try:
        from safetensors.torch import save_file  # type: ignore

        save_file(tensors, path, metadata=metadata)
        return
    except ImportError:
        pass
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs = []
    off = 0
    for k in sorted(tensors):
        t = tensors[k]
        b = _tensor_bytes(t)
        header[k] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# --------------------------------------------------------------------------------------
# running things
# --------------------------------------------------------------------------------------


def clone_tree(x: Any) -> Any:
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def flatten(x: Any) -> list:
    leaves, _ = pytree.tree_flatten(x)
    return leaves


class Case:
    """One call of a program: args/kwargs as given to the module, plus what eager PyTorch
    produced (outputs, buffers after the call, inputs after the call)."""

    def __init__(self, args: tuple, kwargs: dict | None = None, label: str = ""):
        self.args = args
        self.kwargs = kwargs or {}
        self.label = label
        self.outputs: list = []
        self.buffers_after: dict[str, torch.Tensor] = {}  # buffers the call changed
        self.inputs_after: dict[int, torch.Tensor] = {}  # flat input index -> value after

    def flat_inputs(self) -> list:
        return flatten((self.args, self.kwargs))


def run_eager(module: torch.nn.Module, case: Case) -> None:
    """Run a pristine deep copy of `module` on cloned inputs; record the flattened outputs,
    every buffer whose value the call changed, and every input the call changed.

    Changes are detected by comparing values before/after (not from the graph signature:
    torch 2.15's training IR keeps in-place ops such as add_/copy_/batch_norm in the graph and
    lists no BUFFER_MUTATION / USER_INPUT_MUTATION outputs; core ATen does)."""
    m = copy.deepcopy(module)
    args, kwargs = clone_tree(case.args), clone_tree(case.kwargs)
    bufs = dict(m.named_buffers(remove_duplicate=False))
    before_b = {k: v.detach().clone() for k, v in bufs.items()}
    before_i = [t.clone() if isinstance(t, torch.Tensor) else t for t in flatten((args, kwargs))]
    with torch.no_grad():
        out = m(*args, **kwargs)
    case.outputs = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in flatten(out)]
    case.buffers_after = {
        k: v.detach().clone() for k, v in bufs.items() if not _same(v, before_b[k])
    }
    after_i = flatten((args, kwargs))
    case.inputs_after = {
        i: t.detach().clone()
        for i, (t, b) in enumerate(zip(after_i, before_i))
        if isinstance(t, torch.Tensor) and not _same(t, b)
    }


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))


# --------------------------------------------------------------------------------------
# meta from an ExportedProgram
# --------------------------------------------------------------------------------------


def program_meta(ep, ir: str) -> dict:
    sig = ep.graph_signature
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}

    params: dict[str, dict] = {}
    buffers: dict[str, dict] = {}
    constants: dict[str, dict] = {}
    state: dict[str, torch.Tensor] = {}
    user_inputs: list[dict] = []

    for spec in sig.input_specs:
        kind = spec.kind
        if kind == InputKind.PARAMETER:
            t = ep.state_dict[spec.target]
            params[spec.target] = tensor_info(t)
            state[spec.target] = t
        elif kind == InputKind.BUFFER:
            persistent = bool(spec.persistent)
            t = ep.state_dict[spec.target] if persistent else ep.constants[spec.target]
            info = tensor_info(t)
            info["persistent"] = persistent
            buffers[spec.target] = info
            state[spec.target] = t
        elif kind == InputKind.CONSTANT_TENSOR:
            t = ep.constants[spec.target]
            constants[spec.target] = tensor_info(t)
            state[spec.target] = t
        elif kind == InputKind.USER_INPUT:
            arg = spec.arg
            name = getattr(arg, "name", None)
            entry: dict[str, Any] = {"name": name}
            node = placeholders.get(name) if name else None
            val = node.meta.get("val") if node is not None else None
            if isinstance(val, torch.Tensor):
                entry["kind"] = "tensor"
                entry["dtype"] = dtype_name(val.dtype)
                entry["shape"] = [dim_str(d) for d in val.shape]
            elif isinstance(val, torch.SymInt):
                entry["kind"] = "symint"
                entry["value"] = dim_str(val)
            else:
                entry["kind"] = "constant"
                entry["value"] = repr(getattr(arg, "value", val))
            user_inputs.append(entry)
        else:
            # custom objects, tokens ...
            user_inputs.append({"name": getattr(spec.arg, "name", None), "kind": str(kind)})

    # tied: FQNs whose tensors share one untyped storage
    by_ptr: dict[int, list[str]] = collections.defaultdict(list)
    for fqn, t in state.items():
        ptr = t.untyped_storage().data_ptr()
        if ptr != 0:
            by_ptr[ptr].append(fqn)
    tied = sorted(sorted(v) for v in by_ptr.values() if len(v) > 1)

    by_dtype: dict[str, int] = collections.Counter()
    for fqn, t in state.items():
        by_dtype[dtype_name(t.dtype)] += int(t.numel() * t.element_size())
    storage_bytes = 0
    seen = set()
    for t in state.values():
        st = t.untyped_storage()
        key = st.data_ptr() or id(t)
        if key not in seen:
            seen.add(key)
            storage_bytes += int(st.nbytes())

    param_ptrs = {}
    for fqn in params:
        t = state[fqn]
        param_ptrs.setdefault(t.untyped_storage().data_ptr() or id(t), t.numel())

    op_counts = collections.Counter(
        target_name(n.target) for n in ep.graph.nodes if n.op == "call_function"
    )

    rc = {}
    for sym, vr in ep.range_constraints.items():
        rc[str(sym)] = [_lower(vr.lower), _upper(vr.upper)]

    out_specs = sig.output_specs
    meta = {
        "ir": ir,
        "dialect": getattr(ep, "dialect", None),
        "verifiers": [getattr(v, "dialect", str(v)) for v in getattr(ep, "verifiers", [])],
        "parameters": params,
        "buffers": buffers,
        "constants": constants,
        "num_parameters": len(params),
        "parameter_numel": int(sum(state[f].numel() for f in params)),
        "parameter_numel_unique": int(sum(param_ptrs.values())),
        "state_bytes_by_dtype": dict(sorted(by_dtype.items())),
        "state_storage_bytes": storage_bytes,
        "tied": tied,
        "user_inputs": user_inputs,
        "user_outputs": sum(1 for s in out_specs if s.kind == OutputKind.USER_OUTPUT),
        "buffer_mutations": [s.target for s in out_specs if s.kind == OutputKind.BUFFER_MUTATION],
        "user_input_mutations": [s.target for s in out_specs if s.kind == OutputKind.USER_INPUT_MUTATION],
        "range_constraints": rc,
        # torch >= 2.8 keeps the export guards as python code (absent in 2.5)
        "guards_code": list(getattr(ep, "_guards_code", None) or []),
        "op_counts": dict(sorted(op_counts.items())),
        "num_graph_nodes": sum(1 for _ in ep.graph.nodes),
        "in_spec": str(ep.call_spec.in_spec),
        "out_spec": str(ep.call_spec.out_spec),
        "in_spec_json": _treespec_json(ep.call_spec.in_spec),
        "out_spec_json": _treespec_json(ep.call_spec.out_spec),
        # torch's module_call_graph: the root module ("") and the submodules export kept the
        # calling convention of (`preserve_module_call_signature`)
        "module_call_graph": [
            {"fqn": e.fqn, "forward_arg_names": list(e.signature.forward_arg_names or []) if e.signature else None}
            for e in ep.module_call_graph
        ],
    }
    return meta, state


def _treespec_json(spec) -> Any:
    """torch's own serialized TreeSpec (what model.json's module_call_graph holds), or None."""
    if spec is None:
        return None
    try:
        return pytree.treespec_dumps(spec)
    except Exception as e:  # e.g. a type without serialized_type_name
        return f"<not serializable: {e}>"


def state_tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().clone() for k, v in state.items()}


def write_io(path: str, case: Case) -> dict:
    """Write one call's io safetensors; return the per-case meta record."""
    tensors: dict[str, torch.Tensor] = {}
    leaves: list[dict] = []
    for i, x in enumerate(case.flat_inputs()):
        if isinstance(x, torch.Tensor):
            tensors[f"input_{i}"] = x
            leaves.append({"key": f"input_{i}", **_leaf_info(x)})
        else:
            leaves.append({"key": None, "value": repr(x)})
    out_leaves: list[dict] = []
    for i, x in enumerate(case.outputs):
        if isinstance(x, torch.Tensor):
            tensors[f"output_{i}"] = x
            out_leaves.append({"key": f"output_{i}", **_leaf_info(x)})
        else:
            out_leaves.append({"key": None, "value": repr(x)})
    for fqn, t in case.buffers_after.items():
        tensors[f"buffer_after.{fqn}"] = t
    for i, t in case.inputs_after.items():
        tensors[f"input_after_{i}"] = t
    save_safetensors(tensors, path)
    return {
        "file": os.path.basename(path),
        "label": case.label,
        "inputs": leaves,
        "outputs": out_leaves,
        "buffers_after": sorted(f"buffer_after.{f}" for f in case.buffers_after),
        "inputs_after": [f"input_after_{i}" for i in sorted(case.inputs_after)],
    }


def remove_other_cases(outdir: str, base: str, keep: list[str]) -> None:
    """Delete BASE.io.<label>.safetensors files left from earlier runs that are not in `keep`."""
    pat = re.compile(re.escape(base) + r"\.io\.[^.]+\.safetensors$")
    for f in os.listdir(outdir):
        if pat.match(f) and f not in keep:
            os.remove(os.path.join(outdir, f))


def _leaf_info(t: torch.Tensor) -> dict:
    return {"dtype": dtype_name(t.dtype), "shape": [int(s) for s in t.shape]}


def archive_entries(path: str) -> list[str]:
    with zipfile.ZipFile(path) as z:
        return z.namelist()


_GRAPH_ID = re.compile(rb'graph_id\\*": \d+')
_STACK_TRACE = re.compile(rb'"stack_trace": "(?:[^"\\]|\\.)*"')


def _normalized(name: str, data: bytes) -> bytes:
    # Node metadata that changes without the program changing: "from_node" records
    # graph_id = id(python Graph object), "stack_trace" the generator's path and line numbers.
    if name.endswith(".json"):
        data = _GRAPH_ID.sub(b"graph_id", data)
        data = _STACK_TRACE.sub(b'"stack_trace": ""', data)
    return data


def same_archive_content(a: str, b: str) -> bool:
    """True when two zip archives hold the same entries with the same bytes, ignoring
    `.data/serialization_id` (random per save) and node metadata that differs between runs
    (graph_id python object ids; stack_trace file paths and line numbers)."""
    try:
        with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
            na = [n for n in za.namelist() if not n.endswith(".data/serialization_id")]
            nb = [n for n in zb.namelist() if not n.endswith(".data/serialization_id")]
            if na != nb:
                return False
            return all(_normalized(n, za.read(n)) == _normalized(n, zb.read(n)) for n in na)
    except Exception:
        return False


def _json(obj: Any, ind: int) -> str:
    pad = " " * ind
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad} {json.dumps(str(k))}: {_json(v, ind + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in obj):
            return json.dumps(list(obj))  # lists of scalars on one line
        items = [f"{pad} {_json(v, ind + 1)}" for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj)


def dump_json(obj: Any, path: str) -> None:
    """Indented JSON with lists of scalars kept on one line (readable diffs)."""
    text = _json(obj, 0)
    json.loads(text)  # sanity
    with open(path, "w") as f:
        f.write(text + "\n")


def compare_outputs(expected: list, got: list, what: str, rtol=None, atol=None) -> None:
    if len(expected) != len(got):
        raise AssertionError(f"{what}: {len(got)} output leaves, expected {len(expected)}")
    for i, (e, g) in enumerate(zip(expected, got)):
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                raise AssertionError(f"{what}: output {i} is {type(g)}, expected a tensor")
            if e.dtype != g.dtype or e.shape != g.shape:
                raise AssertionError(f"{what}: output {i} {g.dtype}{list(g.shape)} vs {e.dtype}{list(e.shape)}")
            kw = {}
            if rtol is not None:
                kw = {"rtol": rtol, "atol": atol}
            torch.testing.assert_close(g, e, msg=lambda m: f"{what}: output {i}: {m}", **kw)
        else:
            if e != g:
                raise AssertionError(f"{what}: output {i} {g!r} != {e!r}")
