"""`pt2web generate` against PyTorch's own token loop over the same saved program.

A Llama-style model (transformers, random weights, grouped-query attention) is exported with
transformers' static-cache recipe (`convert_and_export_with_cache`): once with one token per
call, once with a dynamic sequence length so the prompt goes in one call. PyTorch's greedy
loop runs the saved program itself (`torch.export.load(...).module()`, its KV cache in the
module's buffers): prefill, then one token per call, the argmax of the last logits each
time. pt2web's tokens must be the same.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))
CACHE_LEN = 48
PROMPT = [5, 17, 300, 42, 7]
NEW = 12


def tiny_llama():
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=384, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    m = LlamaForCausalLM(cfg).eval()
    m.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", max_length=CACHE_LEN,
        cache_config={"batch_size": 1, "max_cache_len": CACHE_LEN, "device": "cpu"})
    return m


@pytest.fixture(scope="module", params=["step", "prefill"])
def exported(request, tmp_path_factory):
    from transformers.integrations.executorch import convert_and_export_with_cache

    m = tiny_llama()
    if request.param == "step":
        ep = convert_and_export_with_cache(m)
    else:
        seq = torch.export.Dim("seq", min=1, max=16)
        ep = convert_and_export_with_cache(
            m, torch.tensor([PROMPT]), torch.arange(len(PROMPT)),
            dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}})
    path = tmp_path_factory.mktemp("llm") / f"llama_{request.param}.pt2"
    torch.export.save(ep, path)
    return request.param, path


def torch_greedy(path, prompt, new, one_call):
    m = torch.export.load(path).module()
    with torch.no_grad():
        calls = [prompt] if one_call else [[t] for t in prompt]
        pos = 0
        for c in calls:
            logits = m(input_ids=torch.tensor([c]), cache_position=torch.arange(pos, pos + len(c)))
            pos += len(c)
        out = []
        for _ in range(new):
            t = int(torch.argmax(logits[0, -1]))
            out.append(t)
            if len(out) == new:
                break
            logits = m(input_ids=torch.tensor([[t]]), cache_position=torch.tensor([pos]))
            pos += 1
    return out


def generate(path, *args):
    r = subprocess.run([BIN, "generate", str(path), *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def test_greedy_tokens_match_pytorch(exported):
    kind, path = exported
    want = torch_greedy(path, PROMPT, NEW, one_call=kind == "prefill")
    r = generate(path, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", str(NEW), "--json")
    got = json.loads(r.stdout)
    assert got["tokens"] == want
    assert got["prompt_tokens"] == len(PROMPT) and got["decode_tok_s"] > 0
    assert got["readback_bytes_per_token"] == 0  # the CPU backend reads nothing back


def test_gpu_keeps_the_cache_on_the_device(exported):
    """On the GPU backend (lavapipe in CI) the same tokens, and a decode step reads back only
    8 bytes (the argmax is taken on the device): the KV cache stays there between calls."""
    kind, path = exported
    want = torch_greedy(path, PROMPT, NEW, one_call=kind == "prefill")
    r = subprocess.run([BIN, "generate", str(path), "--prompt-ids", ",".join(map(str, PROMPT)),
                        "--max-new-tokens", str(NEW), "--device", "gpu", "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0 and "adapter" in r.stderr and not os.environ.get("PT2WEB_REQUIRE_GPU"):
        pytest.skip(f"no GPU adapter: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["device"] == "gpu"
    assert got["tokens"] == want
    assert got["readback_bytes_per_token"] == 8  # the argmax on the device: not the logits, not the cache


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_f16_execution_keeps_pytorchs_greedy_tokens(exported, device):
    """`--dtype f16`: the f32 program computes in float16 (weights and KV cache in f16, position
    math in f32); for this model the greedy tokens stay PyTorch's f32 ones, on the CPU and on
    lavapipe (which has shader-f16)."""
    kind, path = exported
    want = torch_greedy(path, PROMPT, NEW, one_call=kind == "prefill")
    r = subprocess.run([BIN, "generate", str(path), "--prompt-ids", ",".join(map(str, PROMPT)),
                        "--max-new-tokens", str(NEW), "--device", device, "--dtype", "f16", "--json"],
                       capture_output=True, text=True)
    if device == "gpu" and r.returncode != 0 and "adapter" in r.stderr and not os.environ.get("PT2WEB_REQUIRE_GPU"):
        pytest.skip(f"no GPU adapter: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tokens"] == want
    if device == "cpu":
        assert "slower than f32" in r.stderr  # the CLI says f16 does not pay off on the CPU
    r = subprocess.run([BIN, "generate", str(path), "--prompt-ids", "5", "--dtype", "f8"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--dtype" in r.stderr and "f8" in r.stderr, r.stderr


def test_eos_and_seeded_sampling(exported):
    _, path = exported
    ids = ",".join(map(str, PROMPT))
    greedy = [int(t) for t in generate(path, "--prompt-ids", ids, "--max-new-tokens", "6").stdout.split(",")]
    # Stopping at a token: the output ends with it.
    eos = greedy[2]
    stopped = [int(t) for t in generate(path, "--prompt-ids", ids, "--max-new-tokens", "6",
                                        "--eos", str(eos)).stdout.split(",")]
    assert stopped == greedy[: greedy.index(eos) + 1]
    # The same seed draws the same tokens; top-k 1 is greedy.
    sample = ["--prompt-ids", ids, "--max-new-tokens", "8", "--temperature", "1.5", "--top-p", "0.95"]
    a = generate(path, *sample, "--seed", "3").stdout
    assert a == generate(path, *sample, "--seed", "3").stdout
    topk1 = generate(path, "--prompt-ids", ids, "--max-new-tokens", "6", "--temperature", "1.0",
                     "--top-k", "1").stdout
    assert [int(t) for t in topk1.split(",")] == greedy


def test_bad_calls_say_what_is_wrong(exported, tmp_path):
    _, path = exported
    r = subprocess.run([BIN, "generate", str(path), "--prompt-ids", "5,99999"], capture_output=True, text=True)
    # Token 99999 is past the 384-entry vocabulary: the error names the call's position.
    assert r.returncode != 0 and "at position" in r.stderr, r.stderr
    r = subprocess.run([BIN, "generate", str(path), "--prompt-ids", "5", "--top-p", "0"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--top-p" in r.stderr
    not_llm = ROOT / "tests" / "fixtures" / "mlp_train.pt2"
    r = subprocess.run([BIN, "generate", str(not_llm), "--prompt-ids", "1"], capture_output=True, text=True)
    assert r.returncode != 0 and "static KV cache" in r.stderr, r.stderr
