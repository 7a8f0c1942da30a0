"""Writer round trips, judged by torch itself.

pt2web loads each committed fixture and writes it back (`pt2web rewrite`); torch.export.load
must accept the result, and the reloaded program must reproduce the eager PyTorch outputs
that the fixture generator stored (tests/fixgen/gen_fixtures.py). Extra files added by pt2web
must come back through `torch.export.load(..., extra_files=)`.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
import transformers.modeling_outputs  # noqa: F401  (registers ModelOutput pytree types, as a user would import them)
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))

SINGLE = sorted(
    p.name[: -len(".meta.json")]
    for p in FIX.glob("*.meta.json")
    if len(json.loads(p.read_text())["programs"]) == 1
)


def rewrite(src: Path, dst: Path, *extra: str) -> None:
    cmd = [BIN, "rewrite", str(src), str(dst)]
    for e in extra:
        cmd += ["--extra", e]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def numbered(io, prefix):
    keys = [k for k in io if k.startswith(prefix) and k[len(prefix):].isdigit()]
    return [io[k] for k in sorted(keys, key=lambda k: int(k[len(prefix):]))]


def flat_inputs(io):
    return numbered(io, "input_")


def flat_outputs(io):
    return numbered(io, "output_")


@pytest.mark.parametrize("name", SINGLE)
def test_rewrite_loads_in_torch_and_reproduces_outputs(name, tmp_path):
    meta = json.loads((FIX / f"{name}.meta.json").read_text())
    out = tmp_path / f"{name}_rt.pt2"
    rewrite(FIX / meta["archive"], out)
    if meta.get("layout", "pt2") != "pt2":
        pytest.skip("torch 2.5 archives: see test_torch25_archive_converts")
    try:
        orig = torch.export.load(FIX / meta["archive"])
    except Exception as e:
        # If torch cannot load the original either (e.g. its sample inputs pickle a class
        # defined in the generator's __main__), the rewrite must fail the same way.
        with pytest.raises(type(e)):
            torch.export.load(out)
        return
    ep = torch.export.load(out)
    # state survives bit for bit (compared before running: running mutates buffers)
    for k, v in orig.state_dict.items():
        assert torch.equal(ep.state_dict[k], v), k
    for k, v in orig.constants.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(ep.constants[k], v), k
    prog = next(iter(meta["programs"].values()))
    io = load_file(str(FIX / prog["io"]))
    # Rebuild the call from the stored flattened inputs with the program's own in_spec.
    spec = ep.call_spec.in_spec
    args, kwargs = torch.utils._pytree.tree_unflatten(flat_inputs(io), spec)
    got = torch.utils._pytree.tree_leaves(ep.module()(*args, **kwargs))
    want = flat_outputs(io)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_extra_files_round_trip(tmp_path):
    note = tmp_path / "note.txt"
    note.write_text("written by pt2web")
    out = tmp_path / "with_extra.pt2"
    rewrite(FIX / "extra_files.pt2", out, f"added.txt={note}")
    extra = {"added.txt": "", **{k: "" for k in json.loads((FIX / "extra_files.meta.json").read_text())["extra_files"]}}
    torch.export.load(out, extra_files=extra)
    assert extra["added.txt"] == "written by pt2web"
    for k, v in json.loads((FIX / "extra_files.meta.json").read_text())["extra_files"].items():
        if "content" in v:
            assert extra[k] == v["content"], k


def test_tied_weights_stay_tied(tmp_path):
    out = tmp_path / "tied_rt.pt2"
    rewrite(FIX / "tied.pt2", out)
    ep = torch.export.load(out)
    sd = {**ep.state_dict, **ep.constants}
    groups = json.loads((FIX / "tied.meta.json").read_text())["programs"]["model"]["tied"]
    assert groups, "fixture should have tied tensors"
    for g in groups:
        ptrs = {sd[k].untyped_storage().data_ptr() for k in g}
        assert len(ptrs) == 1, g


def test_multi_program_round_trip(tmp_path):
    from torch.export.pt2_archive._package import load_pt2

    out = tmp_path / "multi_rt.pt2"
    rewrite(FIX / "multi_program.pt2", out)
    loaded = load_pt2(out)
    assert set(loaded.exported_programs) == {"encoder", "decoder"}


def test_torch25_archive_converts(tmp_path):
    metas = [p for p in FIX.glob("*.meta.json") if json.loads(p.read_text()).get("layout", "").startswith("legacy")]
    if not metas:
        pytest.skip("no torch 2.5 fixture")
    meta = json.loads(metas[0].read_text())
    out = tmp_path / "from25.pt2"
    rewrite(FIX / meta["archive"], out)
    ep = torch.export.load(out)
    prog = next(iter(meta["programs"].values()))
    io = load_file(str(FIX / prog["io"]))
    args, kwargs = torch.utils._pytree.tree_unflatten(flat_inputs(io), ep.call_spec.in_spec)
    got = torch.utils._pytree.tree_leaves(ep.module()(*args, **kwargs))
    for g, w in zip(got, flat_outputs(io)):
        torch.testing.assert_close(g, w)
