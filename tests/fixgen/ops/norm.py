"""Normalization layers (src/ops/norm.rs). local_response_norm, F.normalize and (in core ATen)
rms_norm decompose into other families' ops; they are here as end-to-end checks."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .case import ONE, Case, long_ints, randn

A = torch.ops.aten
f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64


def seeded(m: nn.Module, seed=1) -> nn.Module:
    """Random affine parameters and running statistics, so they matter in the result."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in list(m.parameters()) + [b for b in m.buffers() if b.is_floating_point()]:
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5 + (1.0 if p.ndim == 1 else 0.0))
        for name, b in m.named_buffers():
            if "running_var" in name:
                b.abs_().add_(0.1)
    return m


class TrainBN(nn.Module):
    """A batch norm in training mode (Case.module() calls eval(); this one stays in train). Only
    the output is compared: the generator's eager call has already updated the module's running
    statistics once before export, so the updated buffers are checked by bn_functional_train
    (running stats passed as inputs) instead."""

    def __init__(self, bn):
        super().__init__()
        self.bn = bn

    def eval(self):
        return self.train()

    def forward(self, x):
        return self.bn(x)


def bn_functional_train(x, rm, rv, w, b):
    y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3, eps=1e-3)
    return y, rm, rv



def norm_long_rows(n):
    """batch_norm's statistics over 100,000 values per channel (training) and rms_norm over
    rows of 100,000 (past lavapipe's loop cap, issue 17); every 1009th value of the outputs."""
    x = long_ints(n, 200_000, 10_007, 5_000).reshape(50_000, 2, 2) / 1000
    y = long_ints(n, 200_000, 9_973, 4_000).reshape(2, 100_000) / 1000
    return (F.batch_norm(x, None, None, training=True)[::1009],
            F.rms_norm(y, (100_000,))[:, ::1009])


CASES = [
    # batch norm
    Case("bn2d_eval", seeded(nn.BatchNorm2d(3)), [randn(2, 3, 4, 5)]),
    Case("bn1d_eval_2d", seeded(nn.BatchNorm1d(4)), [randn(5, 4)]),
    Case("bn1d_eval_3d_noaffine", seeded(nn.BatchNorm1d(4, affine=False)), [randn(2, 4, 3)]),
    Case("bn2d_eval_noncontig", lambda x, m, v, w, b: F.batch_norm(x.permute(0, 3, 1, 2), m, v, w, b, eps=1e-3), [randn(2, 4, 5, 3), randn(3, seed=1), randn(3, seed=2).abs(), randn(3, seed=3), randn(3, seed=4)]),
    Case("bn2d_train", TrainBN(seeded(nn.BatchNorm2d(3, momentum=0.2))), [randn(4, 3, 2, 3)]),
    Case("bn1d_train_no_stats", lambda x: F.batch_norm(x, None, None, training=True), [randn(6, 3)]),
    Case("bn_functional_train", bn_functional_train, [randn(4, 3, 5), torch.zeros(3), torch.ones(3), randn(3, seed=1), randn(3, seed=2)]),
    Case("bn2d_eval_f16", lambda x, m, v: F.batch_norm(x, m, v), [randn(2, 3, 4, dtype=f16), randn(3, seed=1), randn(3, seed=2).abs()], tol="half"),
    Case("bn2d_eval_f64", seeded(nn.BatchNorm2d(2).double()), [randn(2, 2, 3, 3, dtype=f64)], core=False),
    Case("native_batch_norm_train", lambda x, w, b: A.native_batch_norm.default(x, w, b, None, None, True, 0.1, 1e-5), [randn(3, 2, 4), randn(2, seed=1), randn(2, seed=2)], core=False),
    Case("native_batch_norm_eval", lambda x, m, v: A.native_batch_norm.default(x, None, None, m, v, False, 0.1, 1e-5)[0], [randn(3, 2, 4), randn(2, seed=1), randn(2, seed=2).abs()], core=False),
    # layer norm
    Case("layer_norm", seeded(nn.LayerNorm(8)), [randn(2, 3, 8)]),
    Case("layer_norm_2d_shape", seeded(nn.LayerNorm((3, 4))), [randn(2, 3, 4)]),
    Case("layer_norm_noaffine", nn.LayerNorm(6, elementwise_affine=False), [randn(4, 6)]),
    Case("layer_norm_nobias", seeded(nn.LayerNorm(6, bias=False)), [randn(4, 6)]),
    Case("layer_norm_noncontig", lambda x, w, b: F.layer_norm(x.transpose(0, 1), (5,), w, b, eps=1e-3), [randn(5, 3, 5), randn(5, seed=1), randn(5, seed=2)]),
    Case("layer_norm_f16", lambda x, w, b: F.layer_norm(x, (16,), w, b), [randn(3, 16, dtype=f16), randn(16, seed=1, dtype=f16), randn(16, seed=2, dtype=f16)], tol="half"),
    Case("layer_norm_bf16", lambda x: F.layer_norm(x, (16,)), [randn(3, 16, dtype=bf16)], tol="half", core=False),
    Case("native_layer_norm", lambda x, w, b: A.native_layer_norm.default(x, [4], w, b, 1e-5), [randn(3, 2, 4), randn(4, seed=1), randn(4, seed=2)], core=False),
    # group / instance norm
    Case("group_norm", seeded(nn.GroupNorm(2, 6)), [randn(2, 6, 3, 3)]),
    Case("group_norm_one_group", nn.GroupNorm(1, 4, affine=False), [randn(3, 4, 5)]),
    Case("group_norm_2d_input", seeded(nn.GroupNorm(3, 6)), [randn(4, 6)]),
    # Rows of 2 x 1600 elements: the GPU's workgroup-per-row form (rows past 1024).
    Case("group_norm_long_rows", seeded(nn.GroupNorm(2, 4)), [randn(1, 4, 40, 40)]),
    Case("native_group_norm", lambda x, w, b: A.native_group_norm.default(x, w, b, 2, 4, 6, 2, 1e-5), [randn(2, 4, 2, 3), randn(4, seed=1), randn(4, seed=2)], core=False),
    Case("instance_norm", seeded(nn.InstanceNorm2d(3, affine=True)), [randn(2, 3, 4, 4)]),
    Case("instance_norm_1d", nn.InstanceNorm1d(3), [randn(2, 3, 7)]),
    Case("instance_norm_running_eval", seeded(nn.InstanceNorm1d(3, track_running_stats=True)), [randn(2, 3, 7)]),
    # rms norm
    Case("rms_norm", seeded(nn.RMSNorm(8)), [randn(2, 3, 8)]),
    Case("rms_norm_eps", nn.RMSNorm((2, 4), eps=1e-2, elementwise_affine=False), [randn(3, 2, 4)], core=False),
    Case("rms_norm_f16", lambda x, w: F.rms_norm(x, (16,), w), [randn(3, 16, dtype=f16), randn(16, seed=1, dtype=f16)], tol="half"),
    Case("fused_rms_norm", lambda x, w: A._fused_rms_norm.default(x, [4], w, 1e-6), [randn(3, 4), randn(4, seed=1)], core=False),
    # compositions that decompose
    Case("local_response_norm", nn.LocalResponseNorm(3), [randn(2, 5, 4, 4)], core=False),
    Case("normalize_p1", lambda x: F.normalize(x, p=1.0, dim=-1), [randn(3, 4)], core=False),
    # weight normalization: _weight_norm (training IR of both weight_norm APIs) and the fused
    # _weight_norm_interface (w and the norms)
    Case("weight_norm_linear", nn.utils.parametrizations.weight_norm(nn.Linear(4, 5)), [randn(3, 4)], tol="loose"),
    Case("weight_norm_conv1d_dim1", nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 4, 3), dim=1), [randn(2, 3, 8)], tol="loose"),
    Case("weight_norm_conv2d_last", nn.utils.parametrizations.weight_norm(nn.Conv2d(2, 3, 2), dim=3), [randn(1, 2, 5, 5)], tol="loose"),
    Case("weight_norm_whole", lambda v, g: torch._weight_norm(v, g, -1), [randn(3, 4, 2), randn(1, seed=1)], tol="loose"),
    Case("weight_norm_direct", lambda v, g: torch._weight_norm(v, g, 0), [randn(5, 3), randn(5, 1, seed=1)]),
    Case("weight_norm_f64", lambda v, g: torch._weight_norm(v, g, 1), [randn(3, 4, 2, dtype=f64), randn(1, 4, 1, seed=1, dtype=f64)]),
    Case("weight_norm_interface", lambda v, g: torch._weight_norm_interface(v, g, 0), [randn(4, 3, 2), randn(4, 1, 1, seed=1)]),
    Case("weight_norm_interface_last", lambda v, g: torch._weight_norm_interface(v, g, 2), [randn(2, 3, 5), randn(1, 1, 5, seed=1)]),
]


# --- issue 16: _batch_norm_with_update (training-mode batch norm with its buffer updates)
def _bn_update(x, w, b, rm, rv):
    rm, rv = rm.clone(), rv.clone()
    out, mean, invstd, reserve = torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.3, 1e-5)
    return out, mean, invstd, reserve, rm, rv


CASES += [
    Case("batch_norm_with_update", _bn_update, [randn(4, 3, 5, seed=80), randn(3, seed=81), randn(3, seed=82),
                                                randn(3, seed=83), randn(3, seed=84).abs()]),
    Case("norm_long_rows", norm_long_rows, [ONE], tol="loose", core=False),
]
