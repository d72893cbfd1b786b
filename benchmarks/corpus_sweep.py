"""The whole corpus through the engine: every round module's correct file, bugs and twins, one verdict each.

    python benchmarks/corpus_sweep.py OUT.json [--sizes dims|equal|other] [--dependencies] [--jobs 2]

``dims`` (the default): each module at its first DIMS. ``equal``: at that DIMS's equal sizes (B = T = H = 4, or
the module's own ``EQUAL``). ``other``: at a few sizes the module was never written for, each of T, B, H and D
moved on its own (T + 3 and 2T + 1, B = 3, H = 2, D doubled; D kept a multiple of H), to find names that rest on
a coincidence of sizes. Writes ``{module: {variant: [kind, mark, findings]}}`` (the variant ``"- @ SIZES"`` with
``other``), prints the count of each (kind, mark) and one ``ATTN`` line for each bug that got ``✓`` and each
correct file or twin that got ``✗``, ``!`` or an exception. ``--dependencies``: each trace measures the
dependency contracts too, as the CLI's ``trace`` does; ``--built-inside``: each model and its inputs are built
under the trace, as ``shapetrace trace FILE`` runs a file's ``__main__`` block. Run from the repository root; the
tests' corpus is imported from ``tests/corpus``. A whole sweep at ``dims`` takes about 3 minutes on 2 cores,
``other`` 15.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import multiprocessing as mp
import os
import sys
import warnings
from collections import Counter


def modules() -> list[str]:
    """Every module of a round package under tests/corpus (a package: a folder with ``__init__.py``)."""
    out = []
    for init in sorted(glob.glob("tests/corpus/*/__init__.py")):
        package = init.split("/")[2]
        files = sorted(glob.glob(f"tests/corpus/{package}/*.py"))
        out += [f"tests.corpus.{package}.{os.path.basename(f)[:-3]}" for f in files if not f.endswith("__init__.py")]
    return out


def other_sizes(dims: str) -> list[str]:
    """``dims`` with one of T, B, H, D moved at a time (D always a multiple of H)."""
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    out: list[str] = []

    def add(**changed):
        moved = dict(sizes, **changed)
        if "D" in moved and "H" in moved and moved["D"] % moved["H"]:
            return
        text = " ".join(f"{k}={v}" for k, v in moved.items())
        if text != dims and text not in out:
            out.append(text)

    if "T" in sizes:
        add(T=sizes["T"] + 3)
        add(T=sizes["T"] * 2 + 1)
    if "B" in sizes:
        add(B=3)
    if "H" in sizes and "D" in sizes:
        add(H=2)
        add(D=sizes["D"] * 2)
    return out


def _sizes_of(module, mode: str) -> list[str]:
    from tests.corpus.helpers import round_sizes

    first = module.DIMS[0]
    if mode == "dims":
        return [first]
    if mode == "equal":
        return [round_sizes(module)[len(module.DIMS)]]
    return other_sizes(first)


def one(job: tuple[str, str, bool, bool]) -> tuple[str, dict | None]:
    name, mode, dependencies, inside = job
    warnings.filterwarnings("ignore")
    from tests.corpus.helpers import round_outcome

    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001  (a module that does not import is reported, not fatal)
        return name, {"import": repr(exc)}
    if not (hasattr(module, "build") and hasattr(module, "DIMS")):
        return name, None
    bugs, twins = getattr(module, "BUGS", ()), getattr(module, "TWINS", ())
    found = {}
    for sizes in _sizes_of(module, mode):
        for variant in ("", *bugs, *twins):
            kind = "ok" if variant == "" else ("bug" if variant in bugs else "twin")
            try:
                mark, kinds = round_outcome(module, variant, sizes, dependencies, inside)
            except Exception as exc:  # noqa: BLE001
                mark, kinds = "EXC", (repr(exc)[:200],)
            key = variant or "-"
            found[key if mode != "other" else f"{key} @ {sizes}"] = [kind, mark, list(kinds)]
    return name, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--sizes", choices=("dims", "equal", "other"), default="dims")
    parser.add_argument("--dependencies", action="store_true", help="measure the dependency contracts too")
    parser.add_argument("--built-inside", action="store_true",
                        help="build each model and its inputs under the trace, as `shapetrace trace FILE` runs a file")
    parser.add_argument("--jobs", type=int, default=2)
    opts = parser.parse_args()
    sys.path.insert(0, os.getcwd())
    jobs = [(m, opts.sizes, opts.dependencies, opts.built_inside) for m in modules()]
    with mp.get_context("fork").Pool(opts.jobs) as pool:
        rows = dict(r for r in pool.imap_unordered(one, jobs) if r[1] is not None)
    with open(opts.out, "w") as f:
        json.dump(rows, f, indent=1, sort_keys=True)
    counts: Counter = Counter()
    for found in rows.values():
        if "import" in found:
            counts["import-error"] += 1
            continue
        counts.update((kind, mark) for kind, mark, _ in found.values())
    for key in sorted(counts, key=str):
        print(key, counts[key])
    for name, found in sorted(rows.items()):
        for variant, (kind, mark, kinds) in (found.items() if "import" not in found else []):
            if (kind == "bug" and mark == "✓") or (kind != "bug" and mark in ("✗", "!", "EXC")):
                print("ATTN", name, variant, mark, kinds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
