#!/usr/bin/env python
"""Generate pt2web's small, committed test fixtures with PyTorch (torch 2.15).

    .venv/bin/python tests/fixgen/gen_fixtures.py [--only name,name] [--no-verify]

For every fixture NAME this writes into tests/fixtures/:
  NAME.pt2                 torch.export.save (or package_pt2 for several programs)
  NAME.meta.json           what torch reports about the program(s) (see common.program_meta)
  NAME.io.safetensors      one call: input_0.. (pytree-flattened user inputs),
                           output_0.. (pytree-flattened eager PyTorch outputs),
                           buffer_after.<fqn> (mutated buffers after the call),
                           input_after_<i> (mutated user inputs after the call)
  NAME.io.<label>.safetensors   further calls (other shapes / other branch), listed in meta
  NAME.state.safetensors   every parameter/buffer/constant keyed by FQN (contiguous copies)
For an archive with several programs the io/state files are NAME.<program>.io... .

Expected values come from eager PyTorch on the original nn.Module (a pristine deep copy per
call), never from pt2web. At the end every archive is loaded back with torch and must
reproduce the eager outputs, mutated buffers and mutated inputs.

Deterministic: fixed seeds. An archive whose content is unchanged (ignoring torch's random
.data/serialization_id) is not rewritten, so regenerating does not churn git.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402
from torch.export import Dim, export  # noqa: E402

import common  # noqa: E402
from common import Case  # noqa: E402

# Import transformers' ModelOutput classes now, outside any export trace: transformers
# registers each ModelOutput subclass as a pytree node when the class is created, but skips
# that while torch.compiler.is_compiling() (true during torch.export tracing).
import transformers.modeling_outputs  # noqa: E402,F401
from transformers.modeling_outputs import BaseModelOutput  # noqa: E402

warnings.filterwarnings("ignore")

STATE_LIMIT = 1 << 20  # skip NAME.state.safetensors above 1 MB


@dataclasses.dataclass
class Program:
    ep: Any  # ExportedProgram
    ir: str  # "training" | "core_aten"
    module: nn.Module  # pristine eager module (deep-copied per call)
    cases: list  # list[Case]; first is the main case (NAME.io.safetensors)


@dataclasses.dataclass
class Fixture:
    name: str
    covers: str
    programs: dict  # program name -> Program
    extra_files: dict | None = None
    multi: bool = False  # written with package_pt2(exported_programs=dict)
    # tolerance the reloaded program needed to match eager (None: assert_close defaults)
    tolerance: dict | None = None
    info: dict | None = None  # free-form facts about the source model (config, timings...)


BUILDERS: dict[str, Callable[[], Fixture]] = {}


def fixture(name: str):
    def deco(fn):
        BUILDERS[name] = fn
        return fn

    return deco


def seeded(seed: int = 0):
    torch.manual_seed(seed)


def pristine(m: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(m)


def single(name, covers, m, args, kwargs=None, *, core=False, dynamic_shapes=None, cases=None,
           extra_files=None, strict=False) -> Fixture:
    """Export `m` with (args, kwargs); cases default to the example call."""
    eager = pristine(m)
    ep = export(m, args, kwargs or {}, dynamic_shapes=dynamic_shapes, strict=strict)
    if core:
        ep = ep.run_decompositions()
    cs = [Case(args, kwargs, "example")] + list(cases or [])
    return Fixture(name, covers, {"model": Program(ep, "core_aten" if core else "training", eager, cs)},
                   extra_files=extra_files)


# ======================================================================================
# modules
# ======================================================================================


class MLP(nn.Module):
    def __init__(self, i=16, h=32, o=8):
        super().__init__()
        self.fc1 = nn.Linear(i, h)
        self.fc2 = nn.Linear(h, o)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 4 * 4, 10)
        with torch.no_grad():  # non-trivial running stats
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 1.5)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


# ---- static ---------------------------------------------------------------------------


def _mlp(name, core, cases=None):
    seeded(1)
    m = MLP().eval()
    x = rnd(4, 16)
    return single(name, "static MLP: linear + relu, " + ("core ATen (addmm/permute)" if core else "training IR"),
                  m, (x,), core=core, cases=cases)


@fixture("mlp_train")
def _f():
    # "half": the README's quick start (an input of 0.5s), which tests/apps/apps.test.mjs runs.
    return _mlp("mlp_train", False, [Case((torch.full((4, 16), 0.5),), label="half")])


@fixture("mlp_core")
def _f():
    return _mlp("mlp_core", True)


@fixture("decode_mlp")
def _f():
    # Two rows through layers as wide as a quantized decode step's kernels split (K 576: 144
    # int8 words and 72 int4 words per weight row, past one 64-invocation workgroup), the
    # second with 18 outputs (not a multiple of 4).
    seeded(7)
    m = MLP(576, 32, 18).eval()
    x = rnd(2, 576)
    return single("decode_mlp", "static MLP 576 -> 32 -> 18 on 2 rows (quantized-at-load decode kernels)",
                  m, (x,), core=False)


@fixture("long_k_mlp")
def _f():
    # Rows 32,768 wide: a quantized decode step's weight row (8,192 int8 / 4,096 int4 words)
    # past the loop steps one invocation of a CPU adapter takes (issue 17). Patterned values,
    # which git stores in a few KB (the archive itself holds 4 MB of f32).
    seeded(8)
    k = 32_768
    m = MLP(k, 32, 4).eval()
    with torch.no_grad():
        m.fc1.weight.copy_(((torch.arange(32 * k) * 37 % 23) - 11).float().reshape(32, k) / 256)
    x = ((torch.arange(2 * k) * 29 % 11) - 5).float().reshape(2, k) / 8
    return single("long_k_mlp", "static MLP 32768 -> 32 -> 4 on 2 rows (quantized kernels past the loop cap)",
                  m, (x,), core=False)


def _convnet(name, core):
    seeded(2)
    m = ConvNet().eval()
    x = rnd(2, 3, 16, 16)
    return single(name, "conv2d + batchnorm (eval) + relu + maxpool + flatten + linear, "
                  + ("core ATen (convolution, _native_batch_norm_legit_no_training, max_pool2d_with_indices)"
                     if core else "training IR"), m, (x,), core=core)


@fixture("convnet_train")
def _f():
    return _convnet("convnet_train", False)


@fixture("convnet_core")
def _f():
    return _convnet("convnet_core", True)


# ---- in-place ops in the training IR (pt2web's functionalization) --------------------


class InPlace(nn.Module):
    """A residual block written with in-place ops, as torchvision writes them: relu_,
    add_ and hardswish_ on fresh results (functionalized), and an inference dropout_ on a
    view (removed)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.drop = nn.Dropout(0.3, inplace=True)
        with torch.no_grad():
            self.bn1.running_mean.uniform_(-0.5, 0.5)
            self.bn1.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = self.bn1(self.conv1(x))
        y = F.relu(y, inplace=True)
        z = self.conv2(y)
        z += x
        z = F.hardswish(z, inplace=True)
        w = torch.flatten(z, 1)
        w = self.drop(w)
        return w * 2.0


@fixture("inplace_train")
def _f():
    seeded(4)
    m = InPlace().eval()
    x = rnd(2, 4, 6, 6)
    return single("inplace_train", "in-place relu_, add_, hardswish_ and an inference dropout_, "
                  "training IR", m, (x,), core=False)


# ---- weights prepared in forward (pt2web's constant folding) ------------------------


class ConstFold(nn.Module):
    """Work in forward that reads only parameters, buffers and constants."""

    def __init__(self):
        super().__init__()
        # Small weights keep the sums within a few units (errors compared in absolute terms).
        self.w = nn.Parameter(0.1 * torch.randn(8, 16))
        self.a = nn.Parameter(0.1 * torch.randn(3, 16))
        self.b = nn.Parameter(0.1 * torch.randn(5, 16))
        self.fc = nn.Linear(16, 8)
        self.register_buffer("perm", 0.1 * torch.randn(8, 16))
        self.register_buffer("c", torch.randn(1, 8))
        self.k = torch.linspace(-1.0, 1.0, 8)  # a plain tensor attribute: a lifted constant

    def forward(self, x):  # x: [4, 16]
        y = x @ self.w.t().contiguous()  # copy of a transposed weight
        y = y + x @ (self.w.half().float() * 2).t()  # casts and arithmetic, then a view
        y = y + x @ torch.cat([self.a, self.b]).t()  # cat of two parameters
        y = y + x @ self.perm.permute(1, 0).contiguous()  # permuted buffer, copied
        y = y + self.fc(x)  # the weight's transpose is a view only
        y = y + self.c.expand(4, 8).contiguous()  # 4x the bytes it reads
        return y * (self.k * 2 + 1)  # arithmetic on a tensor constant


def _const_fold(name, core):
    seeded(11)
    m = ConstFold().eval()
    return single(name, "weights prepared in forward (transpose copies, f16 round trip, cat, permuted "
                  "buffer, expand copy, arithmetic on a tensor constant) for constant folding; "
                  + ("core ATen" if core else "training IR"), m, (rnd(4, 16),), core=core)


@fixture("const_fold_train")
def _f():
    return _const_fold("const_fold_train", False)


@fixture("const_fold_core")
def _f():
    return _const_fold("const_fold_core", True)


class ConstFoldMutBuf(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(0.1 * torch.randn(8, 16))
        self.register_buffer("scale", torch.rand(8) + 0.5)

    def forward(self, x):
        y = x @ (self.w * 2).t()  # constant
        y = y * self.scale.exp()  # reads a buffer the call mutates: not constant
        self.scale.mul_(0.5)
        return y


@fixture("const_fold_mutbuf_core")
def _f():
    seeded(12)
    return single("const_fold_mutbuf_core", "constant folding next to a mutated buffer "
                  "(BUFFER_MUTATION output), core ATen", ConstFoldMutBuf().eval(), (rnd(4, 16),), core=True)


# ---- dynamic shapes -----------------------------------------------------------------


class DynBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.ln = nn.LayerNorm(32)

    def forward(self, x):
        h = self.ln(F.gelu(self.fc(x)))
        h = h.reshape(h.shape[0], 8, 4).softmax(-1)  # symbolic view
        return h.sum(-1), h.shape[0] * torch.ones(1)


def _dyn_batch(name, core):
    seeded(3)
    m = DynBatch().eval()
    batch = Dim("batch", min=1, max=64)
    x = rnd(4, 16)
    cases = [Case((rnd(1, 16),), label="b1"), Case((rnd(64, 16),), label="b64"), Case((rnd(17, 16),), label="b17")]
    return single(name, "dynamic batch Dim('batch', min=1, max=64): linear/gelu/layernorm, symbolic reshape, "
                  "a size used as a value; " + ("core ATen" if core else "training IR"),
                  m, (x,), dynamic_shapes={"x": {0: batch}}, cases=cases, core=core)


@fixture("dyn_batch")
def _f():
    return _dyn_batch("dyn_batch", False)


@fixture("dyn_batch_core")
def _f():
    return _dyn_batch("dyn_batch_core", True)


class HostileAlloc(nn.Module):
    """Sizes a caller controls: `zeros(b, 65536)`, `y.expand(c, 2**18).contiguous()` and
    `repeat_interleave(z, r)` with tensor counts (data-dependent). Small calls run; with
    b = 65536 (16 GiB), c = 2**20 (16 GiB) or r = [2**31, 0, 0] (8 GiB) a run must be
    refused before anything is allocated (tests/bad_calls.rs). (Rows stay short: lavapipe
    ends any shader loop after 65,535 iterations, so a longer `sum` row is wrong there.)"""

    def forward(self, x, y, z, r):
        a = torch.zeros(x.shape[0], 65536).sum(1) + x.sum(1)
        b = y.expand(y.shape[0], 1 << 12).contiguous().sum(1)
        c = torch.repeat_interleave(z, r, dim=0)
        return a, b, c.sum()


@fixture("hostile_alloc")
def _f():
    seeded(11)
    args = (rnd(4, 3), rnd(2, 1), rnd(3), torch.tensor([1, 0, 3]))
    # zeros(600, 65536): 157 MB, within the byte budget but past a GPU's 128 MiB storage
    # binding (lavapipe's max_storage_buffer_binding_size; tests/ops_gpu.rs).
    past_binding = Case((rnd(600, 3), rnd(2, 1), rnd(3), torch.tensor([1, 0, 3])), label="past_binding")
    return single("hostile_alloc", "sizes the caller controls (zeros, expand+contiguous, repeat_interleave with "
                  "tensor counts): small calls match; huge ones must be refused by the byte budget",
                  HostileAlloc(), args,
                  dynamic_shapes=({0: Dim("b")}, {0: Dim("c")}, {0: Dim("k")}, {0: Dim("k")}),
                  cases=[past_binding])


class DerivedPlus1(nn.Module):
    def forward(self, x, y):
        return x + y[1:], y[:-1] * 2 - x, torch.cat([x, y]).cumsum(0)


@fixture("dyn_derived_plus1")
def _f():
    seeded(4)
    dx = Dim("dx", min=2, max=32)
    dy = dx + 1
    cases = [Case((rnd(2), rnd(3)), label="dx2"), Case((rnd(32), rnd(33)), label="dx32")]
    return single("dyn_derived_plus1", "derived dim: x:[dx], y:[dx+1] (dy = dx + 1), slicing and cat",
                  DerivedPlus1(), (rnd(5), rnd(6)), dynamic_shapes={"x": {0: dx}, "y": {0: dy}}, cases=cases)


class DerivedMul2(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, y):
        pairs = y.reshape(-1, 2, 4).sum(1)  # [2*b, 4] -> [b, 4]
        return self.fc(x) + pairs, y.repeat(1, 2)


@fixture("dyn_derived_mul2")
def _f():
    seeded(5)
    b = Dim("batch", min=2, max=32)  # with min=1 torch adds a guard y.size(0)//2 != 1
    cases = [Case((rnd(2, 4), rnd(4, 4)), label="b2"), Case((rnd(32, 4), rnd(64, 4)), label="b32")]
    return single("dyn_derived_mul2", "derived dim 2*batch: x:[batch,4], y:[2*batch,4], symbolic reshape(-1,2,4)",
                  DerivedMul2().eval(), (rnd(3, 4), rnd(6, 4)), dynamic_shapes={"x": {0: b}, "y": {0: 2 * b}},
                  cases=cases)


class Shared(nn.Module):
    def forward(self, x, y):
        return (x * y).sum(-1), torch.cat([x, y], dim=1), x.new_zeros(x.shape[0]) + x.shape[1]


@fixture("dyn_shared")
def _f():
    seeded(6)
    b = Dim("batch", min=1, max=64)
    s = Dim("seq", min=1, max=128)
    ds = {"x": {0: b, 1: s}, "y": {0: b, 1: s}}
    cases = [Case((rnd(1, 1), rnd(1, 1)), label="b1s1"), Case((rnd(7, 128), rnd(7, 128)), label="b7s128")]
    return single("dyn_shared", "equal dims across inputs: x and y both [batch, seq] sharing two Dims; "
                  "size as value (x.shape[1])", Shared(), (rnd(3, 5), rnd(3, 5)), dynamic_shapes=ds, cases=cases)


# ---- mutation -------------------------------------------------------------------------


class MutBuf(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.bn = nn.BatchNorm1d(4)  # train mode: running_mean/var, num_batches_tracked mutate
        self.register_buffer("offset", torch.linspace(-1, 1, 4), persistent=False)
        self.register_buffer("ema", torch.zeros(4), persistent=False)

    def forward(self, x):
        self.count += 1
        y = self.bn(x)
        self.ema.mul_(0.9).add_(0.1 * y.mean(0))
        return y + self.offset + self.count, self.ema * 1.0


def _mutbuf(name, core):
    seeded(7)
    m = MutBuf().train()
    return single(name, "buffer mutation: counter `count += 1` (int64 0-d), BatchNorm1d in train mode "
                  "(running stats + num_batches_tracked), non-persistent buffers (read-only `offset`, mutated `ema`); "
                  + ("core ATen (functional: BUFFER_MUTATION outputs)" if core else
                     "training IR (in-place add_/mul_/copy_/batch_norm on buffer placeholders, "
                     "no BUFFER_MUTATION outputs)"),
                  m, (rnd(8, 4),), core=core)


@fixture("mutate_buffer")
def _f():
    return _mutbuf("mutate_buffer", False)


@fixture("mutate_buffer_core")
def _f():
    return _mutbuf("mutate_buffer_core", True)


class KvCache(nn.Module):
    """A decoder step's state as static-cache language models keep it: the new keys written
    at their positions with index_copy_ (index_put in core ATen), the values through a slice
    assignment (slice_scatter), a hit count per position through index_put; the output reads
    the updated caches. Core ATen returns each update as a new value written back to its
    buffer (what the reinplace pass turns into in-place writes). (A whole-buffer `copy_` is
    not here: export returns its source as the buffer's new value, with no `copy` node.)"""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("k", torch.zeros(2, 8, 4))  # [heads, max_len, dim]
        self.register_buffer("v", torch.zeros(2, 8, 4))
        self.register_buffer("hits", torch.zeros(8))

    def forward(self, x, pos):
        # x: [heads, n, dim], pos: [n] positions in the cache.
        self.k.index_copy_(1, pos, self.proj(x))
        self.v[:, 2:2 + x.shape[1]] = x * 2.0
        self.hits[pos] = self.hits[pos] + 1.0
        att = torch.softmax(self.k @ self.v.transpose(1, 2), dim=-1)
        return att @ self.v + self.hits[:, None]


@fixture("kv_cache_core")
def _f():
    seeded(11)
    m = KvCache().eval()
    with torch.no_grad():
        m.k.normal_()
        m.hits.uniform_(0, 3)
    pos = torch.tensor([5, 3], dtype=torch.int64)
    return single("kv_cache_core", "buffer updates as a static KV cache makes them (index_copy_, a slice "
                  "assignment, index_put), core ATen: functional updates returned as BUFFER_MUTATION "
                  "outputs, reinplaced by pt2web's reinplace pass", m, (rnd(2, 2, 4), pos), core=True)


class ShapeMask(nn.Module):
    """Masks built from the input's shape alone, as torchvision's Swin builds its
    shifted-window attention mask: `new_zeros` of the sequence length, slice assignments
    into it, and a causal mask from `arange`; none reads the input's values, so with static
    shapes the constant-folding pass computes them at load."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):  # [batch, seq, 8]
        n = x.shape[1]
        m = x.new_zeros(n, n)
        m[:, : n // 2] = -1.0
        m[n // 2 :, n // 2 :] = -2.0
        idx = torch.arange(n)
        causal = (idx[None, :] > idx[:, None]).float() * -1e4
        scores = x @ x.transpose(1, 2) + m + causal
        return torch.softmax(scores, dim=-1) @ self.lin(x)


@fixture("shape_mask_core")
def _f():
    seeded(13)
    return single("shape_mask_core", "masks from the input's shape only (new_zeros, slice assignments, "
                  "arange comparisons), core ATen: folded to constants at load", ShapeMask().eval(),
                  (rnd(2, 6, 8),), core=True)


class ConvBnF16(nn.Module):
    """Convolutions with batch norms, in half precision (`model.half()`): for folding the
    batch norms into f16 weights."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 4, 1)
        self.bn2 = nn.BatchNorm2d(4)
        with torch.no_grad():
            for bn in (self.bn, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.bn2(self.conv2(torch.relu(self.bn(self.conv(x)))))


@fixture("conv_bn_f16_core")
def _f():
    seeded(15)
    return single("conv_bn_f16_core", "conv (no bias) + batch norm + relu, conv + batch norm, all f16 "
                  "(model.half()), core ATen: batch norms fold into f16 weights",
                  ConvBnF16().half().eval(), (rnd(1, 3, 8, 8).half(),), core=True)


class SwinBlock(nn.Module):
    """torchvision's shifted-window attention with a pre-norm, small: the training IR writes
    its shift mask with `fill_` through slices of `new_zeros`, pads by zero, adds the
    relative-position bias and the shift mask through a rank-5 view, and attends with
    `matmul` / `softmax.int`."""

    def __init__(self):
        super().__init__()
        from torchvision.models.swin_transformer import ShiftedWindowAttention

        self.norm = nn.LayerNorm(16)
        self.attn = ShiftedWindowAttention(16, [4, 4], [2, 2], num_heads=2)

    def forward(self, x):  # [batch, h, w, 16]
        return x + self.attn(self.norm(x))


@fixture("swin_block_train")
def _f():
    seeded(14)
    return single("swin_block_train", "torchvision ShiftedWindowAttention (dim 16, window 4, shift 2, "
                  "2 heads) after a LayerNorm, training IR: fill_ through slices, zero pad, "
                  "two masks, matmul attention", SwinBlock().eval(), (rnd(1, 8, 8, 16),))


class MutInput(nn.Module):
    def forward(self, x, y):
        x.add_(1)
        return x * 2 + y


def _mutinput(name, core):
    seeded(8)
    return single(name, "user-input mutation: x.add_(1) on input x; y read-only; "
                  + ("core ATen (functional: USER_INPUT_MUTATION output)" if core else
                     "training IR (in-place add_ on the input placeholder, no mutation output)"),
                  MutInput(), (rnd(3, 4), rnd(3, 4)), core=core)


@fixture("mutate_input")
def _f():
    return _mutinput("mutate_input", False)


@fixture("mutate_input_core")
def _f():
    return _mutinput("mutate_input_core", True)


# ---- pytree containers -----------------------------------------------------------------


class Point(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


torch.export.register_dataclass(Pair, serialized_type_name="pt2web_fixtures.Pair")
pytree._register_namedtuple(Point, serialized_type_name="pt2web_fixtures.Point")
# pytree_io's data/sample_inputs/model.pt pickles __main__.Point / __main__.Pair; let torch's
# weights_only loader accept them when we reload (otherwise it warns and falls back).
torch.serialization.add_safe_globals([Point, Pair])


class PytreeIO(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, d, lst, tup, p, *, pair, scale):
        s = d["a"] + d["b"] * lst[0] - lst[1]
        return {
            "sum": self.fc(s),
            "list": [tup[0] * 2, tup[1] + 1, p.x * p.y],
            "tuple": (pair.a - pair.b, scale * 3),
            "point": Point(p.x + 1, p.y - 1),
            "pair": Pair(a=pair.b, b=pair.a * scale),
        }


@fixture("pytree_io")
def _f():
    seeded(9)
    args = ({"a": rnd(2, 4), "b": rnd(2, 4)}, [rnd(2, 4), rnd(2, 4)], (rnd(3), rnd(3)), Point(rnd(5), rnd(5)))
    kwargs = {"pair": Pair(rnd(2), rnd(2)), "scale": rnd(())}
    return single("pytree_io", "dict/list/tuple/namedtuple(Point)/dataclass(Pair) inputs and outputs, "
                  "keyword-only inputs, a 0-d input; serialized type names pt2web_fixtures.Point/Pair",
                  PytreeIO().eval(), args, kwargs)


class TinyEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(8, 8)

    def forward(self, input_ids):
        h0 = self.emb(input_ids)
        h1 = torch.tanh(self.fc(h0))
        return BaseModelOutput(last_hidden_state=h1, hidden_states=(h0, h1))


@fixture("model_output")
def _f():
    seeded(10)
    ids = torch.randint(0, 20, (2, 5))
    return single("model_output", "output is transformers.modeling_outputs.BaseModelOutput (a ModelOutput "
                  "pytree node; attentions=None is dropped), nested tuple field hidden_states",
                  TinyEncoder().eval(), (ids,))


# ---- tied weights / aliasing ------------------------------------------------------------


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.register_buffer("base", torch.arange(12.0))
        self.register_buffer("view", self.base.view(3, 4)[:, 1:3])  # offset 1, strides (4, 1)
        self.register_buffer("tview", self.base.view(3, 4).t())  # strides (1, 4)

    def forward(self, idx):
        h = self.emb(idx)
        return self.head(h), self.view.sum(0) + self.tview[1:3, 0], self.tview @ self.base[:3]


@fixture("tied")
def _f():
    seeded(11)
    return single("tied", "tied weights (emb.weight is head.weight, one storage); buffers `view` "
                  "(offset 1, strides [4,1]) and `tview` (strides [1,4]) are views of buffer `base`",
                  Tied().eval(), (torch.tensor([[1, 2, 3], [9, 0, 4]]),))


# ---- dtypes / constants / 0-d / empty ----------------------------------------------------


class Dtypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin16 = nn.Linear(8, 8).to(torch.float16)
        self.wbf = nn.Parameter(torch.randn(8).to(torch.bfloat16))
        self.register_buffer("ids", torch.tensor([3, 1, 4, 1], dtype=torch.int64))
        self.register_buffer("mask", torch.tensor([True, False] * 4))
        self.register_buffer("scale", torch.tensor(1.5))  # 0-d
        self.register_buffer("empty", torch.zeros(0))  # empty buffer
        self.table = torch.arange(10, dtype=torch.int64) * 7  # tensor constant (plain attribute)
        self.fconst = torch.linspace(0, 1, 8)  # f32 tensor constant

    def forward(self, x, idx, m, h, s, e):
        lin = self.lin16(h)  # f16
        bf = x.to(torch.bfloat16) * self.wbf  # bf16
        boolean = m & self.mask  # bool
        ints = self.table[idx] + self.ids[: idx.shape[0]]  # i64
        zero_d = (x.sum() * self.scale + s)  # 0-d f32
        emp = torch.cat([self.empty, x[0]]) + self.fconst  # cat with empty
        return lin, bf, boolean, ints, zero_d, emp, e * 2, e.sum(0), self.empty * 3


@fixture("dtypes")
def _f():
    seeded(12)
    args = (rnd(2, 8), torch.tensor([0, 9, 5, 2]), torch.tensor([True, True, False, True] * 2),
            rnd(2, 8, dtype=torch.float16), torch.tensor(0.25), torch.zeros(0, 4))
    return single("dtypes", "dtypes f32/f16/bf16/i64/bool in params, buffers, inputs and outputs; "
                  "tensor constants (plain tensor attributes `table` i64 and `fconst` f32); 0-d buffer, "
                  "input and output; empty buffer [0], empty input [0,4], empty outputs",
                  Dtypes().eval(), args)


# ---- archive features -----------------------------------------------------------------


@fixture("extra_files")
def _f():
    seeded(13)
    cfg = {"model_type": "mlp", "hidden": 32, "labels": ["a", "b"], "nested": {"k": 1.5}}
    fx = single("extra_files", "extra files in the archive: extra/note.txt and extra/config.json",
                MLP(8, 16, 4).eval(), (rnd(2, 8),),
                extra_files={"note.txt": "pt2web fixture: hello from extra_files\nsecond line \u00e9\n",
                             "config.json": json.dumps(cfg)})
    return fx


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)

    def forward(self, x):
        return F.gelu(self.fc(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.register_buffer("bias2", torch.linspace(-1, 1, 8))

    def forward(self, h):
        return torch.tanh(self.fc(h)) + self.bias2


@fixture("multi_program")
def _f():
    seeded(14)
    enc, dec = Encoder().eval(), Decoder().eval()
    x, h = rnd(3, 8), rnd(3, 16)
    batch = Dim("batch", min=1, max=16)
    ep_a = export(pristine(enc), (x,), dynamic_shapes={"x": {0: batch}})
    ep_b = export(pristine(dec), (h,)).run_decompositions()
    # The decoder on the encoder's eager output: the stream tests feed one program's GPU
    # output to the other (tests/gpu_streams.rs).
    with torch.no_grad():
        chained = pristine(enc)(x)
    return Fixture("multi_program", "two programs in one archive via package_pt2(exported_programs="
                   "{'encoder': training IR with dynamic batch, 'decoder': core ATen}), plus extra file",
                   {"encoder": Program(ep_a, "training", enc, [Case((x,), label="example"),
                                                              Case((rnd(1, 8),), label="b1")]),
                    "decoder": Program(ep_b, "core_aten", dec, [Case((h,), label="example"),
                                                                Case((chained,), label="chained")])},
                   extra_files={"README.txt": "encoder then decoder"}, multi=True)


# ---- control flow -----------------------------------------------------------------------


class Cond(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        def true_fn(x):
            return self.fc(x).sin() * 2

        def false_fn(x):
            return x.cos() - 1

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


@fixture("cond")
def _f():
    seeded(15)
    x = rnd(3, 4).abs()
    return single("cond", "torch.cond on a data-dependent predicate x.sum() > 0; true branch uses a "
                  "parameter (lifted into the subgraph's inputs); cases for both branches",
                  Cond().eval(), (x,), cases=[Case((-rnd(3, 4).abs(),), label="false_branch")])


# ---- a tiny real transformer ------------------------------------------------------------


def _tiny_gpt2(name, core):
    from transformers import GPT2Config, GPT2LMHeadModel

    seeded(16)
    # torch 2.15's run_decompositions() fails on GPT-2's sdpa path ("Cannot view a tensor with
    # shape [b, s, 16] and strides (16, 16*b, 1)": the decomposed sdpa returns other strides than
    # its meta said, and a later reshape had been traced as a view), so the core variant uses
    # transformers' "eager" attention (matmul + softmax), which decomposes fine.
    attn = "eager" if core else "sdpa"
    cfg = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2, use_cache=False,
                     attn_implementation=attn, bos_token_id=0, eos_token_id=0)
    m = GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 64, (2, 8))
    b = Dim("batch", min=1, max=8)
    s = Dim("seq", min=2, max=32)
    cases = [Case((torch.randint(0, 64, (1, 3)),), label="b1s3"), Case((torch.randint(0, 64, (3, 32)),), label="b3s32")]
    return single(name, "tiny GPT-2 (transformers GPT2LMHeadModel, 1 layer, n_embd 16, vocab 64, tied lm_head), "
                  "dynamic batch and seq, ModelOutput output; "
                  + ("core ATen, eager (matmul/softmax) attention" if core else "training IR, sdpa attention"),
                  m, (ids,), dynamic_shapes={"input_ids": {0: b, 1: s}}, cases=cases, core=core)


@fixture("tiny_gpt2")
def _f():
    return _tiny_gpt2("tiny_gpt2", False)


@fixture("tiny_gpt2_core")
def _f():
    return _tiny_gpt2("tiny_gpt2_core", True)


# ---- weights quantized with torchao ----------------------------------------------------------


class QuantMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 32)
        self.up = nn.Linear(32, 48)
        self.down = nn.Linear(48, 16)

    def forward(self, ids):
        return self.down(F.gelu(self.up(self.emb(ids))))


def _quant(name, config, what):
    # torchao 0.18 (tests/requirements.txt). A quantized weight is a tensor subclass: the
    # training IR stores it pickled as that class (pt2web refuses it, saying why), and
    # run_decompositions() lowers it to plain tensors (int8 values, scales, zero points) and
    # the ops that dequantize them (_to_copy, sub, mul) before the matmul.
    from torchao.quantization import quantize_

    seeded(21)
    m = QuantMLP().eval()
    quantize_(m, config)
    ids = torch.randint(0, 40, (2, 5))
    cases = [Case((torch.randint(0, 40, (2, 5)),), label="other_ids")]
    return single(name, f"torchao {what} weight-only quantization of two Linear layers (an "
                  "Embedding stays f32), core ATen (dequantize ops before mm/addmm)",
                  m, (ids,), core=True, cases=cases)


@fixture("quant_int8_core")
def _f():
    from torchao.quantization import Int8WeightOnlyConfig

    return _quant("quant_int8_core", Int8WeightOnlyConfig(), "int8 per-channel")


@fixture("quant_int4_core")
def _f():
    from torchao.quantization import IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerGroup

    return _quant("quant_int4_core", IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(16)),
                  "int4 groupwise (group 16, asymmetric)")


# ---- PT2E quantization (torchao's prepare_pt2e / convert_pt2e) ------------------------------


class QuantConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(y.flatten(1))


def _pt2e(name, what, *, per_channel, dynamic, core):
    # XNNPACK's quantizer config (symmetric int8 weights, -127..127; activations int8 affine),
    # calibrated on a few batches; convert_pt2e folds the weights' quantize into int8
    # constants, so the graph holds dequantize_per_channel / _per_tensor of them, and
    # quantize / dequantize pairs (or choose_qparams, when dynamic) on the activations.
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import (XNNPACKQuantizer,
                                                         get_symmetric_quantization_config)

    seeded(31)
    m = QuantConvNet().eval()
    x = torch.randn(2, 3, 8, 8)
    cfg = get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic)
    g = export(m, (x,)).module()
    g = prepare_pt2e(g, XNNPACKQuantizer().set_global(cfg))
    for _ in range(4):
        g(torch.randn(2, 3, 8, 8))
    g = convert_pt2e(g)

    def stable(scale):
        # An activation exactly on a rounding boundary flips a quantization step under any
        # reordering of the float sums before it (pt2web's convolution sums in another order
        # than torch's), so the inputs are drawn until a relative jitter of 2e-6 leaves the
        # output unchanged.
        while True:
            t = torch.randn(2, 3, 8, 8) * scale
            with torch.no_grad():
                y = g(t)
                if all(torch.allclose(g(t * (1 + e)), y, rtol=0, atol=1e-5) for e in (2e-6, -2e-6)):
                    return t

    x = stable(1.0)
    cases = [Case((stable(1.5),), label="wider")]
    return single(name, f"PT2E {what} (torchao convert_pt2e, XNNPACK's quantizer config) of a "
                  "conv + relu + pool + linear net: quantized_decomposed ops", g, (x,), core=core,
                  cases=cases)


@fixture("pt2e_static")
def _f():
    return _pt2e("pt2e_static", "static int8, per-channel weights", per_channel=True, dynamic=False, core=False)


@fixture("pt2e_static_core")
def _f():
    return _pt2e("pt2e_static_core", "static int8, per-tensor weights, core ATen", per_channel=False,
                 dynamic=False, core=True)


@fixture("pt2e_dynamic")
def _f():
    return _pt2e("pt2e_dynamic", "dynamic int8 (choose_qparams on the activations), per-channel "
                 "weights", per_channel=True, dynamic=True, core=False)


# ======================================================================================
# writing and verifying
# ======================================================================================


def prog_file(fx: Fixture, prog: str, kind: str, label: str | None = None) -> str:
    base = fx.name if not fx.multi else f"{fx.name}.{prog}"
    if label is None:
        return f"{base}.{kind}.safetensors"
    return f"{base}.{kind}.{label}.safetensors"


def write_fixture(fx: Fixture, outdir: str, state_limit: int = STATE_LIMIT) -> dict:
    # 1. eager references
    metas = {}
    for pname, prog in fx.programs.items():
        pm, state = common.program_meta(prog.ep, prog.ir)
        for c in prog.cases:
            common.run_eager(prog.module, c)
        metas[pname] = (pm, state)

    # 2. the archive (written under its final file name: torch names the zip's folder after it)
    final = os.path.join(outdir, f"{fx.name}.pt2")
    with tempfile.TemporaryDirectory() as td:
        tmp = os.path.join(td, f"{fx.name}.pt2")
        if fx.multi:
            from torch.export.pt2_archive._package import package_pt2

            package_pt2(tmp, exported_programs={k: p.ep for k, p in fx.programs.items()},
                        extra_files=fx.extra_files)
        else:
            torch.export.save(fx.programs["model"].ep, tmp, extra_files=fx.extra_files)
        if os.path.exists(final) and common.same_archive_content(tmp, final):
            pass  # unchanged; keep the committed bytes
        else:
            shutil.copyfile(tmp, final)

    # 3. io + state files and meta
    programs_meta = {}
    for pname, prog in fx.programs.items():
        pm, state = metas[pname]
        input_names = [u["name"] for u in pm["user_inputs"]]
        cases_meta = []
        for i, c in enumerate(prog.cases):
            fname = prog_file(fx, pname, "io") if i == 0 else prog_file(fx, pname, "io", c.label)
            cases_meta.append(common.write_io(os.path.join(outdir, fname), c))
        total = sum(t.numel() * t.element_size() for t in state.values())
        state_file = None
        if total <= state_limit:
            state_file = prog_file(fx, pname, "state")
            common.save_safetensors(common.state_tensors(state), os.path.join(outdir, state_file))
        common.remove_other_cases(outdir, prog_file(fx, pname, "io")[: -len(".io.safetensors")],
                                  [c["file"] for c in cases_meta])
        pm.update({
            "io": cases_meta[0]["file"],
            "input_names": input_names,
            "io_cases": cases_meta,
            "state": state_file,
        })
        programs_meta[pname] = pm

    extra = {}
    for k, v in (fx.extra_files or {}).items():
        b = v.encode("utf-8")
        extra[k] = {"sha256": common.sha256_bytes(b), "nbytes": len(b), "content": v}

    entries = common.archive_entries(final)
    meta = {
        "name": fx.name,
        "meta_format": common.META_FORMAT_VERSION,
        "covers": fx.covers,
        "torch_version": torch.__version__,
        "layout": "pt2",
        "archive": os.path.basename(final),
        "archive_prefix": entries[0].split("/")[0],
        "archive_entries": entries,
        "schema_version": _schema_version(),
        "extra_files": extra,
        "verified_tolerance": fx.tolerance,
        "programs": programs_meta,
    }
    if fx.info:
        meta["model_info"] = fx.info
    common.dump_json(meta, os.path.join(outdir, f"{fx.name}.meta.json"))
    return meta


def _schema_version():
    from torch._export.serde.schema import SCHEMA_VERSION

    return list(SCHEMA_VERSION)


def verify_fixture(fx: Fixture, outdir: str, meta: dict) -> None:
    """Load the archive back with torch and check it reproduces eager outputs/mutations."""
    path = os.path.join(outdir, f"{fx.name}.pt2")

    def load_programs():
        if fx.multi:
            from torch.export.pt2_archive._package import load_pt2

            c = load_pt2(path)
            return c.exported_programs, c.extra_files
        extra = {k: "" for k in (fx.extra_files or {})}
        ep = torch.export.load(path, extra_files=extra)
        return {"model": ep}, extra

    eps, extra = load_programs()
    if set(eps) != set(fx.programs):
        raise AssertionError(f"{fx.name}: programs {sorted(eps)} != {sorted(fx.programs)}")
    for k, v in (fx.extra_files or {}).items():
        if extra.get(k) != v:
            raise AssertionError(f"{fx.name}: extra file {k} differs after load")

    for pname, prog in fx.programs.items():
        pm = meta["programs"][pname]
        ep = eps[pname]
        # state bit-exact
        _, state = common.program_meta(ep, prog.ir)
        if pm["state"]:
            from safetensors.torch import load_file

            saved = load_file(os.path.join(outdir, pm["state"]))
            for fqn, t in state.items():
                if not torch.equal(saved[fqn], t.contiguous()):
                    raise AssertionError(f"{fx.name}/{pname}: state {fqn} differs after load")
        for case, cmeta in zip(prog.cases, pm["io_cases"]):
            # Use the io file as the Rust tests will: inputs and expected values from disk.
            from safetensors.torch import load_file

            io = load_file(os.path.join(outdir, cmeta["file"]))
            leaves, spec = pytree.tree_flatten((case.args, case.kwargs))
            file_leaves = [io[f"input_{i}"] if isinstance(x, torch.Tensor) else x for i, x in enumerate(leaves)]
            for a, b in zip(leaves, file_leaves):
                if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                    raise AssertionError(f"{fx.name}: io file input differs from the case input")
            args, kwargs = pytree.tree_unflatten(file_leaves, spec)
            expected = [io[o["key"]] if o["key"] else v for o, v in zip(cmeta["outputs"], case.outputs)]
            common.compare_outputs(case.outputs, expected, f"{fx.name}: io file outputs", 0, 0)

            eps, _ = load_programs()  # fresh state per call (mutations)
            mod = eps[pname].module()
            with torch.no_grad():
                out = mod(*args, **kwargs)
            what = f"{fx.name}/{pname}/{case.label}"
            tol = fx.tolerance or {}
            common.compare_outputs(expected, common.flatten(out), what, tol.get("rtol"), tol.get("atol"))
            bufs = dict(mod.named_buffers(remove_duplicate=False))
            for key in cmeta["buffers_after"]:
                fqn = key[len("buffer_after."):]
                torch.testing.assert_close(bufs[fqn], io[key], msg=lambda m: f"{what}: buffer {fqn}: {m}")
            for fqn, t in bufs.items():  # buffers the eager call left alone must be unchanged too
                if f"buffer_after.{fqn}" not in io and fqn in state:
                    torch.testing.assert_close(t, state[fqn], msg=lambda m: f"{what}: buffer {fqn} changed: {m}")
            flat_in = common.flatten((args, kwargs))
            for i, t in enumerate(flat_in):
                if isinstance(t, torch.Tensor):
                    want = io.get(f"input_after_{i}", io[f"input_{i}"])
                    torch.testing.assert_close(t, want, msg=lambda m: f"{what}: input {i}: {m}")


def remove_stale(outdir: str) -> None:
    """Full regeneration: drop files of fixtures this script wrote earlier but no longer
    builds (recognised by their NAME.meta.json with layout "pt2" and a "covers" key)."""
    for f in os.listdir(outdir):
        if not f.endswith(".meta.json"):
            continue
        try:
            with open(os.path.join(outdir, f)) as fh:
                m = json.load(fh)
        except Exception:
            continue
        name = m.get("name")
        if m.get("layout") != "pt2" or "covers" not in m or name in BUILDERS or not name:
            continue
        for g in os.listdir(outdir):
            if g == f"{name}.pt2" or (g.startswith(f"{name}.") and
                                      (g.endswith(".safetensors") or g.endswith(".meta.json"))):
                os.remove(os.path.join(outdir, g))
                print(f"  removed stale {g}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated fixture names")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--out", default=common.FIXTURES)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    names = [n for n in a.only.split(",") if n] or list(BUILDERS)
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        print(f"unknown fixtures: {unknown}; known: {list(BUILDERS)}", file=sys.stderr)
        return 2
    if not a.only:
        remove_stale(a.out)
    failures = []
    t_all = time.time()
    for n in names:
        t0 = time.time()
        try:
            fx = BUILDERS[n]()
            meta = write_fixture(fx, a.out)
            if not a.no_verify:
                verify_fixture(fx, a.out, meta)
            print(f"  {n:24s} ok  {time.time() - t0:5.1f}s  {fx.covers[:70]}", flush=True)
        except Exception as e:  # keep going, report at the end
            import traceback

            traceback.print_exc()
            failures.append((n, repr(e)))
            print(f"  {n:24s} FAILED: {e!r}", flush=True)
    print(f"{len(names) - len(failures)}/{len(names)} fixtures in {time.time() - t_all:.1f}s -> {a.out}")
    for n, e in failures:
        print(f"FAILED {n}: {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
