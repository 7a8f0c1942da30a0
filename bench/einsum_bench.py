"""einsum contraction paths (issue 19 item 6): one 4-operand einsum, timed by `pt2web bench` with
the path optimizer on (`--opt-einsum auto`) and off (left to right), on the CPU and the GPU.

    .venv/bin/python bench/einsum_bench.py [--runs 10] [--device both]

The chain 'ab,bc,cd,de->ae' with a narrow middle (sizes 256, 256, 4, 256, 256): left to right
makes a 256x256 product of 256 inner terms and two more of that size; the optimized path contracts
through the narrow dimension first. The archive is written by torch.export.save into .cache/bench/
(git-ignored); PyTorch's own time (torch.einsum, which uses opt_einsum when installed) is printed
beside it.
"""
import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))
SIZES = (256, 256, 4, 256, 256)


class Chain(torch.nn.Module):
    def forward(self, a, b, c, d):
        return torch.einsum("ab,bc,cd,de->ae", a, b, c, d)


def inputs():
    g = torch.Generator().manual_seed(0)
    s = SIZES
    return tuple(torch.randn(s[i], s[i + 1], generator=g) for i in range(4))


def bench(path, device, strategy, runs):
    r = subprocess.run([BIN, "bench", str(path), "--device", device, "--repeat", str(runs),
                        "--opt-einsum", strategy, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    out = json.loads(r.stdout)
    (dev,) = [d for d in out["devices"] if d["device"].split(" ")[0] == device]
    return dev["median_run_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--device", default="both")
    a = ap.parse_args()
    path = ROOT / ".cache" / "bench" / "einsum_chain.pt2"
    path.parent.mkdir(parents=True, exist_ok=True)
    x = inputs()
    if not path.exists():
        torch.export.save(torch.export.export(Chain(), x), path)
    for _ in range(2):
        Chain()(*x)
    t = time.perf_counter()
    for _ in range(a.runs):
        Chain()(*x)
    torch_ms = (time.perf_counter() - t) / a.runs * 1e3
    print(f"einsum 'ab,bc,cd,de->ae' sizes {SIZES}; PyTorch eager {torch_ms:.2f} ms")
    for device in (["cpu", "gpu"] if a.device == "both" else [a.device]):
        off = bench(path, device, "off", a.runs)
        on = bench(path, device, "auto", a.runs)
        print(f"{device}: left to right {off:.2f} ms, optimized path {on:.2f} ms, "
              f"speedup {off / on:.2f}x")


if __name__ == "__main__":
    main()
