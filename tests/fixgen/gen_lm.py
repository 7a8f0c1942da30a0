#!/usr/bin/env python
"""Tiny language models exported with a static KV cache, and PyTorch's greedy tokens for them
(torch 2.15, transformers 5.24; random weights).

    .venv/bin/python tests/fixgen/gen_lm.py [--force]

For each model NAME this writes into the git-ignored cache .cache/models/ (about 1 MB each,
mostly the graph's JSON; scripts/build_models.sh runs this):
  NAME.pt2            transformers' static-cache recipe (`convert_and_export_with_cache`):
                      user inputs input_ids [1, seq] and cache_position [seq] (seq dynamic,
                      1..16), output the logits [1, seq, vocab]; the cache is the module's
                      buffers, updated in place by each call.
  NAME.generate.json  {"covers", "prompt", "max_new_tokens", "tokens", "vocab", "cache_len",
                      "tokens_int8", "tokens_int4"}:
                      `tokens` are PyTorch's greedy tokens from its own loop over the saved
                      program (`torch.export.load(NAME.pt2).module()`): the prompt in one call,
                      then one token per call, each the argmax of the last logits;
                      `tokens_int8` / `tokens_int4` the same loop with the weights rounded as
                      below.
  NAME.logits.safetensors  `prefill_last`: the prompt call's last logits; `step_<i>`: the
                      last logits of decode call i (for the max error against PyTorch);
                      `prefill_last_int8` / `prefill_last_int4`: the prompt call's last logits
                      with the weights of every Linear, Embedding and Conv1D rounded as
                      pt2web's load-time quantization rounds them (`--weights int8` / `int4`,
                      the format of src/ops/matmul/quant.rs, implemented here independently).

An existing archive is kept unless --force; the json and logits always come from the archive
on disk.
"""
import argparse
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import save_safetensors  # noqa: E402

warnings.filterwarnings("ignore")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".cache", "models")
CACHE_LEN = 32
PROMPT = [3, 17, 42, 9, 77]
NEW = 10


def with_static_cache(m):
    from transformers import GenerationConfig

    m.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", max_length=CACHE_LEN,
        cache_config={"batch_size": 1, "max_cache_len": CACHE_LEN, "device": "cpu"})
    return m


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return ("Llama-style (transformers LlamaForCausalLM: RoPE, RMSNorm, SwiGLU, grouped-query "
            "attention 4/2 heads), 2 layers, hidden 32, vocab 96", LlamaForCausalLM(cfg).eval())


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1)
    # A wider init than GPT-2's 0.02, so the greedy tokens vary (at 0.02 they repeat one id).
    cfg = GPT2Config(vocab_size=96, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                     bos_token_id=1, eos_token_id=2, initializer_range=0.3)
    return ("GPT-2-style (transformers GPT2LMHeadModel: learned positions, LayerNorm, GELU, "
            "tied lm_head), 2 layers, n_embd 32, vocab 96", GPT2LMHeadModel(cfg).eval())


MODELS = {"llama_static": tiny_llama, "gpt2_static": tiny_gpt2}


def export(m, path):
    from transformers.integrations.executorch import convert_and_export_with_cache

    seq = torch.export.Dim("seq", min=1, max=16)
    ep = convert_and_export_with_cache(
        with_static_cache(m), torch.tensor([PROMPT]), torch.arange(len(PROMPT)),
        dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}})
    torch.export.save(ep, path)


def greedy(path, weights=None):
    """PyTorch's greedy loop over the saved program (its state replaced by `weights`)."""
    m = torch.export.load(path).module()
    if weights is not None:
        m.load_state_dict(weights)
    logits = {}
    with torch.no_grad():
        out = m(input_ids=torch.tensor([PROMPT]), cache_position=torch.arange(len(PROMPT)))
        logits["prefill_last"] = out[0, -1].clone()
        pos, tokens = len(PROMPT), []
        for i in range(NEW):
            t = int(torch.argmax(out[0, -1]))
            tokens.append(t)
            if len(tokens) == NEW:
                break
            out = m(input_ids=torch.tensor([[t]]), cache_position=torch.tensor([pos]))
            logits[f"step_{i}"] = out[0, -1].clone()
            pos += 1
    return tokens, logits


def fake_quant(w, bits, group):
    """w [n, k] (rows = outputs) through symmetric round-to-nearest-even quantization with one
    scale per `group` consecutive inputs of a row, back to f32."""
    qmax = 2 ** (bits - 1) - 1
    n, k = w.shape
    g = w.reshape(n, k // group, group)
    s = g.abs().amax(-1, keepdim=True) / qmax
    safe = torch.where(s > 0, s, torch.ones_like(s))
    q = torch.where(s > 0, torch.round(g / safe), torch.zeros_like(g)).clamp(-qmax, qmax)
    return (q * s).reshape(n, k)


def quantized_state(m, path, bits, group):
    """The saved program's state with m's Linear / Embedding / Conv1D weights rounded
    (exported names are the module's with the wrapper's `model.` prefix)."""
    from transformers.pytorch_utils import Conv1D

    sd = torch.export.load(path).module().state_dict()
    for name, mod in m.named_modules():
        key = f"model.{name}.weight"
        if key not in sd:  # a tied weight (GPT-2's lm_head is wte): quantized once, there
            continue
        if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
            w = mod.weight.detach()
            sd[key] = fake_quant(w, bits, group or w.shape[1])
        elif isinstance(mod, Conv1D):
            w = mod.weight.detach().t()  # [out, in]
            sd[key] = fake_quant(w, bits, group or w.shape[1]).t().contiguous()
    return sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    for name, build in MODELS.items():
        covers, m = build()
        path = os.path.join(OUT, f"{name}.pt2")
        if args.force or not os.path.exists(path):
            export(m, path)
        tokens, logits = greedy(path)
        quantized = {}
        for fmt, bits, group in [("int8", 8, None), ("int4", 4, 32)]:
            q_tokens, q_logits = greedy(path, quantized_state(m, path, bits, group))
            quantized[f"tokens_{fmt}"] = q_tokens
            logits[f"prefill_last_{fmt}"] = q_logits["prefill_last"]
        meta = {"covers": covers, "prompt": PROMPT, "max_new_tokens": NEW, "tokens": tokens,
                "vocab": int(logits["prefill_last"].numel()), "cache_len": CACHE_LEN,
                "torch_version": torch.__version__, **quantized}
        with open(os.path.join(OUT, f"{name}.generate.json"), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        save_safetensors(logits, os.path.join(OUT, f"{name}.logits.safetensors"))
        print(f"{name}: {os.path.getsize(path)} bytes, tokens {tokens}")


if __name__ == "__main__":
    main()
