"""Chains of elementwise ops that the fusion pass (src/passes/fuse.rs) makes one node: the
activations models spell out (hardswish, tanh GELU, SiLU), broadcasting, number operands,
`where` with a bool condition, strided inputs, chains too wide for one kernel, and values a
chain must not swallow (read twice, or returned). Expected values come from eager PyTorch."""
import torch

from .case import Case, randn

nan, inf = float("nan"), float("inf")


def hardswish_spelled(x):
    # mobilenet_v3 after run_decompositions: x * clamp(x + 3, 0, 6) / 6
    return x * torch.clamp(x + 3, 0, 6) / 6


def gelu_tanh_spelled(x):
    # GPT-2's gelu_new
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def bias_act_scale(x, b):
    # a bias over the last dim, then an activation and a scale: broadcast inputs
    return torch.nn.functional.leaky_relu(x + b, 0.2) * 0.5 - 1


def silu_residual(x, y):
    return torch.sigmoid(x) * x + y


def masked(x, m):
    # where with a bool condition from outside, numbers around it
    return torch.where(m, x * 2.0, x - 1.0).relu()


def mask_made_inside(x, y):
    # the condition is computed from x (a comparison is not fused: bool), the rest is
    return torch.where(x > 0, torch.exp(x), y * y) + 1


def transposed(x, y):
    # strided (permuted) and broadcast inputs
    return torch.tanh(x.transpose(0, 1) * y) + x.transpose(0, 1)


def scalar_tensor(x, s):
    # a 0-d tensor operand
    return (x - s) * (x + s) / 3


def specials(x):
    # NaN and infinities through a chain, clamps with one bound, an infinite number
    return torch.clamp(torch.clamp(x * 2, min=-1.0), max=inf) + torch.minimum(x, torch.full_like(x, -0.5)).abs()


def wide(a, b, c, d, e, f, g, h):
    # eight inputs: more than one kernel binds, so the chain is split
    return ((a + b) * (c - d) + (e * f)) / (g.abs() + 1) - h


def read_twice(x):
    # `t` is read by two chains' nodes: it ends its own chain
    t = torch.exp(x) * 0.5
    return torch.sin(t) + 1, torch.cos(t) - 1


def returned(x):
    # an intermediate that is also an output stays a value of its own
    t = torch.relu(x) + 1
    return t, t * t - 2


def rsub_pow(x, y):
    return torch.pow(1 - x, 2) + torch.pow(torch.abs(y) + 0.1, x) * 0.25


def hardtanh_relu6(x):
    return torch.nn.functional.relu6(x * 3) + torch.nn.functional.hardtanh(x - 0.5, -0.25, 0.75) * 2


def gelu_erf_chain(x, y):
    return torch.nn.functional.gelu(x * 1.5 + y) * torch.rsqrt(y * y + 1e-5)


def dynamic_batch(x, b):
    return torch.nn.functional.silu(x * b + 0.5) - x


CASES = [
    Case("hardswish_spelled", hardswish_spelled, [randn(2, 8, 5, 5, seed=1) * 4]),
    Case("gelu_tanh_spelled", gelu_tanh_spelled, [randn(3, 16, seed=2) * 3]),
    Case("bias_act_scale", bias_act_scale, [randn(2, 4, 8, seed=3), randn(8, seed=4)]),
    Case("silu_residual", silu_residual, [randn(4, 6, seed=5), randn(4, 6, seed=6)]),
    Case("masked", masked, [randn(3, 5, seed=7), randn(3, 5, seed=8) > 0]),
    Case("mask_made_inside", mask_made_inside, [randn(4, 4, seed=9), randn(4, 4, seed=10)]),
    Case("transposed", transposed, [randn(5, 3, seed=11), randn(3, 1, seed=12)]),
    Case("scalar_tensor", scalar_tensor, [randn(2, 3, seed=13), torch.tensor(0.75)]),
    Case("specials", specials, [torch.tensor([[-2.5, -1.0, -0.0, 0.0, 0.5], [3.7, nan, inf, -inf, -0.3]])]),
    Case("wide", wide, [randn(2, 3, seed=20 + i) for i in range(8)]),
    Case("read_twice", read_twice, [randn(3, 4, seed=14)]),
    Case("returned", returned, [randn(3, 4, seed=15)]),
    Case("rsub_pow", rsub_pow, [randn(4, 5, seed=16), randn(4, 5, seed=17)]),
    Case("hardtanh_relu6", hardtanh_relu6, [randn(3, 7, seed=18)]),
    Case("gelu_erf_chain", gelu_erf_chain, [randn(2, 9, seed=19), randn(2, 9, seed=29)]),
    Case(
        "dynamic_batch",
        dynamic_batch,
        [randn(3, 6, seed=30), randn(6, seed=31)],
        dynamic_shapes=(({0: torch.export.Dim("batch", min=1, max=16)}, None),),
    ),
]
