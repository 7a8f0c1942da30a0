"""Shape family: views (view/reshape/permute/slice/expand... sharing storage), splits, and the
copying shape ops (cat/stack/pad/roll/flip/repeat/tril...).

Related ops share a case (several outputs) to keep the fixture small: every program costs
~5 KB of archive overhead whatever its tensors."""
import torch
import torch.nn.functional as F
from torch.export import Dim

from .case import Case, randn, randint

x34 = randn(3, 4)
x234 = randn(2, 3, 4, seed=1)
x2345 = randn(2, 3, 4, 5, seed=2)
i34 = randint(-50, 50, 3, 4, seed=3)
b34 = randint(0, 2, 3, 4, seed=4, dtype=torch.bool)
h34 = randn(3, 4, seed=5, dtype=torch.float16)
bf34 = randn(3, 4, seed=6, dtype=torch.bfloat16)
u34 = randint(0, 255, 3, 4, seed=7, dtype=torch.uint8)
empty = torch.empty(0, 4)


def _views(x, y, z):
    return x.view(4, 3), x.view(-1, 2), y.view(-1, 6), y.view(4, -1, 3), x.view_as(z)


def _view_0d(a, b):
    return a.view(1, 1), b.view(())


def _reshape(x, y, e, z):
    # A transposed input cannot be viewed: reshape copies; a row slice can be viewed.
    return x.t().reshape(12), y[:, 1:].reshape(-1, 2, 2), e.reshape(2, 0, 2), x.t().reshape_as(z)


def _flatten(x, s, y):
    return x.flatten(1), x.flatten(1, 2), s.flatten(), y.transpose(0, 2).flatten(), y.reshape(2, 12).unflatten(1, (2, -1))


def _squeeze(a, b):
    return a.squeeze(), b.squeeze(-2), b.squeeze(0), a.squeeze((0, 2)), b.unsqueeze(0), b.unsqueeze(-1), b.unsqueeze(1)


def _permute(x, y, v, z):
    return (
        y.permute(2, 0, 1),
        y.permute(-1, -3, -2).contiguous(),
        y.transpose(0, -1),
        x.t(),
        v.t(),
        y.T,
        y.mT,
        torch.swapaxes(y, 0, 1),
        torch.movedim(y, 0, -1),
        torch.movedim(z, (0, 3), (2, 0)),
    )


def _expand(a, b, x, c):
    return a.expand(2, 3, 4), a.expand(-1, 5), b.expand_as(x), torch.broadcast_to(c, (2, 3, 4)), a.expand(2, 3, 4).reshape(6, 4)


def _slice(a, b, c, x):
    return a[1:3], a[1:100], a[-100:2], a[3:1], b[:, ::2], c[:, 1::3], x[-2:, -3:-1], x.t()[1:, :2]


def _select_narrow(x, y, i):
    return x[:, 2], y[-1], i.select(1, -2), x.narrow(1, 1, 2), x.narrow(0, -2, 2), x.as_strided((2, 2), (1, 3), 1)


def _diagonal(x, y):
    return torch.diagonal(x), torch.diagonal(y, 1), torch.diagonal(y, -1), y.diagonal(0, 0, 2), x.unfold(1, 2, 1), x.t().contiguous(), x.detach()


def _inplace_through_view(x):
    y = x.clone()
    v = y.view(4, 3)
    v.mul_(2.0)  # writes through the view into y
    y[:, 1:3].add_(1.0)
    return y


def _splits(x, y, a, b, c, d, e):
    return (
        x.unbind(1),
        torch.unbind(y),
        a.split(2, 1),
        a.split([1, 3, 1], 1),
        torch.split_with_sizes(y, [2, 1], -2),
        b.chunk(3, 0),
        c.chunk(4, 1),
        d.tensor_split(3, dim=1),
        e.tensor_split([1, 4, 10], dim=0),
    )


def _cat(x, a, b, i, e1, e, c):
    return (
        torch.cat([x, a], 0),
        torch.cat([x, b, x], -1),
        torch.cat([i, x], 1),  # int64 + float32 -> float32
        torch.cat([e1, x], 1),  # legacy: a 1-d empty tensor is skipped
        torch.cat([e, x], 0),
        torch.cat([x.t(), c[:, ::2]], 0),
        torch.concat([x, x], 1),
    )


def _stack(x, v, w):
    return torch.stack([x, x * 2]), torch.stack([x, x * 2], -1), torch.hstack([x, x]), torch.vstack([v, w])


def _scatters(x, y, z, d, w, s):
    return (
        torch.slice_scatter(y, s, 1, 0, 4, 2),
        torch.select_scatter(x, z, 0, -1),
        torch.diagonal_scatter(x, d, 1),
        torch.as_strided_scatter(x, w, (2, 2), (4, 1), 1),
    )


def _pad_constant(x, y, i):
    return F.pad(x, (1, 2)), F.pad(y, (1, 1, 2, 0), value=-1.5), F.pad(x, (-1, 2, 1, -1)), F.pad(i, (2, 1), value=7), torch.constant_pad_nd(y, [0, 1, 1, 0, 1, 1], 2.0)


def _pad_mode(mode):
    def f(y, a, b):
        p3 = (1, 1, 1, 0, 0, 1) if mode != "circular" else (1, 1, 1, 0)
        return F.pad(y, (2, 1), mode=mode), F.pad(a, (1, 2, 2, 1), mode=mode), F.pad(b, p3, mode=mode)

    return f


def _roll_flip(x, y, i):
    return (
        torch.roll(x, 1, 0),
        torch.roll(y, (-1, 5), (1, 2)),
        torch.roll(x, 5),
        torch.flip(y, (0, 2)),
        torch.flip(i, (-1,)),
        torch.fliplr(x),
        torch.rot90(x),
        torch.rot90(x, 2),
        torch.rot90(x, -1, (1, 0)),
    )


def _repeat(x, b):
    return x.repeat(2, 1, 3), b.repeat(2, 2), torch.tile(x, (2,)), torch.tile(x, (2, 1, 2)), torch.repeat_interleave(x, 2, dim=1), torch.repeat_interleave(x, 3)


def _tri(y, x, i, b):
    return torch.tril(y), torch.triu(x, 1), torch.triu(x, -1), torch.tril(i, -1), torch.tril(b, 2)


def _dyn(x):
    n = x.shape[0]
    return x.reshape(n * 2, -1), x[1 : n - 1]


CASES = [
    Case("views", _views, [x34, x234, randn(6, 2)]),
    Case("view_0d", _view_0d, [torch.tensor(3.5), torch.tensor([2.5])]),
    Case("reshape", _reshape, [x34, x234, empty, randn(6, 2)]),
    Case("flatten", _flatten, [x2345, torch.tensor(7.0), x234]),
    Case("squeeze_unsqueeze", _squeeze, [randn(1, 3, 1, 2), randn(3, 1, 2)]),
    Case("permute_transpose", _permute, [x34, x234, randn(5), x2345]),
    Case("expand", _expand, [randn(3, 1), randn(1, 4), x34, randn(4)]),
    Case("slice", _slice, [randn(5, 2), randn(3, 7), randn(3, 8), x34]),
    Case("select_narrow_strided", _select_narrow, [x34, x234, i34]),
    Case("diagonal_unfold_contiguous", _diagonal, [x34, x234]),
    Case("inplace_through_view", _inplace_through_view, [x34]),
    Case("splits", _splits, [x34, x234, randn(2, 5), randn(7, 2), randn(2, 6), randn(2, 7), randn(6, 2)]),
    Case("cat", _cat, [x34, randn(2, 4), randn(3, 1), i34, torch.empty(0), empty, randn(3, 6)]),
    Case("cat_dtypes", lambda h, b: (torch.cat([h, h]), torch.cat([b, b])), [h34, b34]),
    Case("stack", _stack, [x34, randn(4), randn(4)]),
    Case("scatter_views", _scatters, [x34, randn(3, 5), randn(4), randn(3), randn(2, 2), randn(3, 2)]),
    Case("pad_constant", _pad_constant, [x34, x234, i34]),
    Case("pad_reflect", _pad_mode("reflect"), [x234, randn(1, 2, 4, 5), randn(1, 1, 3, 3, 3)]),
    Case("pad_replicate", _pad_mode("replicate"), [x234, randn(1, 2, 3, 4), randn(1, 1, 2, 3, 2)]),
    Case("pad_circular", _pad_mode("circular"), [x234, randn(1, 2, 3, 4), randn(1, 2, 3, 4)]),
    Case("pad_modules", lambda a, y: (torch.nn.ReflectionPad2d((1, 0, 2, 1))(a), torch.nn.ReplicationPad1d(2)(y)), [randn(1, 2, 3, 4), x234]),
    Case("roll_flip_rot90", _roll_flip, [x34, x234, i34]),
    Case("repeat_tile", _repeat, [x34, b34]),
    Case("repeat_interleave_tensor", lambda x, r: torch.repeat_interleave(x, r, dim=0), [x34, torch.tensor([1, 0, 2])], core=False),
    # Zero repeats at both ends and a long repeats vector (the GPU's scan over many values).
    Case("repeat_interleave_tensor_big", lambda x, r, y, q: (torch.repeat_interleave(x, r, dim=-1), torch.repeat_interleave(y, q)),
         [randn(2, 300, seed=4), torch.cat([torch.tensor([0]), randint(0, 3, 298, seed=5), torch.tensor([0])]), randn(3, 2, seed=6),
          torch.tensor([2, 0, 1, 3, 0, 1])], core=False),
    Case("tril_triu", _tri, [x234, x34, i34, b34]),
    Case("pixel_shuffle", lambda a, b: (F.pixel_shuffle(a, 2), F.pixel_unshuffle(b, 2)), [randn(1, 8, 2, 3), randn(1, 2, 4, 6)]),
    Case("dtypes_views", lambda a, b, c, d: (a.t().reshape(-1), b[:, 1:].flip(0), c.permute(1, 0)[::2], d.unsqueeze(0).expand(2, 3, 4)), [h34, bf34, u34, i34]),
    Case("dyn_view_slice", _dyn, [randn(6, 4)], dynamic_shapes=(({0: Dim("b", min=4, max=64)},),)),
]


# --- issue 16: _chunk_cat, resize_
def _chunk_cat(a, b, c):
    return (torch.ops.aten._chunk_cat([a, b], 1, 3), torch.ops.aten._chunk_cat([a, c.transpose(1, 2).contiguous().transpose(1, 2)], -1, 2),
            torch.ops.aten._chunk_cat([a], 0, 4))


def _resize(x, t):
    return x.clone().resize_(3, 4), x.clone().resize_([]), x.clone().resize_as_(t), x.clone().resize_(2, 2, 3)


CASES += [
    Case("chunk_cat", _chunk_cat, [randn(2, 5, 3, seed=90), randn(2, 7, 3, seed=91), randn(2, 5, 4, seed=94)]),
    Case("resize", _resize, [randn(4, 3, seed=92), randn(2, 6, seed=93)]),
]
