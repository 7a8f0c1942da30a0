"""One op test case: a function (or module) of tensors, its inputs, and how to export it.

Families list their cases in tests/fixgen/ops/<family>.py as `CASES = [Case(...), ...]`;
tests/fixgen/gen_op_cases.py exports every case (training IR and, unless core=False, core
ATen after run_decompositions()) into tests/fixtures/ops/<family>.pt2 and stores the eager
PyTorch outputs next to it. Expected values always come from eager PyTorch.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

# Named tolerances (rust side: tests/ops.rs). exact: ints/bools bit-equal, floats equal;
# close: default float32; loose: accumulations (matmul, conv, reductions over many terms);
# half: float16/bfloat16 results.
TOLERANCES = {"exact", "close", "loose", "half"}


@dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    inputs: list
    kwargs: dict = field(default_factory=dict)
    tol: str = "close"
    core: bool = True  # also export after run_decompositions()
    training: bool = True  # export the training IR program
    dynamic_shapes: Optional[Any] = None
    note: str = ""
    # Eager torch raises for these inputs (an out-of-range index): the case records torch's
    # error instead of outputs, and the runtime must fail the same way (tests/common).
    raises: bool = False

    def module(self) -> torch.nn.Module:
        if isinstance(self.fn, torch.nn.Module):
            return self.fn.eval()
        fn = self.fn
        kw = self.kwargs

        class Wrap(torch.nn.Module):
            def forward(self, *args):
                return fn(*args, **kw)

        return Wrap().eval()


def g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=g(seed)).to(dtype)


def randint(lo, hi, *shape, seed=0, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=g(seed)).to(dtype)


def long_ints(n, count, period=7, shift=3):
    """`count` integer-valued floats in [-shift, period - 1 - shift], repeating every `period`,
    made in the program from `n` (a 0-d int32 input holding 1, so nothing is folded away):
    operands past lavapipe's 65,535 loop steps per invocation (issue 17) that stay small in the
    fixture, and sums of their products that f32 holds exactly."""
    return (n * torch.arange(count, dtype=torch.int32) % period - shift).float()


ONE = torch.tensor(1, dtype=torch.int32)
