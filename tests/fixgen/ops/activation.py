"""Activations (src/ops/activation.rs). Inputs span both sides of every branch point and
include NaN/inf, so NaN propagation and saturation match torch."""
import torch
import torch.nn.functional as F
from torch import nn

from .case import Case, randint, randn

f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64
nan, inf = float("nan"), float("inf")


def wide(*shape, seed=0, dtype=torch.float32):
    """Values over [-8, 8] plus the branch points of the hard activations."""
    x = randn(*shape, seed=seed) * 4
    flat = x.view(-1)
    edges = torch.tensor([-3.0, 0.0, 3.0, 6.0, -0.5, 0.5, 20.0, -20.0])
    flat[: min(len(edges), flat.numel())] = edges[: flat.numel()]
    return x.to(dtype)


def special():
    return torch.tensor([[nan, inf, -inf, 0.0, -0.0, 1e-3], [-1e-3, 30.0, -30.0, 2.0, -2.0, 100.0]])


def inplace(fn):
    def run(x):
        y = x.clone()
        fn(y)
        return y

    return run


def all_acts(x):
    return (
        F.relu(x), F.relu6(x), F.leaky_relu(x), F.leaky_relu(x, 0.2), F.elu(x), F.elu(x, alpha=0.5),
        F.selu(x), F.celu(x, alpha=2.0), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.mish(x),
        F.hardswish(x), F.hardsigmoid(x), F.hardtanh(x), F.hardtanh(x, -2.0, 3.0), F.softplus(x),
        F.softplus(x, beta=2.0, threshold=5.0), F.softsign(x), F.tanhshrink(x), F.threshold(x, 0.5, -1.0),
        F.logsigmoid(x), F.hardshrink(x), F.softshrink(x, 0.7), torch.sigmoid(x), torch.tanh(x),
    )


CASES = [
    Case("all_f32", all_acts, [wide(4, 8)]),
    Case("all_special", all_acts, [special()]),
    Case("all_f64", all_acts, [wide(3, 8, dtype=f64)]),
    Case("all_f16", all_acts, [wide(3, 8, dtype=f16)], tol="half"),
    Case("all_bf16", all_acts, [wide(3, 8, dtype=bf16)], tol="half"),
    Case("noncontig", lambda x: (F.relu(x.t()), F.gelu(x[:, ::2]), F.silu(x.t()[1:])), [wide(4, 6)]),
    Case("empty", lambda x: (F.relu(x), F.gelu(x), F.hardswish(x)), [randn(0, 4)]),
    Case("relu_int", lambda x: (F.relu(x), F.threshold(x, 2, -5)), [randint(-5, 5, 3, 4)], tol="exact"),
    Case("relu6_int", lambda x: F.relu6(x), [randint(-9, 9, 3, 4)], tol="exact"),
    # in-place forms (training IR keeps `relu_` & co.)
    Case("relu_", inplace(lambda y: F.relu(y, inplace=True)), [wide(3, 4)]),
    Case("hardswish_", inplace(lambda y: F.hardswish(y, inplace=True)), [wide(3, 4)]),
    Case("silu_", inplace(lambda y: F.silu(y, inplace=True)), [wide(3, 4)]),
    Case("leaky_relu_", inplace(lambda y: F.leaky_relu(y, 0.1, inplace=True)), [wide(3, 4)]),
    Case("elu_", inplace(lambda y: F.elu(y, inplace=True)), [wide(3, 4)]),
    Case("hardtanh_", inplace(lambda y: F.hardtanh(y, inplace=True)), [wide(3, 4)]),
    Case("relu6_", inplace(lambda y: F.relu6(y, inplace=True)), [wide(3, 4)]),
    Case("hardsigmoid_", inplace(lambda y: F.hardsigmoid(y, inplace=True)), [wide(3, 4)]),
    Case("gelu_inplace_view", inplace(lambda y: y[:, 1:].copy_(F.gelu(y[:, 1:]))), [wide(3, 4)]),
    Case("relu_slice_inplace", inplace(lambda y: F.relu(y[1:], inplace=True)), [wide(3, 4)]),
    # modules
    Case("gelu_tanh_module", nn.GELU(approximate="tanh"), [wide(2, 3, 4)]),
    Case("prelu_channels", nn.PReLU(num_parameters=3, init=0.1), [wide(2, 3, 4)]),
    Case("prelu_single", nn.PReLU(), [wide(2, 5)]),
    Case("prelu_2d", nn.PReLU(num_parameters=4, init=0.3), [wide(2, 4)]),
    Case("rrelu_eval", nn.RReLU(0.1, 0.3), [wide(3, 4)]),
    Case("glu", lambda x: (F.glu(x), F.glu(x, dim=0), F.glu(x, dim=1)), [wide(4, 6, 2)]),
    Case("softmin_like", lambda x: F.softplus(-x) + F.logsigmoid(x), [wide(3, 4)]),
    Case("mish_module", nn.Mish(), [wide(3, 4)]),
    Case("silu_f16_module", nn.SiLU(), [wide(3, 4, dtype=f16)], tol="half"),
]
