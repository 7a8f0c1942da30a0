"""Language-model benchmark (issue 15): prefill and decode speed of `pt2web generate` against
PyTorch eager stepping the same exported program, in one run.

    .venv/bin/python bench/llm_bench.py [--prompt 128] [--new 32] [--layers 8] [--hidden 512]
                                        [--device cpu|gpu] [--runs 2] [--weights f32,int8,int4,f16]

The model: Llama-style (transformers' LlamaForCausalLM, random weights, seed 0): hidden 512,
8 layers, 8 query heads over 2 key/value heads (grouped-query attention), vocab 8192, exported
with transformers' static-cache recipe (`convert_and_export_with_cache`, cache 1024 positions)
with a dynamic sequence length, so a prompt is prefilled in one call. The archive is cached in
.cache/models/llama_bench.*.pt2 (re-exported when the options change).

PyTorch eager runs the saved program itself (`torch.export.load(...).module()`, the KV cache in
its buffers): the prompt in one call, then one token per call, greedy, with the thread count
pt2web uses. pt2web runs `pt2web generate --json` (a release build of the CLI). Both give
prefill tokens/s and decode tokens/s; the greedy tokens must agree (printed). Each figure is the
best of --runs whole runs (a fresh process for pt2web, a fresh module for PyTorch). Also printed:
bytes read back per decode token, peak host memory (resident set: this process for PyTorch, the
pt2web processes for pt2web), pt2web's peak GPU buffer bytes and pt2web's own host heap after
loading (against the largest single weight). pt2web runs once per --weights format (weights
quantized at load, or `f16`: the whole program computing in float16, `--dtype f16`; their greedy
tokens may leave the f32 ones, the agreement is printed).
With `--browser`, the same archive and prompt also run in headless Chromium through
bench/browser_llm.mjs (`model.generate` of the npm package: WebGPU on SwiftShader, and the WASM
CPU backend, `--browser-threads` workers), one row per device and variant (f16 is refused on
SwiftShader, which has no shader-f16: the row says so). Needs the wasm packages (npm run build,
or scripts/build_wasm.sh) and Debian's chromium.
Printed, not a timed test. Targets (issue 15): CPU decode >= PyTorch eager's tok/s; readback
<= 8 bytes per token; host memory after load <= 1.2x the largest weight on the GPU path.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))
CACHE = 1024


def export(path: Path, layers: int, hidden: int, max_seq: int) -> None:
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformers.integrations.executorch import convert_and_export_with_cache

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=8192, hidden_size=hidden, intermediate_size=hidden * 8 // 3 // 64 * 64,
                      num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=2,
                      max_position_embeddings=CACHE)
    m = LlamaForCausalLM(cfg).eval()
    m.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", max_length=CACHE,
        cache_config={"batch_size": 1, "max_cache_len": CACHE, "device": "cpu"})
    seq = torch.export.Dim("seq", min=1, max=max_seq)
    ids = torch.zeros(1, 4, dtype=torch.long)
    ep = convert_and_export_with_cache(m, ids, torch.arange(4),
                                       dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}})
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.export.save(ep, path)


def torch_run(path: Path, prompt: list, new: int) -> dict:
    m = torch.export.load(path).module()
    with torch.no_grad():
        t0 = time.perf_counter()
        logits = m(input_ids=torch.tensor([prompt]), cache_position=torch.arange(len(prompt)))
        tok = int(torch.argmax(logits[0, -1]))
        prefill = time.perf_counter() - t0
        out, pos = [tok], len(prompt)
        t1 = time.perf_counter()
        while len(out) < new:
            logits = m(input_ids=torch.tensor([[tok]]), cache_position=torch.tensor([pos]))
            tok = int(torch.argmax(logits[0, -1]))
            out.append(tok)
            pos += 1
        decode = time.perf_counter() - t1
    return {"tokens": out, "prefill_tok_s": len(prompt) / prefill,
            "decode_tok_s": (new - 1) / decode if new > 1 else None}


def pt2web_run(path: Path, prompt: list, new: int, device: str, weights: str = "f32") -> dict:
    # The peak resident set of the pt2web process itself, through GNU time (Debian's `time`):
    # a forked child's ru_maxrss would count this Python process's memory too.
    gnu_time = Path("/usr/bin/time")
    with tempfile.NamedTemporaryFile(mode="r", suffix=".txt") as peak:
        wrap = [str(gnu_time), "-f", "%M", "-o", peak.name] if gnu_time.exists() else []
        fmt = ["--dtype", "f16"] if weights == "f16" else ["--weights", weights]
        r = subprocess.run([*wrap, BIN, "generate", str(path), "--prompt-ids", ",".join(map(str, prompt)),
                            "--max-new-tokens", str(new), "--device", device, *fmt, "--json"],
                           capture_output=True, text=True)
        kib = peak.read().strip().splitlines()
    if r.returncode != 0:
        raise SystemExit(f"pt2web generate failed: {r.stderr.strip()}")
    j = json.loads(r.stdout)
    j["host_peak_mb"] = int(kib[-1]) / 1024 if kib and kib[-1].isdigit() else None
    j["prefill_tok_s"] = len(prompt) / (j["prefill_ms"] / 1e3)
    return j


def browser_rows(a, path: Path, prompt: list) -> list:
    """bench/browser_llm.mjs's rows (one JSON line per device and variant), or none."""
    if not a.browser:
        return []
    r = subprocess.run(["node", str(ROOT / "bench" / "browser_llm.mjs"), "--model", path.name,
                        "--prompt", ",".join(map(str, prompt)), "--new", str(a.new),
                        "--variants", a.weights, "--devices", a.browser_devices,
                        "--threads", str(a.browser_threads)],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"bench/browser_llm.mjs failed: {r.stderr.strip()[-2000:]}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--weights", default="f32,int8,int4,f16",
                    help="pt2web's variants to run, comma-separated: weight formats (f32, int8, "
                         "int4[:GROUP]) or f16 (computing in float16, --dtype f16); their greedy "
                         "tokens may leave the f32 ones")
    ap.add_argument("--browser", action="store_true",
                    help="also run the variants in headless Chromium (bench/browser_llm.mjs)")
    ap.add_argument("--browser-devices", default="webgpu,cpu")
    ap.add_argument("--browser-threads", type=int, default=1)
    a = ap.parse_args()
    if a.prompt + a.new > CACHE:
        ap.error(f"--prompt + --new must fit the {CACHE}-position cache")
    max_seq = max(a.prompt, 128)
    path = ROOT / ".cache" / "models" / f"llama_bench.l{a.layers}h{a.hidden}s{max_seq}.pt2"
    if not path.exists():
        print(f"exporting {path.name} ...", file=sys.stderr)
        export(path, a.layers, a.hidden, max_seq)
    threads = torch.get_num_threads()
    os.environ.setdefault("PT2WEB_NUM_THREADS", str(threads))
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 8192, (a.prompt,), generator=g).tolist()
    pt = max((torch_run(path, prompt, a.new) for _ in range(a.runs)), key=lambda r: r["decode_tok_s"] or 0)
    # Peak resident memory (Linux reports KiB): this process for PyTorch (the interpreter and
    # torch's libraries included); pt2web's process in pt2web_run.
    pt["host_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = []
    for w in a.weights.split(","):
        rows.append((w, max((pt2web_run(path, prompt, a.new, a.device, w) for _ in range(a.runs)),
                            key=lambda r: r["decode_tok_s"] or 0)))
    print(f"\nLlama-style, hidden {a.hidden}, {a.layers} layers, GQA 8/2, vocab 8192, cache {CACHE}; "
          f"prompt {a.prompt}, {a.new} new tokens, greedy; {threads} threads (torch {torch.__version__}); "
          f"best of {a.runs}; archive {path.stat().st_size / 2**20:.0f} MiB")
    print("host peak: the process's peak resident set (on lavapipe it holds the GPU memory too); "
          "heap after load: pt2web's own host memory once loaded (Rust heap, no driver memory), "
          "against the largest single weight")
    print(f"{'engine':<24}{'prefill tok/s':>14}{'decode tok/s':>14}{'readback B/tok':>16}"
          f"{'host peak MiB':>15}{'GPU peak MiB':>14}{'heap after load':>17}")
    print(f"{'PyTorch eager':<24}{pt['prefill_tok_s']:>14.1f}{pt['decode_tok_s']:>14.1f}{'-':>16}"
          f"{pt['host_peak_mb']:>15.0f}{'-':>14}{'-':>17}")
    for w, pw in rows:
        rb = pw["readback_bytes_per_token"]
        gpu = pw.get("gpu_peak_bytes")
        host = "-" if pw["host_peak_mb"] is None else f"{pw['host_peak_mb']:.0f}"
        heap = pw.get("host_heap_after_load_bytes")
        big = pw.get("largest_weight_bytes") or 0
        heap_s = "-" if heap is None else f"{heap / 2**20:.1f} ({heap / max(big, 1):.2f}x)"
        print(f"{'pt2web ' + pw['device'] + ' ' + w:<24}{pw['prefill_tok_s']:>14.1f}{pw['decode_tok_s']:>14.1f}"
              f"{'-' if rb is None else rb:>16}{host:>15}"
              f"{'-' if gpu is None else f'{gpu / 2**20:.0f}':>14}{heap_s:>17}")
    for r in browser_rows(a, path, prompt):
        name = f"Chromium {r['device']} {r['variant']}"
        if "error" in r:
            print(f"{name:<24}  {r['error']}")
            continue
        pf = len(prompt) / (r["prefill_ms"] / 1e3)
        same = "equal" if r["tokens"] == pt["tokens"] else \
            f"{sum(x == y for x, y in zip(pt['tokens'], r['tokens']))}/{len(pt['tokens'])} equal"
        print(f"{name:<24}{pf:>14.1f}{r['decode_tok_s']:>14.1f}{r['readback_bytes_per_token']:>16}"
              f"{'-':>15}{'-':>14}{'-':>17}   greedy tokens {same}")
    for w, pw in rows:
        same = pt["tokens"] == pw["tokens"]
        agree = sum(x == y for x, y in zip(pt["tokens"], pw["tokens"]))
        tokens = "equal" if same else f"{agree}/{len(pt['tokens'])} equal"
        print(f"pt2web {w} / PyTorch f32: prefill {pw['prefill_tok_s'] / pt['prefill_tok_s']:.2f}x, "
              f"decode {pw['decode_tok_s'] / pt['decode_tok_s']:.2f}x tok/s (above 1: pt2web is faster); "
              f"greedy tokens {tokens}")
        if not same and w == "f32":
            print(f"  PyTorch {pt['tokens']}\n  pt2web  {pw['tokens']}")


if __name__ == "__main__":
    main()
