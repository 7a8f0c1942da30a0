"""PyTorch's own op test database as pt2web op cases, in the git-ignored cache.

    .venv/bin/python tests/fixgen/gen_opinfo.py [--samples N] [--ops NAME,...] [--dtypes D,...] [--out DIR]

Every entry of `torch.testing._internal.common_methods_invocations.op_db` (OpInfo) gives its
sample inputs per dtype (`sample_inputs(cpu, dtype)`, the first N per entry and dtype, 3 by
default, seeded; float32 by default, `--dtypes other` for the other dtypes pt2web stores:
float64, float16, bfloat16, int64, int32, uint8, bool, each where the entry supports it on the
CPU); each sample becomes a tiny module calling the op, exported with `torch.export`
(training IR, and core ATen after `run_decompositions()`), with eager PyTorch's results.
Written in the op-suite format (tests/fixgen/gen_op_cases.py), one shard per entry:
  DIR/<entry>.pt2, DIR/<entry>.io.safetensors, DIR/<entry>.cases.json
(DIR: .cache/opinfo; scripts/build_models.sh writes the other dtypes, 1 sample each, into
.cache/opinfo-dtypes). Programs are named `s<i>` (float32) or `<dtype>_s<i>`. DIR/summary.json counts, per entry, the samples exported and the ones
left out and why (not exportable, random results, outputs that are not tensors, ...): the
pass rate tests/opinfo.rs prints is over the exported ones.
"""
import argparse
import json
import multiprocessing
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch.export.pt2_archive._package import package_pt2
from torch.utils import _pytree as pytree

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_op_cases import deflate_in_place  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# Larger samples would take most of the cache (grid_sampler_3d's: 80 MB) for little coverage.
MAX_INPUT_ELEMENTS = 1 << 18
# `--dtypes other`: the dtypes besides float32 that models carry and pt2web stores.
OTHER_DTYPES = ["float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"]
# Entries whose index results torch leaves unspecified among equal values (its unstable sort's
# order, which pt2web does not reproduce): their samples with repeated input values are left
# out in the other dtypes, whose samples (integers, bool, float16) are full of ties.
TIE_ORDER_UNSPECIFIED = {"sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode",
                         "masked.median"}
# Entries whose results are uninitialized memory (two eager calls can agree by chance).
UNINITIALIZED = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}
STORED_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                 torch.int16, torch.int8, torch.uint8, torch.bool}


def shard_name(op) -> str:
    name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    return name.replace("/", "_")


class Call(torch.nn.Module):
    """op(*args, **kwargs) with the sample's tensors as the module's inputs (in pytree order)
    and everything else baked in."""

    def __init__(self, fn, spec, leaves, is_tensor):
        super().__init__()
        self.fn, self.spec, self.leaves, self.is_tensor = fn, spec, leaves, is_tensor

    def forward(self, *tensors):
        it = iter(tensors)
        leaves = [next(it) if t else v for v, t in zip(self.leaves, self.is_tensor)]
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(*args, **kwargs)


def flat_outputs(out):
    return pytree.tree_leaves(out)


def same(a, b) -> bool:
    la, lb = flat_outputs(a), flat_outputs(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            try:
                torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)
            except (AssertionError, RuntimeError, NotImplementedError, TypeError):
                return False
        elif x != y:
            return False
    return True


def draws_random_numbers(ep) -> bool:
    """Whether a program calls an op torch tags `nondeterministic_seeded` (its subgraphs too)."""
    for gm in ep.graph_module.modules():
        for n in getattr(gm, "graph", torch.fx.Graph()).nodes:
            t = n.target
            if n.op == "call_function" and isinstance(t, torch._ops.OpOverload) \
                    and torch.Tag.nondeterministic_seeded in t.tags:
                return True
    return False


def build(op, n_samples: int, dtypes, out_dir: Path):
    """Export `op`'s samples of each of `dtypes` it supports; returns the summary entry."""
    summary = {"exported": 0, "left_out": {}}

    def leave_out(why):
        summary["left_out"][why] = summary["left_out"].get(why, 0) + 1

    programs, tensors, index = {}, {}, []
    if op.name in UNINITIALIZED:
        leave_out("uninitialized results")
        return summary
    supported = op.supported_dtypes("cpu")
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        if dtype_name != "float32" and dtype not in supported:
            continue
        try:
            torch.manual_seed(0)
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:n_samples]
        except Exception as e:
            leave_out(f"no {dtype_name} samples ({type(e).__name__})")
            continue
        prefix = "" if dtype_name == "float32" else f"{dtype_name}_"
        build_samples(op, samples, prefix, dtype_name, summary, leave_out, programs, tensors, index)
    if programs:
        name = shard_name(op)
        package_pt2(str(out_dir / f"{name}.pt2"), exported_programs=programs)
        deflate_in_place(out_dir / f"{name}.pt2")
        save_file(tensors, str(out_dir / f"{name}.io.safetensors"))
        (out_dir / f"{name}.cases.json").write_text(json.dumps(
            {"family": name, "torch_version": torch.__version__, "cases": index}, indent=1))
    return summary


def build_samples(op, samples, prefix, dtype_name, summary, leave_out, programs, tensors, index):
    """Export one dtype's samples into `programs` / `tensors` / `index`."""
    for i, s in enumerate(samples):
        leaves, spec = pytree.tree_flatten(((s.input, *s.args), dict(s.kwargs)))
        is_tensor = [isinstance(v, torch.Tensor) for v in leaves]
        ins = [v for v in leaves if isinstance(v, torch.Tensor)]
        if not ins:
            leave_out("no tensor inputs")
            continue
        if any(t.dtype not in STORED_DTYPES or t.layout != torch.strided for t in ins):
            leave_out("inputs of a dtype or layout safetensors cannot hold")
            continue
        if sum(t.numel() for t in ins) > MAX_INPUT_ELEMENTS:
            leave_out("inputs over 256 Ki elements")
            continue
        if dtype_name != "float32" and op.name in TIE_ORDER_UNSPECIFIED and not s.kwargs.get("stable") \
                and ins[0].unique().numel() < ins[0].numel():
            leave_out("repeated values: the order of their indices is unspecified")
            continue
        m = Call(op.op, spec, leaves, is_tensor).eval()
        try:
            with torch.no_grad():
                torch.manual_seed(1)
                eager = m(*[t.clone() for t in ins])
                # Another seed: ops that draw random numbers (dropout with p > 0, normal, ...)
                # give other results, which pt2web's own generator cannot reproduce.
                torch.manual_seed(2)
                again = m(*[t.clone() for t in ins])
        except Exception:
            leave_out("eager call fails")
            continue
        if not same(eager, again):
            leave_out("random results")
            continue
        outs = flat_outputs(eager)
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            leave_out("outputs that are not tensors")
            continue
        if any(o.dtype not in STORED_DTYPES and not o.is_complex() or o.layout != torch.strided for o in outs):
            leave_out("outputs of a dtype or layout safetensors cannot hold")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = torch.export.export(m, tuple(t.clone() for t in ins), strict=False)
                core = ep.run_decompositions()
        except Exception:
            leave_out("not exportable")
            continue
        if draws_random_numbers(ep) or draws_random_numbers(core):
            # (OpInfo seeds some of these itself, so two eager calls agree; the values are
            # torch's generator stream, which pt2web's seeded generator does not reproduce.)
            leave_out("random results")
            continue
        pname = f"{prefix}s{i}"
        stored_outs = []
        for o in outs:
            o = o.detach().contiguous()
            # Complex results are stored as their real view [..., 2] (the case notes it).
            stored_outs.append(torch.view_as_real(o.resolve_conj()).contiguous() if o.is_complex() else o)
        for prog_name, prog in ((pname, ep), (pname + "__core", core)):
            programs[prog_name] = prog
            for k, t in enumerate(ins):
                tensors[f"{prog_name}/input_{k}"] = t.contiguous().clone()
            for k, o in enumerate(stored_outs):
                tensors[f"{prog_name}/output_{k}"] = o.clone()
            index.append({
                "program": prog_name, "case": f"{shard_name(op)}/{pname}", "tol": "opinfo",
                "dtype": dtype_name,
                "note": "complex outputs stored as view_as_real" if any(o.is_complex() for o in outs) else "",
                "inputs": [[str(t.dtype).replace("torch.", ""), list(t.shape)] for t in ins],
                "outputs": [[str(o.dtype).replace("torch.", ""), list(o.shape)] for o in outs],
                "ops": sorted({str(n.target) for n in prog.graph.nodes if n.op == "call_function"}),
            })
        summary["exported"] += 1


_OPS = []


def _work(task):
    """One entry in a worker process (forked: `_OPS` and torch are inherited)."""
    i, n_samples, dtypes, out_dir = task
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    op = _OPS[i]
    try:
        return shard_name(op), build(op, n_samples, dtypes, Path(out_dir))
    except Exception:
        traceback.print_exc()
        return shard_name(op), {"exported": 0, "left_out": {"generator error": 1}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=3, help="samples per OpInfo entry (default 3)")
    ap.add_argument("--ops", default="", help="comma-separated entry names (default: all)")
    ap.add_argument("--dtypes", default="float32",
                    help=f"comma-separated dtypes, or 'other' ({','.join(OTHER_DTYPES)}); default float32")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--out", default=str(ROOT / ".cache" / "opinfo"))
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

    dtypes = OTHER_DTYPES if a.dtypes == "other" else [d for d in a.dtypes.split(",") if d]
    for d in dtypes:
        if not isinstance(getattr(torch, d, None), torch.dtype):
            ap.error(f"--dtypes: {d} is not a torch dtype")
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in out_dir.glob("*"):
        f.unlink()
    only = {o for o in a.ops.split(",") if o}
    _OPS.extend(op for op in op_db if not only or op.name in only or shard_name(op) in only)
    t0 = time.time()
    summary = {}
    tasks = [(i, a.samples, dtypes, str(out_dir)) for i in range(len(_OPS))]
    with multiprocessing.get_context("fork").Pool(a.jobs, maxtasksperchild=50) as pool:
        for k, (name, s) in enumerate(pool.imap_unordered(_work, tasks, chunksize=2)):
            summary[name] = s
            if (k + 1) % 100 == 0:
                print(f"  {k + 1}/{len(_OPS)} entries, {time.time() - t0:.0f}s", file=sys.stderr)
    summary = dict(sorted(summary.items()))
    exported = sum(s["exported"] for s in summary.values())
    left = {}
    for s in summary.values():
        for why, n in s["left_out"].items():
            left[why] = left.get(why, 0) + n
    (out_dir / "summary.json").write_text(json.dumps(
        {"torch_version": torch.__version__, "samples_per_entry": a.samples, "dtypes": dtypes,
         "exported": exported,
         "left_out": left, "entries": summary}, indent=1))
    print(f"{out_dir}: {len(_OPS)} OpInfo entries, {exported} samples exported "
          f"(x2: training IR and core ATen), left out: {left}, {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
