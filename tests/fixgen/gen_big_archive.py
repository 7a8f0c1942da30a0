"""A large `.pt2` (about 2.7 GB by default) for the streaming-load test (tests/big_archive.rs).

    .venv/bin/python tests/fixgen/gen_big_archive.py [--tables 40] [--out .cache/big]

Writes, into the git-ignored cache:
  big.pt2                 torch.export.save of `Tables`: TABLES embedding tables of 16384 x 1024
                          float32 (64 MiB each, one weight entry each), summed at a few rows;
  big.io.safetensors      input_0 (the row indices) and output_0, eager PyTorch's result.

The weights are cheap to make (arange-like, no random init) so that the archive writes in
seconds. The expected output comes from the eager module, never from pt2web. The archive is
rewritten only when it is missing or its table count changed.
"""

from __future__ import annotations

import argparse
import os
import zipfile

import torch
from safetensors.torch import save_file

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROWS, DIM = 16384, 1024


class Tables(torch.nn.Module):
    """Row `idx` of every table, summed: each table is a separate 64 MiB weight entry."""

    def __init__(self, tables: int):
        super().__init__()
        self.tables = torch.nn.ModuleList()
        base = torch.arange(ROWS * DIM, dtype=torch.float32).reshape(ROWS, DIM)
        for i in range(tables):
            # Distinct, exactly representable values per table: (k mod 4096) / 4096 + i.
            w = torch.remainder(base, 4096.0).div_(4096.0).add_(float(i))
            self.tables.append(torch.nn.Embedding.from_pretrained(w, freeze=True))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        out = self.tables[0](idx)
        for t in self.tables[1:]:
            out = out + t(idx)
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=40)
    ap.add_argument("--out", default=os.path.join(REPO, ".cache", "big"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    pt2 = os.path.join(args.out, "big.pt2")
    io = os.path.join(args.out, "big.io.safetensors")
    if os.path.exists(pt2) and os.path.exists(io):
        with zipfile.ZipFile(pt2) as z:
            n = sum(1 for f in z.namelist() if "/data/weights/weight_" in f)
        if n == args.tables:
            print(f"{pt2}: up to date ({n} tables)")
            return
    torch.manual_seed(0)
    m = Tables(args.tables).eval()
    idx = torch.tensor([0, 5, 4097, ROWS - 1], dtype=torch.int64)
    with torch.no_grad():
        expected = m(idx)
    ep = torch.export.export(m, (idx,))
    torch.export.save(ep, pt2)
    # torch reloads what it wrote and reproduces the eager output.
    back = torch.export.load(pt2).module()(idx)
    torch.testing.assert_close(back, expected, rtol=0, atol=0)
    save_file({"input_0": idx, "output_0": expected.contiguous()}, io)
    print(f"{pt2}: {os.path.getsize(pt2)} bytes, {args.tables} tables")


if __name__ == "__main__":
    main()
