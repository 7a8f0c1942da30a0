"""scaled_dot_product_attention and its fused CPU forms (src/ops/attention.rs). In core ATen
sdpa decomposes into bmm/_softmax/where/... (other families' ops, 40-60 KB of graph per
program), so only a few cases export the core form too."""
import torch
import torch.nn.functional as F

from .case import ONE, Case, long_ints, randn

A = torch.ops.aten
f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64
sdpa = F.scaled_dot_product_attention


def qkv(b, h, l, s, e, ev=None, seed=0, dtype=torch.float32, hk=None):
    ev = ev or e
    hk = hk or h
    return [randn(b, h, l, e, seed=seed, dtype=dtype), randn(b, hk, s, e, seed=seed + 1, dtype=dtype), randn(b, hk, s, ev, seed=seed + 2, dtype=dtype)]


def bool_mask(l, s, seed=5):
    m = torch.rand(l, s, generator=torch.Generator().manual_seed(seed)) > 0.4
    m[:, 0] = True
    m[1] = False  # a fully masked row: eager gives zeros
    return m



def flash_long_keys(q, n):
    """flash_attention_for_cpu over 70,000 keys (its logsumexp and the weights-times-values
    product walk every key: past lavapipe's loop cap, issue 17); keys and values made in the
    program."""
    k = 0.1 * long_ints(n, 560_000, 11, 5).reshape(1, 1, 70_000, 8)
    v = long_ints(n, 560_000, 13, 6).reshape(1, 1, 70_000, 8)
    return A._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)


CASES = [
    Case("sdpa_basic", lambda q, k, v: sdpa(q, k, v), qkv(2, 3, 5, 7, 8)),
    # A decode step against a long cache (600 keys, head dim 64): past the key count where the
    # streaming kernel went wrong on lavapipe (src/gpu/kernels/attention.rs).
    Case("sdpa_long_keys", lambda q, k, v: sdpa(q, k, v), qkv(1, 2, 1, 600, 64), core=False),
    # Decode steps over a cache (the GPU splits the keys in ranges, flash-decoding): a mask
    # with -inf runs (a range all masked), a fully masked row, and a causal one whose rows
    # read only the first keys (most ranges empty).
    Case("sdpa_decode_masked", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
         qkv(1, 4, 2, 300, 32) + [randn(2, 300, seed=7).masked_fill(torch.arange(300) % 97 < 40, float("-inf")).index_fill(0, torch.tensor([1]), float("-inf"))], core=False),
    Case("sdpa_decode_causal", lambda q, k, v: sdpa(q, k, v, is_causal=True), qkv(1, 3, 3, 200, 16), core=False),
    Case("sdpa_decode_gqa", lambda q, k, v: sdpa(q, k, v, enable_gqa=True), qkv(1, 8, 1, 300, 32, hk=2), core=False),
    # Core ATen's attention becomes one fused node (src/ops/attention/fused.rs) that the CPU
    # runs a block of keys at a time (256 per block): causal rows over several key blocks, and
    # an additive mask with -inf runs and a fully masked row, over 600 keys.
    Case("sdpa_long_causal", lambda q, k, v: sdpa(q, k, v, is_causal=True), qkv(1, 1, 270, 270, 8)),
    Case("sdpa_long_float_mask", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
         qkv(1, 1, 3, 600, 8) + [randn(3, 600, seed=4).masked_fill(torch.arange(600) % 311 < 90, float("-inf")).index_fill(0, torch.tensor([2]), float("-inf"))]),
    Case("sdpa_value_dim", lambda q, k, v: sdpa(q, k, v), qkv(1, 2, 4, 6, 8, ev=5), core=False),
    Case("sdpa_causal", lambda q, k, v: sdpa(q, k, v, is_causal=True), qkv(2, 2, 6, 6, 4), core=False),
    Case("sdpa_causal_rect", lambda q, k, v: sdpa(q, k, v, is_causal=True), qkv(1, 2, 3, 5, 4)),
    Case("sdpa_scale", lambda q, k, v: sdpa(q, k, v, scale=0.3), qkv(1, 2, 4, 4, 8), core=False),
    Case("sdpa_bool_mask", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), qkv(2, 2, 4, 6, 8) + [bool_mask(4, 6)]),
    Case("sdpa_float_mask_bcast", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), qkv(2, 3, 4, 5, 8) + [randn(2, 1, 1, 5, seed=9)], core=False),
    Case("sdpa_float_mask_inf", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m.masked_fill(m > 0.5, float("-inf"))), qkv(1, 2, 4, 4, 8) + [randn(4, 4, seed=3)], core=False),
    Case("sdpa_gqa", lambda q, k, v: sdpa(q, k, v, enable_gqa=True), qkv(1, 4, 5, 6, 8, hk=2), core=False),
    Case("sdpa_3d", lambda q, k, v: sdpa(q, k, v), [randn(3, 4, 8), randn(3, 6, 8, seed=1), randn(3, 6, 8, seed=2)], core=False),
    Case("sdpa_batch_bcast", lambda q, k, v: sdpa(q, k, v), [randn(2, 1, 4, 8), randn(1, 3, 5, 8, seed=1), randn(1, 3, 5, 8, seed=2)], core=False),
    Case("sdpa_noncontig", lambda q, k, v: sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)), [randn(2, 5, 3, 8), randn(2, 6, 3, 8, seed=1), randn(2, 6, 3, 8, seed=2)], core=False),
    Case("sdpa_f16", lambda q, k, v: sdpa(q, k, v), qkv(1, 2, 4, 5, 16, dtype=f16), tol="half", core=False),
    # An f16 KV cache (`--dtype f16`): the GPU's streaming kernel reads f16 q / k / v as they
    # are, over key ranges (flash-decoding) with grouped-query heads and a bool mask.
    Case("sdpa_f16_decode_gqa", lambda q, k, v: sdpa(q, k, v, enable_gqa=True), qkv(1, 8, 1, 300, 32, hk=2, dtype=f16), tol="half", core=False),
    Case("sdpa_f16_decode_mask", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), qkv(1, 2, 2, 300, 32, dtype=f16) + [torch.arange(300).expand(2, 300) % 7 != 3], tol="half", core=False),
    Case("sdpa_bf16_causal", lambda q, k, v: sdpa(q, k, v, is_causal=True), qkv(1, 2, 4, 4, 16, dtype=bf16), tol="half", core=False),
    Case("sdpa_f64", lambda q, k, v: sdpa(q, k, v), qkv(1, 2, 3, 4, 8, dtype=f64), core=False),
    Case("flash_for_cpu", lambda q, k, v: A._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, is_causal=True), qkv(1, 2, 4, 4, 8), core=False),
    Case("sdpa_math", lambda q, k, v, m: A._scaled_dot_product_attention_math.default(q, k, v, m), qkv(1, 2, 3, 5, 8) + [bool_mask(3, 5)], core=False),
    Case("flash_long_keys", flash_long_keys, [randn(1, 1, 2, 8), ONE], tol="loose", core=False),
]
