"""Export every op test case to tests/fixtures/ops/<family>.pt2 (one program per case and IR)
with the eager outputs in <family>.io.safetensors and a <family>.cases.json index.

    .venv/bin/python tests/fixgen/gen_op_cases.py [family ...]

Program names: <case> (training IR) and <case>__core (after run_decompositions()).
Tensor keys: "<program>/input_<i>" and "<program>/output_<i>" (pytree-flattened).
"""
import importlib
import json
import pkgutil
import re
import sys
import traceback
import zipfile
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch.export.pt2_archive._package import package_pt2

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
OUT = HERE.parent / "fixtures" / "ops"


def deflate_in_place(path: Path) -> None:
    """Recompress a .pt2 with deflate (same entries, same bytes). torch writes entries stored;
    the op fixtures are thousands of small JSON graphs, which deflate ~10x, keeping the
    committed set small. pt2web reads both; torch.export.load needs stored entries, so this
    is only done for these test fixtures."""
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    tmp.replace(path)


def flat(x):
    return [t for t in torch.utils._pytree.tree_leaves(x)]


def call(fn, args, raises: bool):
    """fn(*args) as (flat outputs, None), or for a `raises` case whose call raises, ([], its
    error: type, first line, and the invalid index the message names, if any)."""
    with torch.no_grad():
        try:
            return flat(fn(*[a.clone() for a in args])), None
        except Exception as e:  # torch's error is the expectation of a `raises` case
            if not raises:
                raise
            error = {"type": type(e).__name__, "message": str(e).splitlines()[0]}
            # "index 5 is out of bounds", "takes value 5", "id=5"; embedding's "index out of
            # range in self" names none.
            named = re.search(r"(?:index |value |id=)(-?\d+)", error["message"])
            if named:
                error["index"] = int(named.group(1))
            return [], error


def build_family(fam: str) -> None:
    mod = importlib.import_module(f"ops.{fam}")
    programs, tensors, index = {}, {}, []
    for case in mod.CASES:
        m = case.module()
        args = tuple(case.inputs)
        outs, error = call(m, args, case.raises)
        if case.raises and error is None:
            raise SystemExit(f"{fam}/{case.name}: the case says torch raises, but it did not")
        try:
            ep = torch.export.export(m, args, dynamic_shapes=case.dynamic_shapes, strict=False)
        except Exception as e:  # a case torch cannot export is a bug in the case list
            traceback.print_exc()
            raise SystemExit(f"{fam}/{case.name}: torch.export failed: {e}")
        variants = []
        if case.training:
            variants.append((case.name, ep))
        if case.core:
            variants.append((case.name + "__core", ep.run_decompositions()))
        for pname, prog in variants:
            programs[pname] = prog
            if case.raises:
                # What the exported program itself does: a decomposition may accept what the
                # eager op refuses (core ATen's index_add is an index_put, which wraps -1).
                outs, error = call(prog.module(), args, True)
            for i, a in enumerate(flat(list(args))):
                tensors[f"{pname}/input_{i}"] = a.contiguous().clone()
            for i, o in enumerate(outs):
                if isinstance(o, torch.Tensor):
                    o = o.detach()
                    # Complex results are stored as their real view [..., 2] (safetensors has
                    # no complex128); tests/common compares complex results that way.
                    if o.is_complex():
                        o = torch.view_as_real(o.resolve_conj())
                    tensors[f"{pname}/output_{i}"] = o.contiguous().clone()
            entry = {
                "program": pname, "case": case.name, "tol": case.tol, "note": case.note,
                "inputs": [[str(a.dtype).replace("torch.", ""), list(a.shape)] for a in flat(list(args))],
                "outputs": [[str(o.dtype).replace("torch.", ""), list(o.shape)] if isinstance(o, torch.Tensor) else repr(o) for o in outs],
                "ops": sorted({str(n.target) for n in prog.graph.nodes if n.op == "call_function"}),
            }
            if error is not None:
                entry["error"] = error
            index.append(entry)
    OUT.mkdir(parents=True, exist_ok=True)
    package_pt2(str(OUT / f"{fam}.pt2"), exported_programs=programs)
    deflate_in_place(OUT / f"{fam}.pt2")
    save_file(tensors, str(OUT / f"{fam}.io.safetensors"))
    (OUT / f"{fam}.cases.json").write_text(json.dumps({"family": fam, "torch_version": torch.__version__, "cases": index}, indent=1))
    print(f"{fam}: {len(index)} programs")


def main() -> None:
    fams = sys.argv[1:] or sorted(m.name for m in pkgutil.iter_modules([str(HERE / "ops")]) if m.name != "case")
    for fam in fams:
        build_family(fam)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--deflate-existing"]:
        for p in sorted(OUT.glob("*.pt2")):
            deflate_in_place(p)
    else:
        main()
