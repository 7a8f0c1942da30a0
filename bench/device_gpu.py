#!/usr/bin/env python3
"""pt2web on a real GPU against PyTorch eager on the same GPU (issue 13's device check).

    python3 bench/device_gpu.py --pt2web target/release/pt2web [--torch-device cuda]
        [--models resnet18_b1,resnet18_b32,minilm_s128,gpt2_s128] [--repeat 20] [--out DIR]

Run by bench/device_gpu.sh on a lent NVIDIA machine (no network there): each model is
built from torchvision / transformers with random weights (seed 0), exported with
torch.export (training IR, as users save it) into DIR, and timed twice in the same run:
`pt2web bench --device gpu` (wgpu over Vulkan; the archive's sample inputs) and PyTorch
eager on --torch-device (CUDA: synchronized, median of --repeat runs after warm-up). It
prints one line per model and the ratios, and writes DIR/device_gpu.json.

Works anywhere for a dry run: `--torch-device cpu` and a software Vulkan adapter (lavapipe)
exercise the same steps, only the numbers differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402


def build(name: str):
    """The module and its example args for a model key."""
    torch.manual_seed(0)
    if name.startswith("resnet18"):
        import torchvision

        batch = int(name.split("_b")[1])
        m = torchvision.models.resnet18(weights=None)
        return m, (torch.randn(batch, 3, 224, 224),), batch
    if name.startswith("minilm"):
        from transformers import BertConfig, BertModel

        seq = int(name.split("_s")[1])
        # all-MiniLM-L6-v2's architecture (random weights: the speed is the point here).
        cfg = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                         intermediate_size=1536, vocab_size=30522, max_position_embeddings=512)
        m = BertModel(cfg, add_pooling_layer=False)
        ids = torch.randint(0, cfg.vocab_size, (1, seq))
        return _LastHidden(m), (ids, torch.ones(1, seq, dtype=torch.long)), 1
    if name.startswith("gpt2"):
        from transformers import GPT2Config, GPT2LMHeadModel

        seq = int(name.split("_s")[1])
        m = GPT2LMHeadModel(GPT2Config())
        ids = torch.randint(0, 50257, (1, seq))
        return _Logits(m), (ids,), 1
    raise SystemExit(f"unknown model '{name}' (resnet18_bN, minilm_sN, gpt2_sN)")


class _LastHidden(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


class _Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


def torch_ms(m, args, device: str, repeat: int) -> float:
    m = m.to(device).eval()
    args = tuple(a.to(device) for a in args)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    times = []
    with torch.inference_mode():
        for _ in range(3):
            m(*args)
        sync()
        for _ in range(repeat):
            t = time.perf_counter()
            m(*args)
            sync()
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def pt2web_bench(exe: str, path: str, repeat: int, backend: str) -> dict:
    cmd = [exe, "bench", path, "--device", "gpu", "--repeat", str(repeat), "--json"]
    if backend:
        cmd += ["--backend", backend]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)["devices"][0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pt2web", default="target/release/pt2web")
    ap.add_argument("--torch-device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--models", default="resnet18_b1,resnet18_b32,minilm_s128,gpt2_s128")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--backend", default="vulkan", help="pt2web's wgpu backend ('' = auto)")
    ap.add_argument("--out", default=None, help="where the .pt2 files and the JSON go")
    a = ap.parse_args(argv)
    out = a.out or tempfile.mkdtemp(prefix="pt2web_device_")
    os.makedirs(out, exist_ok=True)
    print(f"torch {torch.__version__} on {a.torch_device}"
          + (f" ({torch.cuda.get_device_name()})" if a.torch_device.startswith("cuda") else ""),
          flush=True)
    rows = []
    for name in [m for m in a.models.split(",") if m]:
        t0 = time.perf_counter()
        m, args, batch = build(name)
        m.eval()
        path = os.path.join(out, f"{name}.pt2")
        with torch.no_grad():
            ep = torch.export.export(m, args)
        torch.export.save(ep, path)
        export_s = time.perf_counter() - t0
        try:
            p = pt2web_bench(a.pt2web, path, a.repeat, a.backend)
        except Exception as e:  # noqa: BLE001  (report and go on with the next model)
            print(f"{name}: pt2web failed: {e}", flush=True)
            rows.append({"model": name, "error": str(e)})
            continue
        t = torch_ms(m, args, a.torch_device, a.repeat)
        row = {
            "model": name, "batch": batch, "export_s": round(export_s, 1),
            "adapter": p["device"], "pt2web_warm_ms": p["median_run_ms"],
            "pt2web_first_ms": p["first_run_ms"], "pt2web_prepare_ms": p.get("prepare_ms"),
            "pt2web_cold_ms": p.get("cold_start_ms"),
            "dispatches": p["gpu_per_run"]["dispatches"],
            "host_ms": p["gpu_per_run"]["host_ms"],
            "fallback_nodes": p["gpu_per_run"]["fallback_nodes"],
            "torch_ms": t, "torch_device": a.torch_device,
            # pt2web's throughput as a fraction of PyTorch's (1.0 = as fast).
            "throughput_vs_torch": t / p["median_run_ms"],
        }
        rows.append(row)
        print(f"{name:14s} pt2web {row['pt2web_warm_ms']:9.2f} ms (first {row['pt2web_first_ms']:.2f}, "
              f"{row['dispatches']} dispatches, host {row['host_ms']:.2f} ms, "
              f"{row['fallback_nodes']} fallbacks)  torch {t:9.2f} ms  "
              f"pt2web throughput {row['throughput_vs_torch']:.2f}x torch's", flush=True)
    with open(os.path.join(out, "device_gpu.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {os.path.join(out, 'device_gpu.json')}")
    return 0 if rows and all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
