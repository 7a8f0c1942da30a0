"""complex family: complex64 / complex128 tensors on the CPU (views sharing storage,
constructors, arithmetic with complex, real and number operands, reductions, copies and
views), rotary embeddings written with view_as_complex (Meta's Llama), and the FFTs
(torch.fft.*, any length: powers of two, mixed radix, primes past 64 that take Bluestein's
path), fftshift, stft and istft.

Layout of complex values in the fixtures: complex64 inputs are stored as safetensors C64;
complex results (either precision) are stored as their real view `[..., 2]`
(gen_op_cases.py writes `torch.view_as_real`; tests/common compares ours the same way).
safetensors has no complex128, so complex128 cases build their inputs from float64 ones
inside the program."""
import torch

from .case import ONE, Case, long_ints, randn

c64 = torch.complex64
f64 = torch.float64


def crandn(*shape, seed=0):
    """A random complex64 tensor (stored as C64)."""
    return torch.complex(randn(*shape, seed=seed), randn(*shape, seed=seed + 100))


def c128(re, im):
    return torch.complex(re, im)


def rotary(xq, freqs):
    """Meta's reference Llama: rotary embeddings through view_as_complex."""
    fc = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    fc = fc.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * fc).flatten(3).type_as(xq)


def stft_center(x, w, **kw):
    return torch.stft(x, 16, hop_length=4, window=w, return_complex=True, **kw)


def istft_roundtrip(x, w):
    s = torch.stft(x, 16, hop_length=4, window=w, return_complex=True)
    return torch.istft(s, 16, hop_length=4, window=w, length=x.shape[-1])


class RotaryBuffer(torch.nn.Module):
    """Llama's precomputed `freqs_cis`: a complex64 buffer in the archive's weights, and a
    complex128 tensor constant."""

    def __init__(self):
        super().__init__()
        t = torch.arange(6, dtype=torch.float32)
        freqs = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
        self.register_buffer("freqs_cis", torch.polar(torch.ones(6, 4), torch.outer(t, freqs)))
        self.shift = torch.complex(torch.tensor([0.5, -1.0], dtype=f64), torch.tensor([2.0, 0.25], dtype=f64))

    def forward(self, xq):
        xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
        out = torch.view_as_real(xq_ * self.freqs_cis.view(1, 6, 1, 4)).flatten(3)
        return out, self.shift.sum() * 2


hann = torch.hann_window(16)


def fft_long(n):
    """FFTs of 131,072 (radix 2) and 70,001 (a prime: Bluestein's) points, lengths past
    lavapipe's loop cap per invocation (issue 17; the kernels take one butterfly or element per
    invocation), every 1009th bin; the signal scaled to keep the sums near 1."""
    a = long_ints(n, 131_072, 11, 5) / 131_072
    b = long_ints(n, 70_001, 13, 6) / 70_001
    return torch.fft.fft(a)[::1009], torch.fft.fft(b)[::1009]

CASES = [
    # Views between real and complex (storage shared, as torch).
    Case("view_as_complex", lambda x: torch.view_as_complex(x) * 2, [randn(3, 4, 2)]),
    Case("view_as_real_of_input", lambda z: torch.view_as_real(z) + 1, [crandn(3, 4)]),
    Case("view_as_complex_strided", lambda x: torch.view_as_complex(x[:, ::2]), [randn(3, 4, 2)]),
    Case("view_as_real_permuted", lambda z: torch.view_as_real(z).permute(2, 0, 1).contiguous() * 1, [crandn(3, 4)]),
    Case("imag_transposed", lambda z: torch.imag(z).t().contiguous() + 0, [crandn(3, 4)]),
    Case("roundtrip_views", lambda x: torch.view_as_real(torch.view_as_complex(x)).sum(-1), [randn(5, 2)]),
    Case("rotary_embedding", rotary, [randn(2, 6, 3, 8), randn(6, 4)]),
    Case("complex_buffer_and_constant", RotaryBuffer(), [randn(2, 6, 3, 8)]),
    # Constructors.
    Case("complex", torch.complex, [randn(3, 1), randn(4)]),
    Case("polar", torch.polar, [randn(3, 4).abs(), randn(3, 4)]),
    Case("to_complex64", lambda x: x.to(c64), [randn(2, 3)]),
    Case("to_complex128", lambda x: x.to(torch.complex128), [randn(2, 3)]),
    Case("complex64_to_complex128", lambda z: z.to(torch.complex128), [crandn(2, 3)]),
    Case("int_to_complex", lambda x: (x.to(torch.int64)).to(c64), [randn(4) * 5]),
    # Taking apart.
    Case("real_imag", lambda z: (torch.real(z) + 0, torch.imag(z) * 1), [crandn(3, 4)]),
    Case("real_of_real", lambda x: torch.real(x) + 0, [randn(3)]),
    Case("abs", torch.abs, [crandn(3, 5)]),
    Case("angle_complex", torch.angle, [crandn(3, 5)]),
    Case("angle_real", torch.angle, [torch.tensor([-2.0, 0.0, 3.0, -0.5])]),
    Case("conj", lambda z: torch.conj(z) * 1, [crandn(4)]),
    Case("conj_physical", torch.conj_physical, [crandn(2, 3)]),
    Case("resolve_conj", lambda z: torch.conj(z).resolve_conj(), [crandn(2, 3)]),
    Case("isreal", torch.isreal, [torch.complex(randn(6), torch.tensor([0.0, 1, 0, 2, 0, 0]))]),
    # Arithmetic: complex with complex, real and numbers, broadcast and non-contiguous.
    Case("add", torch.add, [crandn(3, 4), crandn(4, seed=1)]),
    Case("add_alpha", lambda a, b: torch.add(a, b, alpha=2.5), [crandn(3, 4), crandn(3, 4, seed=1)]),
    Case("sub_real", torch.sub, [crandn(3, 4), randn(3, 1)]),
    Case("rsub_number", lambda z: 2 - z, [crandn(5)]),
    Case("mul", torch.mul, [crandn(2, 3, 4), crandn(3, 1, seed=1)]),
    Case("mul_real_scalar", lambda z: z * 0.5, [crandn(5)]),
    Case("mul_transposed", lambda a, b: a.t() * b, [crandn(4, 3), crandn(3, 4, seed=1)]),
    Case("div", torch.div, [crandn(3, 4), crandn(3, 4, seed=1)]),
    Case("div_real", lambda z, x: x / z, [crandn(3, 4), randn(4, seed=2)]),
    Case("neg", torch.neg, [crandn(3)]),
    Case("exp", torch.exp, [crandn(3, 4)]),
    Case("complex128_mul", lambda a, b, c, d: c128(a, b) * c128(c, d),
         [randn(3, dtype=f64), randn(3, seed=1, dtype=f64), randn(3, seed=2, dtype=f64), randn(3, seed=3, dtype=f64)]),
    Case("complex64_plus_float64", lambda z, x: z + x, [crandn(3), randn(3, dtype=f64)]),
    # Reductions.
    Case("sum", lambda z: z.sum(), [crandn(4, 5)], tol="loose"),
    Case("sum_dim", lambda z: z.sum(dim=1, keepdim=True), [crandn(4, 5, 2)], tol="loose"),
    Case("mean_dims", lambda z: z.mean(dim=(0, 2)), [crandn(4, 5, 3)], tol="loose"),
    # Copies and views.
    Case("clone_permute", lambda z: z.permute(1, 0, 2).clone(), [crandn(2, 3, 4)]),
    Case("contiguous_transpose", lambda z: z.transpose(0, 1).contiguous(), [crandn(3, 4)]),
    Case("reshape_slice_select", lambda z: z.reshape(4, 6)[1:3, ::2].select(1, 1), [crandn(2, 3, 4)]),
    Case("unsqueeze_expand", lambda z: z.unsqueeze(0).expand(3, 4).clone(), [crandn(4)]),
    Case("cat", lambda a, b: torch.cat([a, b], dim=1), [crandn(2, 3), crandn(2, 2, seed=1)]),
    Case("stack", lambda a, b: torch.stack([a, b]), [crandn(2, 3), crandn(2, 3, seed=1)]),
    Case("empty", lambda z: z * 2, [crandn(0, 3)]),
    # FFTs.
    Case("fft", torch.fft.fft, [randn(4, 8)], tol="loose"),
    Case("fft_complex_in", torch.fft.fft, [crandn(3, 12)], tol="loose"),
    Case("fft_n_pad", lambda x: torch.fft.fft(x, n=10, dim=0), [randn(7, 3)], tol="loose"),
    Case("fft_n_trim_ortho", lambda x: torch.fft.fft(x, n=5, norm="ortho"), [randn(2, 9)], tol="loose"),
    Case("fft_prime_bluestein", torch.fft.fft, [randn(2, 67)], tol="loose"),
    Case("ifft", lambda z: torch.fft.ifft(z, norm="forward"), [crandn(2, 15)], tol="loose"),
    Case("rfft", torch.fft.rfft, [randn(3, 10)], tol="loose"),
    Case("rfft_odd", torch.fft.rfft, [randn(97)], tol="loose"),
    Case("irfft", torch.fft.irfft, [crandn(3, 6)], tol="loose"),
    Case("irfft_n_odd", lambda z: torch.fft.irfft(z, n=9), [crandn(2, 5)], tol="loose"),
    Case("hfft", torch.fft.hfft, [crandn(2, 5)], tol="loose"),
    Case("ihfft", torch.fft.ihfft, [randn(2, 7)], tol="loose"),
    Case("fft2", torch.fft.fft2, [randn(2, 6, 5)], tol="loose"),
    Case("ifft2_s", lambda z: torch.fft.ifft2(z, s=(4, 8)), [crandn(3, 5)], tol="loose"),
    Case("rfftn", lambda x: torch.fft.rfftn(x, dim=(0, 2)), [randn(4, 3, 6)], tol="loose"),
    Case("irfftn", lambda z: torch.fft.irfftn(z, s=(4, 6)), [crandn(4, 4)], tol="loose"),
    Case("hfft2", torch.fft.hfft2, [crandn(3, 4)], tol="loose"),
    Case("ihfftn", torch.fft.ihfftn, [randn(3, 4, 5)], tol="loose"),
    # Lengths the GPU runs by Bluestein (primes 7, 17, 97, 1009) or Stockham passes (powers of
    # two up to 1024), along inner and outer dims, 2-D and n-D, every norm mode.
    Case("fft_prime7_ortho", lambda z: torch.fft.fft(z, norm="ortho"), [crandn(3, 7)], tol="loose"),
    Case("ifft_prime17_dim0", lambda z: torch.fft.ifft(z, dim=0), [crandn(17, 3)], tol="loose"),
    Case("rfft_prime97_forward", lambda x: torch.fft.rfft(x, norm="forward"), [randn(2, 97)], tol="loose"),
    Case("irfft_prime17_ortho", lambda z: torch.fft.irfft(z, n=17, norm="ortho"), [crandn(3, 9)], tol="loose"),
    Case("fft_pow2_1024", torch.fft.fft, [randn(2, 1024)], tol="loose"),
    Case("fft_prime1009", torch.fft.fft, [crandn(1009)], tol="loose"),
    Case("fftn_3d_forward", lambda z: torch.fft.fftn(z, norm="forward"), [crandn(4, 6, 7)], tol="loose"),
    Case("ifft2_pow2_ortho", lambda z: torch.fft.ifft2(z, norm="ortho"), [crandn(2, 8, 16)], tol="loose"),
    Case("rfft2_odd", torch.fft.rfft2, [randn(2, 5, 9)], tol="loose"),
    Case("irfft2_even", lambda z: torch.fft.irfft2(z, s=(6, 8)), [crandn(6, 5)], tol="loose"),
    Case("fft_noncontiguous", lambda z: torch.fft.fft(z.transpose(0, 1)), [crandn(6, 12)], tol="loose"),
    # Complex with real, broadcast both ways.
    Case("mul_broadcast_real", lambda z, x: z * x, [crandn(2, 3, 4), randn(3, 1)]),
    Case("div_broadcast_real", lambda z, x: z / x, [crandn(4, 1), randn(3, 1, 5) + 3]),
    Case("real_minus_complex", lambda x, z: x - z, [randn(5, 1), crandn(4)]),
    Case("fftshift", torch.fft.fftshift, [randn(5, 6)]),
    Case("ifftshift_dim", lambda x: torch.fft.ifftshift(x, dim=1), [randn(5, 7)]),
    Case("fft_then_abs_angle", lambda x: (torch.fft.rfft(x).abs(), torch.fft.rfft(x).angle()), [randn(16)], tol="loose"),
    # stft / istft (center with reflect or constant padding, windows, one- and two-sided).
    Case("stft", stft_center, [randn(2, 64), hann], tol="loose"),
    Case("stft_constant_pad", lambda x, w: stft_center(x, w, pad_mode="constant"), [randn(50), hann], tol="loose"),
    Case("stft_no_center_real_out", lambda x: torch.view_as_real(torch.stft(x, 8, hop_length=3, center=False, return_complex=True)),
         [randn(40)], tol="loose"),
    Case("stft_two_sided_normalized", lambda x, w: stft_center(x, w, onesided=False, normalized=True), [randn(48), hann], tol="loose"),
    Case("stft_win_length", lambda x, w: torch.stft(x, 16, hop_length=5, win_length=10, window=w, return_complex=True),
         [randn(60), torch.hann_window(10)], tol="loose"),
    Case("stft_complex_input", lambda z, w: torch.stft(z, 16, hop_length=4, window=w, return_complex=True),
         [crandn(40), hann], tol="loose"),
    Case("istft_roundtrip", istft_roundtrip, [randn(2, 64), hann], tol="loose"),
]


# --- issue 16: istft on every backend (decomposed at load: c2r, window, col2im overlap-add,
# envelope division, trim, length).
def istft_of(**kw):
    return lambda z, *w: torch.istft(z, window=w[0] if w else None, **kw)


CASES += [
    Case("istft_hop_win_batch", istft_of(n_fft=16, hop_length=5, win_length=10), [crandn(3, 9, 14), torch.hann_window(10)], tol="loose"),
    Case("istft_no_window_length", istft_of(n_fft=8, hop_length=2, length=30), [crandn(5, 17)], tol="loose"),
    Case("istft_center_false", istft_of(n_fft=16, hop_length=4, center=False), [crandn(2, 9, 8), hann + 0.1], tol="loose"),
    Case("istft_two_sided_complex", istft_of(n_fft=8, hop_length=2, onesided=False), [crandn(8, 11), torch.hann_window(8) + 0.05], tol="loose"),
    Case("istft_normalized_long", istft_of(n_fft=12, hop_length=3, normalized=True, length=50), [crandn(7, 12), torch.hamming_window(12)], tol="loose"),
    Case("istft_short_length", istft_of(n_fft=16, hop_length=4, length=20), [crandn(2, 9, 10), hann], tol="loose"),
    Case("fft_long", fft_long, [ONE], tol="loose", core=False),
]
