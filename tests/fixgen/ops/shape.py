"""Shape family: views (view/reshape/permute/slice/expand... sharing storage), splits, and the
copying shape ops (cat/stack/pad/roll/flip/repeat/tril...)."""
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


def _inplace_through_view(x):
    y = x.clone()
    v = y.view(4, 3)
    v.mul_(2.0)  # writes through the view into y
    y[:, 1:3].add_(1.0)
    return y


CASES = [
    # --- views
    Case("view", lambda x: x.view(4, 3), [x34]),
    Case("view_infer", lambda x: x.view(-1, 6), [x234]),
    Case("view_0d", lambda x: x.view(1, 1), [torch.tensor(3.5)]),
    Case("view_to_0d", lambda x: x.view(()), [torch.tensor([2.5])]),
    Case("reshape_noncontig", lambda x: x.t().reshape(12), [x34]),
    Case("reshape_view_of_slice", lambda x: x[:, 1:].reshape(-1, 2, 2), [x234]),
    Case("reshape_empty", lambda x: x.reshape(2, 0, 2), [empty]),
    Case("flatten", lambda x: torch.flatten(x, 1), [x2345]),
    Case("flatten_mid", lambda x: x.flatten(1, 2), [x2345]),
    Case("flatten_0d", lambda x: x.flatten(), [torch.tensor(7.0)]),
    Case("flatten_noncontig", lambda x: x.transpose(0, 2).flatten(), [x234]),
    Case("unflatten", lambda x: x.unflatten(1, (2, -1)), [x234.reshape(2, 12)]),
    Case("squeeze_all", lambda x: x.squeeze(), [randn(1, 3, 1, 2)]),
    Case("squeeze_dim", lambda x: x.squeeze(-2), [randn(3, 1, 2)]),
    Case("squeeze_dim_noop", lambda x: x.squeeze(0), [randn(3, 1, 2)]),
    Case("squeeze_dims", lambda x: x.squeeze((0, 2)), [randn(1, 3, 1, 2)]),
    Case("unsqueeze", lambda x: (x.unsqueeze(0), x.unsqueeze(-1), x.unsqueeze(1)), [x34]),
    Case("permute", lambda x: x.permute(2, 0, 1), [x234]),
    Case("permute_neg", lambda x: x.permute(-1, -3, -2).contiguous(), [x234]),
    Case("transpose", lambda x: x.transpose(0, -1), [x234]),
    Case("t", lambda x: x.t(), [x34]),
    Case("t_1d", lambda x: x.t(), [randn(5)]),
    Case("T", lambda x: x.T, [x234]),
    Case("mT", lambda x: x.mT, [x234]),
    Case("swapaxes", lambda x: torch.swapaxes(x, 0, 1), [x234]),
    Case("movedim", lambda x: torch.movedim(x, 0, -1), [x234]),
    Case("movedim_list", lambda x: torch.movedim(x, (0, 3), (2, 0)), [x2345]),
    Case("expand", lambda x: x.expand(2, 3, 4), [randn(3, 1)]),
    Case("expand_neg1", lambda x: x.expand(-1, 5), [randn(3, 1)]),
    Case("expand_as", lambda x, y: x.expand_as(y), [randn(1, 4), x34]),
    Case("broadcast_to", lambda x: torch.broadcast_to(x, (2, 3, 4)), [randn(4)]),
    Case("expand_then_reshape", lambda x: x.expand(2, 3, 4).reshape(6, 4), [randn(3, 1)]),
    Case("view_as", lambda x, y: x.view_as(y), [x34, randn(6, 2)]),
    Case("reshape_as", lambda x, y: x.t().reshape_as(y), [x34, randn(6, 2)]),
    # --- slicing
    Case("slice", lambda x: x[1:3], [randn(5, 2)]),
    Case("slice_step", lambda x: x[:, ::2], [randn(3, 7)]),
    Case("slice_step3_offset", lambda x: x[:, 1::3], [randn(3, 8)]),
    Case("slice_neg", lambda x: x[-2:, -3:-1], [x34]),
    Case("slice_oversized", lambda x: x[1:100], [randn(5, 2)]),
    Case("slice_neg_oversized", lambda x: x[-100:2], [randn(5, 2)]),
    Case("slice_empty", lambda x: x[3:1], [randn(5, 2)]),
    Case("slice_of_transpose", lambda x: x.t()[1:, :2], [x34]),
    Case("select", lambda x: x[:, 2], [x34]),
    Case("select_neg", lambda x: x[-1], [x234]),
    Case("select_int", lambda x: x.select(1, -2), [i34]),
    Case("narrow", lambda x: x.narrow(1, 1, 2), [x34]),
    Case("narrow_neg", lambda x: x.narrow(0, -2, 2), [x34]),
    Case("as_strided", lambda x: x.as_strided((2, 2), (1, 3), 1), [x34]),
    Case("diagonal", lambda x: torch.diagonal(x), [x34]),
    Case("diagonal_offset", lambda x: (torch.diagonal(x, 1), torch.diagonal(x, -1), x.diagonal(0, 0, 2)), [x234]),
    Case("unfold", lambda x: x.unfold(1, 2, 1), [x34]),
    Case("contiguous", lambda x: x.t().contiguous(), [x34]),
    Case("alias_detach", lambda x: x.detach(), [x34]),
    Case("inplace_through_view", _inplace_through_view, [x34]),
    # --- splits
    Case("unbind", lambda x: x.unbind(1), [x34]),
    Case("unbind0", lambda x: torch.unbind(x), [x234]),
    Case("split", lambda x: x.split(2, 1), [randn(2, 5)]),
    Case("split_sizes", lambda x: x.split([1, 3, 1], 1), [randn(2, 5)]),
    Case("split_with_sizes", lambda x: torch.split_with_sizes(x, [2, 1], -2), [x234]),
    Case("chunk", lambda x: x.chunk(3, 0), [randn(7, 2)]),
    Case("chunk_uneven", lambda x: x.chunk(4, 1), [randn(2, 6)]),
    Case("tensor_split", lambda x: x.tensor_split(3, dim=1), [randn(2, 7)]),
    Case("tensor_split_idx", lambda x: x.tensor_split([1, 4, 10], dim=0), [randn(6, 2)]),
    # --- cat / stack
    Case("cat", lambda x, y: torch.cat([x, y], 0), [x34, randn(2, 4)]),
    Case("cat_neg_dim", lambda x, y: torch.cat([x, y, x], -1), [x34, randn(3, 1)]),
    Case("cat_promote", lambda x, y: torch.cat([x, y], 1), [i34, x34]),
    Case("cat_half", lambda x, y: torch.cat([x, y]), [h34, h34]),
    Case("cat_bool", lambda x, y: torch.cat([x, y]), [b34, b34]),
    Case("cat_legacy_empty", lambda x, y: torch.cat([x, y], 1), [torch.empty(0), x34]),
    Case("cat_empty_rows", lambda x, y: torch.cat([x, y], 0), [empty, x34]),
    Case("cat_noncontig", lambda x, y: torch.cat([x.t(), y[:, ::2]], 0), [x34, randn(3, 6)]),
    Case("concat", lambda x, y: torch.concat([x, y], 1), [x34, x34]),
    Case("stack", lambda x, y: torch.stack([x, y]), [x34, x34 * 2]),
    Case("stack_last", lambda x, y: torch.stack([x, y], -1), [x34, x34 * 2]),
    Case("hstack", lambda x, y: torch.hstack([x, y]), [x34, x34]),
    Case("vstack", lambda x, y: torch.vstack([x, y]), [randn(4), randn(4)]),
    # --- scatter back
    Case("slice_scatter", lambda x, y: torch.slice_scatter(x, y, 1, 0, 4, 2), [randn(3, 5), randn(3, 2)]),
    Case("select_scatter", lambda x, y: torch.select_scatter(x, y, 0, -1), [x34, randn(4)]),
    Case("diagonal_scatter", lambda x, y: torch.diagonal_scatter(x, y, 1), [x34, randn(3)]),
    Case("as_strided_scatter", lambda x, y: torch.as_strided_scatter(x, y, (2, 2), (4, 1), 1), [x34, randn(2, 2)]),
    # --- pad
    Case("pad_constant", lambda x: F.pad(x, (1, 2)), [x34]),
    Case("pad_constant_value", lambda x: F.pad(x, (1, 1, 2, 0), value=-1.5), [x234]),
    Case("pad_negative", lambda x: F.pad(x, (-1, 2, 1, -1)), [x34]),
    Case("pad_int", lambda x: F.pad(x, (2, 1), value=7), [i34]),
    Case("constant_pad_nd", lambda x: torch.constant_pad_nd(x, [0, 1, 1, 0, 1, 1], 2.0), [x234]),
    Case("pad_reflect1d", lambda x: F.pad(x, (2, 3), mode="reflect"), [x234]),
    Case("pad_reflect2d", lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), [randn(1, 2, 4, 5)]),
    Case("pad_reflect3d", lambda x: F.pad(x, (1, 1, 1, 0, 0, 1), mode="reflect"), [randn(1, 1, 3, 3, 3)]),
    Case("pad_replicate1d", lambda x: F.pad(x, (3, 1), mode="replicate"), [x234]),
    Case("pad_replicate2d", lambda x: F.pad(x, (2, 0, 1, 3), mode="replicate"), [randn(1, 2, 3, 4)]),
    Case("pad_replicate3d", lambda x: F.pad(x, (1, 0, 0, 1, 1, 1), mode="replicate"), [randn(1, 1, 2, 3, 2)]),
    Case("pad_circular1d", lambda x: F.pad(x, (2, 1), mode="circular"), [x234]),
    Case("pad_circular2d", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"), [randn(1, 2, 3, 4)]),
    Case("pad_module_reflect", torch.nn.ReflectionPad2d((1, 0, 2, 1)), [randn(1, 2, 3, 4)]),
    Case("pad_module_replicate", torch.nn.ReplicationPad1d(2), [x234]),
    # --- roll / flip / repeat
    Case("roll", lambda x: torch.roll(x, 1, 0), [x34]),
    Case("roll_multi", lambda x: torch.roll(x, (-1, 5), (1, 2)), [x234]),
    Case("roll_flat", lambda x: torch.roll(x, 5), [x34]),
    Case("flip", lambda x: torch.flip(x, (0, 2)), [x234]),
    Case("flip_int", lambda x: torch.flip(x, (-1,)), [i34]),
    Case("fliplr", lambda x: torch.fliplr(x), [x34]),
    Case("rot90", lambda x: (torch.rot90(x), torch.rot90(x, 2), torch.rot90(x, -1, (1, 0))), [x34]),
    Case("repeat", lambda x: x.repeat(2, 1, 3), [x34]),
    Case("repeat_bool", lambda x: x.repeat(2, 2), [b34]),
    Case("tile", lambda x: torch.tile(x, (2,)), [x34]),
    Case("tile_more", lambda x: torch.tile(x, (2, 1, 2)), [x34]),
    Case("repeat_interleave", lambda x: torch.repeat_interleave(x, 2, dim=1), [x34]),
    Case("repeat_interleave_flat", lambda x: torch.repeat_interleave(x, 3), [x34]),
    Case("repeat_interleave_tensor", lambda x, r: torch.repeat_interleave(x, r, dim=0), [x34, torch.tensor([1, 0, 2])], core=False),
    # --- triangles
    Case("tril", lambda x: torch.tril(x), [x234]),
    Case("triu_diag", lambda x: (torch.triu(x, 1), torch.triu(x, -1)), [x34]),
    Case("tril_int", lambda x: torch.tril(x, -1), [i34]),
    Case("tril_bool", lambda x: torch.tril(x, 2), [b34]),
    # --- pixel shuffle
    Case("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), [randn(1, 8, 2, 3)]),
    Case("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), [randn(1, 2, 4, 6)]),
    # --- dtypes through views and copies
    Case("dtypes_views", lambda a, b, c, d: (a.t().reshape(-1), b[:, 1:].flip(0), c.permute(1, 0)[::2], d.unsqueeze(0).expand(2, 3, 4)), [h34, bf34, u34, i34]),
    # --- dynamic shapes
    Case("dyn_view", lambda x: x.reshape(x.shape[0] * 2, -1), [randn(3, 4)], dynamic_shapes=(({0: Dim("b", min=1, max=64)},),)),
    Case("dyn_slice", lambda x: x[1 : x.shape[0] - 1], [randn(6, 4)], dynamic_shapes=(({0: Dim("b", min=4, max=64)},),)),
]
