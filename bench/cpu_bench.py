"""CPU benchmark: pt2web against PyTorch eager, ONNX Runtime CPU and ExecuTorch XNNPACK, on the
same archives, weights and inputs, in one run.

    .venv/bin/python bench/cpu_bench.py [--models resnet18,mobilenet_v3_small,minilm]
                                        [--batches 1,8] [--runs 10] [--json out.json]

Needs the real-model cache (scripts/build_models.sh), a release build of the CLI (cargo build
--release -p pt2web-native), and for the peers:
- ONNX Runtime: `onnxruntime` in .venv and the ONNX files of bench/export_onnx.py (exported from
  the same .pt2 archives; dynamic batch);
- ExecuTorch: a Python with `executorch` (PyPI), by default .cache/venv-et/bin/python (made by
  `scripts/setup.sh --bench`), which runs bench/executorch_bench.py: it re-exports the archive's
  module at the batch's static shape and lowers it to XNNPACK (cached in .cache/models).
A peer that is missing prints `-` and the reason, and the rest still runs.

Inputs: the archive's first stored example (batch 2; MiniLM at seq 128) with its rows repeated
to the batch. Every engine runs with the same thread count (torch.get_num_threads(), the
machine's cores unless OMP_NUM_THREADS says otherwise) and reports the median of --runs warm
runs after two untimed ones. pt2web's GFLOP/s is the model's floating-point work (counted by
PyTorch's FlopCounterMode: 2 per multiply-add of matmuls and convolutions) over its median time,
against the machine's FMA peak: cores x clock x FLOP per cycle of the widest ISA found in
/proc/cpuinfo (two FMA units of the vector width: AVX-512 64, AVX2+FMA 32, SSE 8; AMD cores
whose units are narrower count what they run: Zen 1 16, Zen 4's AVX-512 32).
After the models, --gemm times single products (a linear layer with a weight parameter, and a
product of two inputs) exported here, against PyTorch, with their GFLOP/s and % of peak.
Targets (issue 14): batch 1, pt2web <= 1.0x PyTorch eager and <= 1.5x ONNX Runtime.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers.modeling_outputs  # noqa: F401  (ModelOutput pytree types for MiniLM/GPT-2)
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "models"
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))
ET_PYTHON = os.environ.get("EXECUTORCH_PYTHON", str(ROOT / ".cache" / "venv-et" / "bin" / "python"))


def median_ms(fn, runs):
    for _ in range(2):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def batched(flat, batch):
    """The stored example's rows repeated to `batch` rows (dim 0)."""
    out = []
    for t in flat:
        idx = torch.arange(batch) % t.shape[0]
        out.append(t.index_select(0, idx).contiguous())
    return out


def machine_peak():
    """(GFLOP/s, how it was computed) of the machine's FP32 FMA peak, from /proc/cpuinfo."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None, "no /proc/cpuinfo"
    flags = set()
    mhz = 0.0
    vendor, family, model = "", 0, 0
    for line in info.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "flags":
            flags |= set(val.split())
        elif key == "cpu MHz":
            mhz = max(mhz, float(val))
        elif key == "vendor_id":
            vendor = val
        elif key == "cpu family":
            family = int(val)
        elif key == "model":
            model = int(val)
    # FLOP per cycle and core: two FMA units of the vector width, where the core has them.
    # AMD's Zen 1/Zen+ (family 0x17 below model 0x30) split 256-bit FMAs over two 128-bit
    # units, Zen 2/3 (0x17 from 0x30, 0x19 below 0x10) have two 256-bit ones, Zen 4 (0x19
    # from 0x10) runs AVX-512 on them; Intel's AVX-512 server cores have two 512-bit units.
    amd = vendor == "AuthenticAMD"
    if "avx512f" in flags:
        isa, per_cycle = "AVX-512", 32 if amd and family < 0x1A else 64
    elif "avx2" in flags and "fma" in flags:
        isa, per_cycle = "AVX2+FMA", 16 if amd and family == 0x17 and model < 0x30 else 32
    else:
        isa, per_cycle = "SSE", 8
    # The highest clock cpufreq reports (boost included); a VM without cpufreq shows only the
    # nominal clock of /proc/cpuinfo, which boost can exceed (then a product can pass 100%).
    clock = "nominal"
    try:
        mhz = max(mhz, int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1e3)
        clock = "max"
    except (OSError, ValueError):
        pass
    cores = torch.get_num_threads()
    peak = cores * mhz * 1e-3 * per_cycle
    return peak, (f"{cores} cores x {mhz / 1e3:.2f} GHz ({clock}) x {per_cycle} FLOP/cycle "
                  f"({isa}{', AMD family ' + hex(family) if amd else ''})")


def count_flops(module, args, kwargs):
    from torch.utils.flop_counter import FlopCounterMode
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        module(*args, **kwargs)
    return fc.get_total_flops()


def ort_median(name, prog, flat, runs, threads):
    path = CACHE / f"{name}.onnx"
    if not path.exists():
        return None, f"no {path.name} (run bench/export_onnx.py)"
    try:
        import onnxruntime as ort
    except ImportError:
        return None, "onnxruntime not installed (pip install -r bench/requirements.txt)"
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    feed = {n: t.numpy() for n, t in zip(prog["input_names"], flat) if n in names}
    return median_ms(lambda: s.run(None, feed), runs), None


def et_median(name, batch, runs, threads):
    if not Path(ET_PYTHON).exists():
        return None, f"no {ET_PYTHON} (scripts/setup.sh --bench makes it)"
    r = subprocess.run([ET_PYTHON, str(ROOT / "bench" / "executorch_bench.py"), "--model", name,
                        "--batch", str(batch), "--runs", str(runs), "--threads", str(threads)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["failed"])[-1]
        return None, f"executorch: {last[:160]}"
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"], None


def pt2web_median(archive, prog, flat, runs):
    with tempfile.TemporaryDirectory() as d:
        inp = Path(d) / "in.safetensors"
        save_file({n: t.contiguous() for n, t in zip(prog["input_names"], flat)}, str(inp))
        r = subprocess.run([BIN, "run", str(archive), "--inputs", str(inp), "--repeat", str(runs + 2), "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"pt2web: {r.stderr.strip()[:160]}"
        return json.loads(r.stdout)["timings_ms"]["median_run"], None


class _Linear(torch.nn.Module):
    def __init__(self, n, k):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, k) / k ** 0.5)

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight)


class _Matmul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def gemm_rows(shapes, runs, peak):
    """GEMM throughput: per m x n x k, a linear layer (weight: a parameter, which pt2web packs
    once per session) and a product of two inputs (packed per call), each exported to a .pt2
    here, on pt2web and on PyTorch eager; GFLOP/s and % of the machine's peak."""
    out = []
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        for shape in shapes:
            m, n, k = (int(v) for v in shape.split("x"))
            x, b = torch.randn(m, k), torch.randn(k, n)
            for kind, mod, inputs in [("linear", _Linear(n, k), (x,)), ("matmul", _Matmul(), (x, b))]:
                path = Path(d) / f"{kind}_{shape}.pt2"
                ep = torch.export.export(mod, inputs)
                torch.export.save(ep, str(path))
                names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
                with torch.no_grad():
                    t_ms = median_ms(lambda: mod(*inputs), runs)
                p_ms, why = pt2web_median(path, {"input_names": names}, list(inputs), runs)
                flop = 2 * m * n * k
                out.append((kind, shape, t_ms, p_ms, flop, why))
    print(f"\nGEMM, f32, median warm run; GFLOP/s and % of the peak above")
    print(f"{'op':<8}{'m x n x k':<18}{'PyTorch':>9}{'pt2web':>9}{'/PyTorch':>10}{'GFLOP/s':>9}{'%peak':>7}")
    for kind, shape, t_ms, p_ms, flop, why in out:
        gf = None if p_ms is None else flop / p_ms / 1e6
        pct = "-" if gf is None or peak is None else f"{100 * gf / peak:.0f}%"
        rat = "-" if p_ms is None else f"{p_ms / t_ms:.2f}"
        print(f"{kind:<8}{shape:<18}{t_ms:>9.2f}{'-' if p_ms is None else f'{p_ms:.2f}':>9}{rat:>10}"
              f"{'-' if gf is None else f'{gf:.1f}':>9}{pct:>7}" + (f"  ({why})" if why else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,mobilenet_v3_small,minilm")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-executorch", action="store_true")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--gemm", default="1024x1024x1024,128x1536x384",
                    help="GEMM shapes m x n x k to time after the models ('none': skip)")
    a = ap.parse_args()
    threads = torch.get_num_threads()
    peak, peak_how = machine_peak()
    rows, notes = [], []
    for name in a.models.split(","):
        meta = json.loads((CACHE / f"{name}.meta.json").read_text())
        prog = meta["programs"]["model"]
        case = prog["io_cases"][0]
        io = load_file(str(CACHE / case["file"]))
        stored = [io[i["key"]] for i in case["inputs"]]
        ep = torch.export.load(CACHE / meta["archive"])
        module = ep.module()
        for batch in [int(b) for b in a.batches.split(",")]:
            flat = batched(stored, batch)
            args, kwargs = torch.utils._pytree.tree_unflatten(flat, ep.call_spec.in_spec)
            row = {"model": name, "input": "x".join(map(str, flat[0].shape)), "batch": batch}
            with torch.no_grad():
                row["torch"] = median_ms(lambda: module(*args, **kwargs), a.runs)
            row["flops"] = count_flops(module, args, kwargs)
            row["ort"], why = ort_median(name, prog, flat, a.runs, threads)
            if why:
                notes.append(f"{name} b{batch} ONNX Runtime: {why}")
            row["et"], why = (None, "skipped (--no-executorch)") if a.no_executorch else et_median(name, batch, a.runs, threads)
            if why:
                notes.append(f"{name} b{batch} ExecuTorch: {why}")
            row["pt2web"], why = pt2web_median(CACHE / meta["archive"], prog, flat, a.runs)
            if why:
                notes.append(f"{name} b{batch} {why}")
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)

    def f(x):
        return "-" if x is None else f"{x:.1f}"

    def r(x, y):
        return "-" if x is None or y is None else f"{x / y:.2f}"

    print(f"\nCPU, median warm run in ms, {threads} threads (torch {torch.__version__}); ratio = pt2web / peer (below 1: pt2web is faster)")
    print(f"peak FP32 FMA: {'-' if peak is None else f'{peak:.0f} GFLOP/s'} = {peak_how}")
    print(f"{'model':<20}{'input':<14}{'PyTorch':>9}{'ORT':>9}{'ET-XNN':>9}{'pt2web':>9}{'/PyTorch':>10}{'/ORT':>7}{'/ET':>7}{'GFLOP/s':>9}{'%peak':>7}")
    for x in rows:
        gf = None if x["pt2web"] is None else x["flops"] / x["pt2web"] / 1e6
        pct = "-" if gf is None or peak is None else f"{100 * gf / peak:.0f}%"
        print(f"{x['model']:<20}{x['input']:<14}{f(x['torch']):>9}{f(x['ort']):>9}{f(x['et']):>9}{f(x['pt2web']):>9}"
              f"{r(x['pt2web'], x['torch']):>10}{r(x['pt2web'], x['ort']):>7}{r(x['pt2web'], x['et']):>7}{f(gf):>9}{pct:>7}")
    for n in notes:
        print(f"  note: {n}")
    if a.json:
        Path(a.json).write_text(json.dumps({"threads": threads, "peak_gflops": peak, "peak": peak_how, "rows": rows}, indent=1))
    shapes = [g for g in a.gemm.split(",") if g and g != "none"]
    if shapes:
        gemm_rows(shapes, a.runs, peak)


if __name__ == "__main__":
    main()
