"""Generate the torch.save fixtures for pt2web's pickle reader (src/pickle/).

Run from the repository root with each torch:
    .venv/bin/python tests/fixgen/gen_pickles.py      # torch 2.15: most fixtures
    .venv25/bin/python tests/fixgen/gen_pickles.py    # torch 2.5: state_dict_torch25.pt

Writes tests/fixtures/pickle/*.pt (small torch.save zips), a few bare pickles, and
expected.json (expected_torch25.json for torch 2.5). Every expected number comes from
torch itself: for each tensor, found by its path in the saved object ("sd.0.weight",
"0.1" for tuple items), the dtype, shape, stride, storage offset, requires_grad, the
row-major element bytes in hex and the values as Python numbers.
"""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import zipfile

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pickle")
IS_25 = torch.__version__.startswith("2.5")


def tensor_expect(t: torch.Tensor) -> dict:
    requires_grad = bool(t.requires_grad)
    t = t.detach()
    flat = t.contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
    if t.dtype.is_floating_point:
        values = flat.double().tolist()
    elif t.dtype == torch.bool:
        values = [bool(v) for v in flat.tolist()]
    else:
        values = [int(v) for v in flat.tolist()]
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": t.storage_offset(),
        "requires_grad": requires_grad,
        "hex": bytes(raw.tolist()).hex(),
        "values": values,
    }


def collect(obj, prefix: str, out: dict) -> None:
    """Record every tensor under `obj` by its dotted path."""
    if isinstance(obj, torch.Tensor):
        out[prefix] = tensor_expect(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            collect(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        for i, v in enumerate(obj):
            collect(v, f"{prefix}.{i}" if prefix else str(i), out)


def save(name: str, obj, expected: dict, **kwargs) -> None:
    path = os.path.join(OUT, name)
    torch.save(obj, path, **kwargs)
    tensors: dict = {}
    collect(obj, "", tensors)
    expected[name] = tensors
    print(f"{name}: {os.path.getsize(path)} bytes, {len(tensors)} tensors")


def rewrite_zip(src: str, dst: str, edit) -> None:
    """Copy a torch.save zip, letting `edit(name, data)` change or drop (None) entries."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def gen_torch25(expected: dict) -> None:
    torch.manual_seed(25)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    save("state_dict_torch25.pt", m.state_dict(keep_vars=True), expected)


def gen_main(expected: dict) -> None:
    torch.manual_seed(0)
    save(
        "dtypes.pt",
        {
            "f32": torch.randn(2, 3),
            "f16": torch.randn(4).half(),
            "bf16": torch.randn(3).bfloat16(),
            "f64": torch.tensor([1.5, -2.25], dtype=torch.float64),
            "i64": torch.arange(-2, 3),
            "i32": torch.tensor([7, -8], dtype=torch.int32),
            "u8": torch.tensor([0, 255, 3], dtype=torch.uint8),
            "bool": torch.tensor([True, False, True]),
            # uint16 has no typed storage class: torch uses _rebuild_tensor_v3 for it.
            "u16": torch.tensor([1, 65535], dtype=torch.uint16),
        },
        expected,
    )

    # nn.Parameter entries (keep_vars) next to plain buffers, in an OrderedDict with the
    # `_metadata` attribute that BUILD sets.
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    save("state_dict.pt", m.state_dict(keep_vars=True), expected)

    # Views of one storage: different offsets and strides must share one Storage.
    t = torch.arange(12.0)
    save("tied.pt", {"a": t, "b": t[2:].view(2, 5), "c": t.view(3, 4).t()}, expected)
    # The same with pickle_protocol=4 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL).
    save("tied_proto4.pt", {"a": t, "b": t[2:].view(2, 5), "c": t.view(3, 4).t()}, expected, pickle_protocol=4)

    # (args, kwargs) as torch.export sample inputs are saved; x appears twice.
    x = torch.randn(2, 2)
    y = torch.tensor([1, 2, 3])
    args = (x, 3, 2.5, "hi", None, True, [x, y], -(2**40))
    kwargs = {"mask": torch.tensor([True, False]), "scale": 0.5, "dims": (1, 2), "dt": torch.float16,
              "size": torch.Size([2, 3])}
    save("sample_inputs.pt", (args, kwargs), expected)

    base = torch.arange(24.0)
    save(
        "shapes.pt",
        {
            "zero_d": torch.tensor(3.5),
            "empty": torch.zeros(0, 3),
            "noncontig": base.view(2, 3, 4).permute(2, 0, 1),
            "offset": torch.arange(10)[3:7],
            "expanded": torch.tensor([1.0, 2.0]).expand(3, 2),
        },
        expected,
    )

    # Refusals. A function from outside the whitelist, by way of torch.save...
    torch.save({"f": os.system}, os.path.join(OUT, "foreign_global.pt"))
    # ...a torch object that is not on the whitelist...
    torch.save({"dev": torch.device("cpu")}, os.path.join(OUT, "foreign_device.pt"))
    # ...and a bare pickle of a class instance (GLOBAL + NEWOBJ/BUILD).
    with open(os.path.join(OUT, "foreign_class.pkl"), "wb") as f:
        f.write(pickle.dumps(collections.Counter(a=1), protocol=2))
    # Bare pickles of plain data: protocol 4 (FRAME, SHORT_BINUNICODE, MEMOIZE, bytes
    # opcodes) and protocol 2 (bytes as _codecs.encode(str, 'latin1') and builtins.bytes()).
    plain = {"a": [1, 2.5, None, True], "b": ("x", b"\x00\x01", b""), "big": 2**62, "neg": -(2**33)}
    with open(os.path.join(OUT, "plain_proto4.pkl"), "wb") as f:
        f.write(pickle.dumps(plain, protocol=4))
    with open(os.path.join(OUT, "plain_proto2.pkl"), "wb") as f:
        f.write(pickle.dumps(plain, protocol=2))

    tied = os.path.join(OUT, "tied.pt")
    # A storage entry shorter than the pickle declares.
    rewrite_zip(tied, os.path.join(OUT, "bad_storage_size.pt"),
                lambda n, d: d[:-4] if "/data/" in n and not n.endswith(".pkl") else d)
    # A big-endian byteorder record.
    rewrite_zip(tied, os.path.join(OUT, "big_endian.pt"), lambda n, d: b"big" if n.endswith("/byteorder") else d)
    # The storage entry missing altogether.
    rewrite_zip(tied, os.path.join(OUT, "missing_storage.pt"),
                lambda n, d: None if "/data/" in n and not n.endswith(".pkl") else d)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    expected: dict = {"torch_version": torch.__version__}
    if IS_25:
        gen_torch25(expected)
        name = "expected_torch25.json"
    else:
        gen_main(expected)
        name = "expected.json"
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
