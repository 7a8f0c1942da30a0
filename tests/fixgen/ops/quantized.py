"""PT2E quantization ops (src/ops/quantized/): `quantized_decomposed.*` as torchao's
convert_pt2e leaves them, called directly. Quantized values must be bit-equal to torch's."""
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

from .case import Case, randint, randn

qd = torch.ops.quantized_decomposed


def wide(*shape, seed=0):
    # Values past the int8 range at the scales below, so the clamp matters; and exact halves.
    x = randn(*shape, seed=seed) * 4
    x.view(-1)[:4] = torch.tensor([0.125, -0.375, 0.625, 1.875])
    return x


CASES = [
    Case("quantize_per_tensor_int8", lambda x: qd.quantize_per_tensor(x, 0.05, 3, -128, 127, torch.int8), [wide(3, 5)], tol="exact"),
    Case("quantize_per_tensor_uint8", lambda x: qd.quantize_per_tensor(x, 0.03, 128, 0, 255, torch.uint8), [wide(4, 6, seed=1)], tol="exact"),
    Case("quantize_per_tensor_narrow", lambda x: qd.quantize_per_tensor(x, 0.25, 0, -127, 127, torch.int8), [wide(2, 7, seed=2)], tol="exact"),
    Case("dequantize_per_tensor_int8", lambda q: qd.dequantize_per_tensor(q, 0.05, 3, -128, 127, torch.int8), [randint(-128, 128, 3, 5, dtype=torch.int8)]),
    Case("dequantize_per_tensor_uint8", lambda q: qd.dequantize_per_tensor(q, 0.03, 128, 0, 255, torch.uint8), [randint(0, 256, 4, 6, dtype=torch.uint8)]),
    Case("fake_quant_per_tensor", lambda x: qd.dequantize_per_tensor(qd.quantize_per_tensor(x, 0.02, -5, -128, 127, torch.int8), 0.02, -5, -128, 127, torch.int8), [wide(2, 3, 8, seed=3)]),
    Case("quantize_per_tensor_tensor", lambda x, s, z: qd.quantize_per_tensor.tensor(x, s, z, -128, 127, torch.int8),
         [wide(3, 5, seed=4), torch.tensor([0.04], dtype=torch.float64), torch.tensor([-2])], tol="exact"),
    Case("dequantize_per_tensor_tensor", lambda q, s, z: qd.dequantize_per_tensor.tensor(q, s, z, -128, 127, torch.int8),
         [randint(-128, 128, 3, 5, seed=5, dtype=torch.int8), torch.tensor([0.04], dtype=torch.float64), torch.tensor([-2])]),
    Case("quantize_per_channel_axis0", lambda x, s, z: qd.quantize_per_channel(x, s, z, 0, -128, 127, torch.int8),
         [wide(4, 6, seed=6), torch.tensor([0.01, 0.05, 0.1, 0.02]), torch.tensor([0, 3, -4, 10])], tol="exact"),
    Case("quantize_per_channel_axis1", lambda x, s, z: qd.quantize_per_channel(x, s, z, 1, 0, 255, torch.uint8),
         [wide(2, 3, 5, seed=7), torch.tensor([0.02, 0.04, 0.03]), torch.tensor([128, 120, 130])], tol="exact"),
    Case("dequantize_per_channel_axis1", lambda q, s, z: qd.dequantize_per_channel(q, s, z, 1, -128, 127, torch.int8),
         [randint(-128, 128, 2, 3, 4, seed=8, dtype=torch.int8), torch.tensor([0.02, 0.04, 0.03]), torch.tensor([1, 0, -3])]),
    Case("dequantize_per_channel_no_zero_points", lambda q, s: qd.dequantize_per_channel(q, s, None, -1, -127, 127, torch.int8),
         [randint(-127, 128, 3, 4, seed=9, dtype=torch.int8), torch.tensor([0.5, 0.25, 0.125, 1.5])]),
    Case("choose_qparams_affine", lambda x: qd.choose_qparams.tensor(x, -128, 127, 1e-5, torch.int8), [wide(3, 7, seed=10) + 1.0]),
    Case("choose_qparams_symmetric", lambda x: (qd.choose_qparams_symmetric.tensor(x, -128, 127, 1e-5, torch.int8), qd.choose_qparams_symmetric.tensor(x, 0, 255, 1e-5, torch.uint8)), [wide(3, 7, seed=11)]),
    Case("choose_qparams_positive", lambda x: qd.choose_qparams.tensor(x, 0, 255, 1e-5, torch.uint8), [randn(2, 5, seed=12).abs() + 0.5]),
    # Dynamic quantization as convert_pt2e writes it: qparams from the activation, then a
    # quantize / dequantize pair through them.
    Case("dynamic_fake_quant", lambda x: (lambda sz: qd.dequantize_per_tensor.tensor(qd.quantize_per_tensor.tensor(x, sz[0], sz[1], -128, 127, torch.int8), sz[0], sz[1], -128, 127, torch.int8))(qd.choose_qparams.tensor(x, -128, 127, 1.1920928955078125e-07, torch.int8)),
         [wide(4, 9, seed=13)]),
    # The quantized values themselves (exact), from more values than a 64-invocation workgroup
    # (the GPU's range reduction strides), affine int8 and symmetric uint8.
    Case("dynamic_quant_affine", lambda x: (lambda sz: qd.quantize_per_tensor.tensor(x, sz[0], sz[1], -128, 127, torch.int8))(qd.choose_qparams.tensor(x, -128, 127, 1.1920928955078125e-07, torch.int8)),
         [wide(3, 90, seed=14) + 0.5], tol="exact"),
    Case("dynamic_quant_symmetric_uint8", lambda x: (lambda sz: qd.quantize_per_tensor.tensor(x, sz[0], sz[1], 0, 255, torch.uint8))(qd.choose_qparams_symmetric.tensor(x, 0, 255, 1e-5, torch.uint8)),
         [wide(5, 70, seed=15)], tol="exact"),
]
