"""composite family: ops a training-IR program keeps as single nodes and pt2web decomposes
at load (src/passes/decompose/): the atleast_* family, stacks and splits, diagonals, kron,
broadcast_tensors / meshgrid, cross, trace, isclose / isin, trapezoid rules, gradient,
vander, renorm, distances, quantiles, ATen's aliases and the loss functions. Training IR
only: core ATen already decomposes these (torch's own decompositions, tested elsewhere).
Inputs include 0-d, empty, non-contiguous and broadcast operands."""
import torch
import torch.nn.functional as F

from .case import Case, randint, randn


def C(name, fn, inputs, **kw):
    return Case(name, fn, inputs, core=False, **kw)


def nan_at(x, *idx):
    x = x.clone()
    for i in idx:
        x.view(-1)[i] = float("nan")
    return x


x23 = randn(2, 3, seed=1)
x34 = randn(3, 4, seed=2)
v5 = randn(5, seed=3)
probs = torch.rand(4, 3, generator=torch.Generator().manual_seed(4)) * 0.98 + 0.01
labels = randint(0, 2, 4, 3, seed=5).float()
pm1 = (randint(0, 2, 6, seed=6) * 2 - 1).float()

CASES = [
    # Shapes.
    C("atleast_1d_0d", torch.atleast_1d, [torch.tensor(1.5)]),
    C("atleast_2d_1d", torch.atleast_2d, [v5]),
    C("atleast_3d_2d_t", lambda x: torch.atleast_3d(x.t()), [x23]),
    C("atleast_3d_0d", torch.atleast_3d, [torch.tensor(2.0)]),
    C("ravel_noncontig", lambda x: torch.ravel(x.t()), [x34]),
    C("broadcast_tensors", lambda a, b, c: torch.broadcast_tensors(a, b, c),
      [randn(3, 1, seed=7), randn(1, 4, seed=8), torch.tensor(2.0)]),
    C("meshgrid_ij", lambda a, b: torch.meshgrid(a, b, indexing="ij"), [v5, randn(3, seed=9)]),
    C("meshgrid_xy3", lambda a, b, c: torch.meshgrid(a, b, c, indexing="xy"),
      [v5, randn(3, seed=9), randn(2, seed=10)]),
    C("column_stack", lambda a, b, c: torch.column_stack([a, b, c]),
      [randn(3, seed=11), randn(3, 2, seed=12), randn(3, 1, seed=13)]),
    C("dstack", lambda a, b: torch.dstack([a, b]), [x23, randn(2, 3, 2, seed=14)]),
    C("hsplit_int", lambda x: torch.hsplit(x, 2), [x34]),
    C("vsplit_array", lambda x: torch.vsplit(x, [1, 2]), [x34]),
    C("dsplit_int", lambda x: torch.dsplit(x, 2), [randn(2, 3, 4, seed=15)]),
    C("hsplit_1d", lambda x: torch.hsplit(x, [2]), [v5]),
    C("diag_1d_pos", lambda x: torch.diag(x, 1), [v5]),
    C("diag_1d_neg", lambda x: torch.diag(x, -2), [v5]),
    C("diag_2d", lambda x: torch.diag(x, 1), [x34]),
    C("diagflat", lambda x: torch.diagflat(x, -1), [x23]),
    C("diag_embed", lambda x: torch.diag_embed(x, offset=1, dim1=0, dim2=2), [x23]),
    C("diag_embed_int", torch.diag_embed, [randint(-5, 5, 2, 3, seed=16)], tol="exact"),
    C("linalg_diagonal", lambda x: torch.linalg.diagonal(x, offset=-1, dim1=0, dim2=2),
      [randn(3, 2, 4, seed=17)]),
    C("kron", torch.kron, [x23, randn(3, 2, seed=18)]),
    C("kron_ranks", torch.kron, [v5, randn(2, 2, seed=19)]),
    C("block_diag", lambda a, b, c: torch.block_diag(a, b, c),
      [x23, randn(3, seed=20), torch.tensor(4.0)]),
    C("block_diag_mixed", lambda a, b: torch.block_diag(a, b),
      [randint(0, 9, 2, 2, seed=21), randn(1, 3, seed=22)]),
    C("cartesian_prod", lambda a, b: torch.cartesian_prod(a, b), [randn(3, seed=23), randn(2, seed=24)]),
    C("channel_shuffle", lambda x: F.channel_shuffle(x, 2), [randn(2, 6, 3, 3, seed=25)]),
    C("take_along_dim", lambda x, i: torch.take_along_dim(x, i, dim=1),
      [x34, randint(0, 4, 1, 5, seed=26)]),
    C("take_along_dim_flat", lambda x, i: torch.take_along_dim(x, i), [x34, randint(0, 12, 7, seed=27)]),
    C("sum_to_size", lambda x: x.sum_to_size(3, 1), [randn(2, 3, 4, seed=28)]),
    C("mH", lambda x: x.mH, [randn(2, 3, 4, seed=29)]),
    # Math.
    C("cross_dim", lambda a, b: torch.cross(a, b, dim=0), [randn(3, 4, seed=30), randn(3, 4, seed=31)]),
    C("linalg_cross_bcast", torch.linalg.cross, [randn(2, 1, 3, seed=32), randn(1, 4, 3, seed=33)]),
    C("trace", torch.trace, [x34]),
    C("trace_int", torch.trace, [randint(-9, 9, 4, 3, seed=34)], tol="exact"),
    C("dist_p1", lambda a, b: torch.dist(a, b, 1), [x23, randn(3, seed=35)]),
    C("dist_inf", lambda a, b: torch.dist(a, b, float("inf")), [x23, randn(2, 3, seed=36)]),
    C("isclose", lambda a, b: torch.isclose(a, b, rtol=0.1, atol=0.05),
      [torch.tensor([1.0, 2.0, float("inf"), float("nan"), 0.0, -1.0]),
       torch.tensor([1.05, 2.5, float("inf"), float("nan"), 0.04, -1.2])], tol="exact"),
    C("isclose_equal_nan", lambda a, b: torch.isclose(a, b, equal_nan=True),
      [torch.tensor([float("nan"), 1.0, float("-inf")]), torch.tensor([float("nan"), 1.0, float("inf")])],
      tol="exact"),
    C("isin", lambda a, b: torch.isin(a, b), [randint(0, 6, 3, 4, seed=37), randint(0, 6, 5, seed=38)],
      tol="exact"),
    C("isin_invert", lambda a, b: torch.isin(a, b, invert=True), [randint(0, 6, 7, seed=39),
                                                                   randint(0, 6, 2, 2, seed=40)], tol="exact"),
    C("aliases", lambda a, b: (torch.divide(a, b), torch.subtract(a, b, alpha=2), torch.multiply(a, b),
                               torch.greater(a, b), torch.arctan2(a, b), torch.clip(a, -0.5, 0.5)),
      [x23, randn(2, 3, seed=41)]),
    # An alias with a dynamic batch (renamed in place, whatever the shapes).
    C("aliases_dynamic", lambda a, b: (torch.divide(a, b), torch.arccos(torch.clip(a, -1, 1))),
      [x23, randn(2, 3, seed=41)],
      dynamic_shapes=(({0: torch.export.Dim("n")}, {0: torch.export.Dim("n")}),)),
    # Composite ops with a dynamic batch: decomposed per call for the call's shapes.
    C("mse_dynamic", lambda a, b: F.mse_loss(a, b), [randn(4, 3, seed=95), randn(4, 3, seed=96)],
      dynamic_shapes=(({0: torch.export.Dim("n")}, {0: torch.export.Dim("n")}),)),
    C("cross_entropy_dynamic", lambda x, t: F.cross_entropy(x, t), [randn(5, 4, seed=78), randint(0, 4, 5, seed=79)],
      dynamic_shapes=(({0: torch.export.Dim("n")}, {0: torch.export.Dim("n")}),)),
    C("cosine_similarity_dynamic", lambda a, b: F.cosine_similarity(a, b), [randn(3, 5, seed=97), randn(3, 5, seed=98)],
      dynamic_shapes=(({0: torch.export.Dim("n")}, {0: torch.export.Dim("n")}),)),
    C("divide_floor", lambda a, b: torch.divide(a, b, rounding_mode="floor"), [x23, randn(2, 3, seed=42)]),
    C("trapezoid_x", lambda y, x: torch.trapezoid(y, x), [x34, torch.tensor([0.0, 0.5, 1.5, 3.0])]),
    C("trapezoid_dx", lambda y: torch.trapezoid(y, dx=0.3, dim=0), [x34]),
    C("trapz_x2d", lambda y, x: torch.trapz(y, x, dim=0), [x34, randn(3, 4, seed=43).cumsum(0)]),
    C("cumulative_trapezoid", lambda y, x: torch.cumulative_trapezoid(y, x), [x34, torch.tensor([0.0, 1.0, 1.5, 3.0])]),
    C("cumulative_trapezoid_dx", lambda y: torch.cumulative_trapezoid(y, dx=2.0, dim=0), [x34]),
    C("vecdot", lambda a, b: torch.linalg.vecdot(a, b, dim=0), [x34, randn(3, 1, seed=44)]),
    C("vander", lambda x: torch.linalg.vander(x, N=4), [randn(2, 3, seed=45)]),
    C("vander_0d", lambda x: torch.linalg.vander(x, N=3), [torch.tensor(1.5)]),
    C("renorm", lambda x: torch.renorm(x, 2, 0, 1.0), [randn(3, 4, seed=46) * 2]),
    C("renorm_p1", lambda x: torch.renorm(x, 1, 1, 2.0), [randn(3, 4, seed=47) * 2]),
    C("cosine_similarity", lambda a, b: F.cosine_similarity(a, b, dim=-1), [randn(4, 5, seed=48), randn(1, 5, seed=49)]),
    C("pairwise_distance", lambda a, b: F.pairwise_distance(a, b, p=3.0, keepdim=True), [randn(4, 5, seed=50), randn(4, 5, seed=51)]),
    C("quantile_linear", lambda x: torch.quantile(x, 0.3, dim=1, keepdim=True), [x34]),
    C("quantile_modes", lambda x: tuple(torch.quantile(x, 0.4, dim=0, interpolation=m)
                                        for m in ["lower", "higher", "nearest", "midpoint"]), [x34]),
    C("quantile_all", lambda x: torch.quantile(x, 0.75), [x34]),
    C("quantile_nan", lambda x: torch.quantile(x, 0.5, dim=1), [nan_at(x34, 1)]),
    C("nanquantile", lambda x: torch.nanquantile(x, 0.25, dim=1), [nan_at(x34, 1, 2, 6)]),
    C("nanquantile_all_nan", lambda x: torch.nanquantile(x, 0.5, dim=0), [nan_at(randn(2, 3, seed=52), 0, 3)]),
    C("gradient", lambda x: torch.gradient(x), [randn(4, 5, seed=53)]),
    C("gradient_edge2", lambda x: torch.gradient(x, spacing=0.5, dim=1, edge_order=2), [randn(3, 5, seed=54)]),
    C("matrix_sqrth", torch.linalg.matrix_sqrth,
      [(lambda a: a @ a.mT + 3 * torch.eye(4))(randn(2, 4, 4, seed=94))], tol="loose"),
    # Losses (each reduction).
    *[C(f"mse_{r}", lambda a, b, r=r: F.mse_loss(a, b, reduction=r), [x23, randn(2, 3, seed=55)])
      for r in ["none", "mean", "sum"]],
    C("l1_bcast", lambda a, b: F.l1_loss(a, b.expand(2, 3), reduction="sum"), [x23, randn(1, 3, seed=56)]),
    C("smooth_l1", lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="none"), [x23, randn(2, 3, seed=57)]),
    C("smooth_l1_beta0", lambda a, b: F.smooth_l1_loss(a, b, beta=0.0), [x23, randn(2, 3, seed=57)]),
    C("huber", lambda a, b: F.huber_loss(a, b, delta=0.7, reduction="none"), [x23, randn(2, 3, seed=58)]),
    C("bce", lambda p, t, w: F.binary_cross_entropy(p, t, weight=w), [probs, labels, torch.rand(3, generator=torch.Generator().manual_seed(59))]),
    C("bce_none", lambda p, t: F.binary_cross_entropy(p, t, reduction="none"), [probs, labels]),
    C("bce_logits", lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="sum"),
      [randn(4, 3, seed=60) * 3, labels, torch.tensor([0.5, 2.0, 1.0])]),
    C("bce_logits_plain", lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none"), [randn(4, 3, seed=60) * 30, labels]),
    C("kl_div", lambda x, t: F.kl_div(x, t, reduction="batchmean"), [F.log_softmax(randn(4, 5, seed=61), 1), F.softmax(randn(4, 5, seed=62), 1)]),
    C("kl_div_log_target", lambda x, t: F.kl_div(x, t, reduction="none", log_target=True),
      [F.log_softmax(randn(4, 5, seed=61), 1), F.log_softmax(randn(4, 5, seed=62), 1)]),
    C("kl_div_zero_target", lambda x, t: F.kl_div(x, t, reduction="sum"), [randn(3, seed=63), torch.tensor([0.0, 0.5, 0.5])]),
    C("hinge_embedding", lambda x, t: F.hinge_embedding_loss(x, t, margin=0.5, reduction="none"), [randn(6, seed=64), pm1]),
    C("margin_ranking", lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.2), [randn(6, seed=65), randn(6, seed=66), pm1]),
    C("soft_margin", lambda x, t: F.soft_margin_loss(x, t, reduction="sum"), [randn(6, seed=67), pm1]),
    C("cosine_embedding", lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=0.1, reduction="none"),
      [randn(6, 4, seed=68), randn(6, 4, seed=69), pm1]),
    C("poisson_nll", lambda x, t: F.poisson_nll_loss(x, t, log_input=True), [randn(5, seed=70), torch.rand(5, generator=torch.Generator().manual_seed(71)) * 4]),
    C("poisson_nll_full", lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="none"),
      [torch.rand(6, generator=torch.Generator().manual_seed(72)) + 0.1, torch.tensor([0.0, 1.0, 2.0, 3.5, 5.0, 0.5])]),
    C("nll_loss_weight_ignore", lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=1),
      [F.log_softmax(randn(5, 4, seed=73), 1), randint(0, 4, 5, seed=74), torch.tensor([0.2, 1.0, 0.5, 2.0])]),
    C("nll_loss_2d_none", lambda x, t: F.nll_loss(x, t, reduction="none"),
      [F.log_softmax(randn(2, 3, 4, 5, seed=75), 1), randint(0, 3, 2, 4, 5, seed=76)]),
    C("nll_loss_1d", lambda x, t: F.nll_loss(x, t), [F.log_softmax(randn(4, seed=77), 0), torch.tensor(2)]),
    C("cross_entropy", lambda x, t: F.cross_entropy(x, t), [randn(5, 4, seed=78), randint(0, 4, 5, seed=79)]),
    C("cross_entropy_weight_sum", lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="sum"),
      [randn(2, 4, 3, seed=80), randint(0, 4, 2, 3, seed=81), torch.tensor([1.0, 0.5, 2.0, 0.1])]),
    C("cross_entropy_probs", lambda x, t: F.cross_entropy(x, t), [randn(5, 4, seed=82), F.softmax(randn(5, 4, seed=83), 1)]),
    C("triplet_margin", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=0.5, p=1.0, swap=True),
      [randn(4, 6, seed=84), randn(4, 6, seed=85), randn(4, 6, seed=86)]),
    C("multi_margin", lambda x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.8, weight=w, reduction="none"),
      [randn(5, 4, seed=87), randint(0, 4, 5, seed=88), torch.tensor([1.0, 0.5, 2.0, 0.3])]),
    C("multi_margin_1d", lambda x, t: F.multi_margin_loss(x, t), [randn(4, seed=89), torch.tensor(1)]),
    C("multilabel_margin", lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
      [randn(3, 4, seed=90), torch.tensor([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 1, 1]])]),
    C("multilabel_margin_1d", lambda x, t: F.multilabel_margin_loss(x, t), [randn(4, seed=91), torch.tensor([2, -1, 0, 0])]),
    C("mse_empty", lambda a, b: F.mse_loss(a, b, reduction="sum"), [randn(0, 3, seed=92), randn(0, 3, seed=93)]),
    # F.affine_grid (aten.affine_grid_generator in the training IR), 2-D and 3-D, and a spatial
    # transformer (the grid fed to grid_sample).
    C("affine_grid_2d", lambda t: F.affine_grid(t, [2, 3, 4, 5], align_corners=False), [randn(2, 2, 3, seed=94)]),
    C("affine_grid_2d_align", lambda t: F.affine_grid(t, [1, 1, 3, 1], align_corners=True), [randn(1, 2, 3, seed=97)]),
    C("affine_grid_3d", lambda t: F.affine_grid(t, [2, 1, 3, 4, 2], align_corners=True), [randn(2, 3, 4, seed=98)]),
    C("affine_grid_3d_f64", lambda t: F.affine_grid(t, [1, 2, 2, 3, 4], align_corners=False), [randn(1, 3, 4, seed=99, dtype=torch.float64)]),
    C("spatial_transformer", lambda x, t: F.grid_sample(x, F.affine_grid(t, list(x.shape), align_corners=False), align_corners=False),
      [randn(2, 3, 6, 7, seed=100), torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])]),
    # torch.combinations (a training-IR op; core ATen spells it out with masked selects).
    C("combinations", lambda x: (torch.combinations(x), torch.combinations(x, 3), torch.combinations(x, 2, True),
                                 torch.combinations(x, 0), torch.combinations(x[:2], 4), torch.combinations(x[:2], 3, True)),
      [randn(5, seed=101)]),
    C("combinations_int", lambda x: torch.combinations(x, 2, with_replacement=True), [randint(-9, 9, 4, seed=102)]),
]
