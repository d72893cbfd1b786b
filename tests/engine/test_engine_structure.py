"""Issue 21, item 6: the diagnostic rules read an Analysis (plain inferred facts), never the recorder,
and the app gives the Trace what it read through one method instead of writing attributes onto it."""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import pytest
import torch

import shapetrace
from shapetrace.engine.analysis import Analysis
from shapetrace.engine.events import Event
from shapetrace.engine.namer import Namer
from shapetrace.engine.rules.diagnose import diagnose
from shapetrace.engine.vocabulary import canonical_dims

PACKAGE = Path(shapetrace.__file__).parent
RULE_MODULES = ["rules/diagnose", "rules/contracts", "rules/masks", "rules/writes", "rules/order", "rules/joins"]
RECORDER_MODULES = {"shapetrace.engine.tracer", "shapetrace.engine.capture"}
#: what the app once wrote onto the Trace after the run
PRESENTATION = {"value_note", "nan_rows", "nan_event", "header", "meta_note", "title"}


def _tree(module: str) -> ast.Module:
    path = PACKAGE / "engine" / f"{module}.py"
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def recorder_imports(tree: ast.Module) -> list[str]:
    """Every import of the tracer or the capture, TYPE_CHECKING blocks and function bodies included."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name in RECORDER_MODULES]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:   # from .tracer import Trace / from . import capture
                base = "shapetrace.engine" + (f".{base}" if base else "")
            names = [base] + [f"{base}.{a.name}" for a in node.names]
            found += [n for n in names if n in RECORDER_MODULES]
    return found


def getattr_calls(tree: ast.Module) -> list[int]:
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"]


def trace_parameters(tree: ast.Module) -> list[str]:
    """Functions with a parameter called ``trace`` (a reader would take it for the recorder)."""
    return [node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(a.arg == "trace" for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))]


# -- (a) the rule modules, parsed -----------------------------------------------

@pytest.mark.parametrize("module", RULE_MODULES)
def test_rule_modules_never_import_the_recorder(module):
    assert recorder_imports(_tree(module)) == []


@pytest.mark.parametrize("module", RULE_MODULES)
def test_rule_modules_call_no_getattr(module):
    assert getattr_calls(_tree(module)) == []


@pytest.mark.parametrize("module", RULE_MODULES)
def test_rule_parameters_are_not_called_trace(module):
    assert trace_parameters(_tree(module)) == []


def test_analysis_module_imports_neither_tracer_nor_capture():
    assert recorder_imports(_tree("analysis")) == []
    imported = {n.module for n in ast.walk(_tree("analysis")) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith("torch") for m in imported)


def test_the_scanners_find_what_they_look_for():
    planted = ast.parse("from shapetrace.engine.tracer import Trace\n"
                        "from . import capture\n"
                        "import shapetrace.engine.capture\n"
                        "def rule(trace):\n    return getattr(trace, 'nan_rows', None)\n")
    assert recorder_imports(planted) == ["shapetrace.engine.tracer", "shapetrace.engine.capture",
                                         "shapetrace.engine.capture"]
    assert getattr_calls(planted) == [5]
    assert trace_parameters(planted) == ["rule"]


def test_analysis_is_frozen():
    analysis = Analysis(events=(), namer=Namer({}), dims={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        analysis.nan_rows = [(0, 0, 1)]   # type: ignore[misc]


# -- (b) diagnose reads the Analysis and nothing else ---------------------------------

def _namer(dims: dict[str, int]) -> Namer:
    sizes, declared = canonical_dims(dims)
    return Namer(sizes, declared_roles=declared)


def test_a_hand_built_analysis_gives_exactly_its_findings():
    namer = _namer({"B": 2, "T": 8, "D": 512, "H": 8})
    scale = Event(index=0, op="mul", source="model.py:3", code="scores * 0.0442", function="forward",
                  inputs=[], outputs=[])
    analysis = Analysis(events=(scale,), namer=namer, dims=dict(namer.dims), seeded_by_size=True,
                        size_choices=(("T", "H"),),
                        scalings=({"event": 0, "factor": 1 / math.sqrt(512), "on": "scores"},),
                        nan_rows=((1, 0, 0), (1, 3, 0)))
    found = diagnose(analysis)
    assert [(d.severity, d.kind, d.event) for d in found] == [
        ("error", "nan-rows", None), ("warning", "scale-not-head-dim", 0), ("note", "ambiguous-sizes", None)]
    assert found[0].message.startswith("2 rows of the attention weights are NaN (sequence 1: queries 0, "
                                       "in 2 heads). Every key of these queries is masked")
    assert found[1].message == (
        "the scores are scaled by 1/√512 = 0.04419, the model width D; attention divides by √d_k = √64 "
        "(one head's width), 0.125. With √D the softmax is flatter than intended by a factor √H = 2.83.")
    assert found[2].message.startswith("T = H = 8: names found from sizes alone are ambiguous.")


def test_the_note_on_unread_values_comes_from_the_analysis():
    analysis = Analysis(events=(), namer=_namer({"B": 2, "T": 6}), dims={"B": 2, "T": 6},
                        value_note="NaN-row check skipped: the meta device has no values")
    assert [(d.severity, d.kind, d.event, d.message) for d in diagnose(analysis)] == [
        ("note", "nan-rows-skipped", None, "NaN-row check skipped: the meta device has no values")]
    assert diagnose(dataclasses.replace(analysis, value_note=None)) == []


def _mixed_trace():
    x = torch.zeros(2, 6, 512)
    with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        heads = x.view(2, 6, 8, 64).transpose(1, 2)   # (B, H, T, d_k)
        heads.contiguous().view(2, 6, 512)            # (B, !H*T, !H*T*d_k): the heads never moved back
    return t


def test_a_real_trace_diagnoses_its_analysis_and_a_replaced_field_changes_only_that():
    t = _mixed_trace()
    analysis = t.analysis()
    assert t.diagnostics == diagnose(analysis)
    assert [(d.kind, d.event) for d in t.diagnostics] == [("mixed-axis", 3)]
    with_nan = diagnose(dataclasses.replace(analysis, nan_rows=((0, 0, 1),), nan_event=3))
    assert [(d.severity, d.kind, d.event) for d in with_nan] == [("error", "mixed-axis", 3), ("error", "nan-rows", 3)]
    assert with_nan[1].message.startswith("1 rows of the attention weights are NaN (sequence 0: queries 1, in 1 head).")
    assert diagnose(dataclasses.replace(analysis, events=())) == []   # the events are all the rules see of them


# -- (c) the app writes nothing onto the Trace ------------------------------------------

def _writes_onto_a_trace(tree: ast.AST) -> list[str]:
    """``trace.<attr> = ...``, ``run.trace.<attr> = ...`` (tuples, augmented and item assignments
    included) for the attributes the app once wrote onto the Trace."""
    def target_names(target: ast.AST) -> list[ast.AST]:
        if isinstance(target, (ast.Tuple, ast.List)):
            return [n for elt in target.elts for n in target_names(elt)]
        if isinstance(target, ast.Subscript):   # trace.header["steps"] = ...
            return target_names(target.value)
        return [target]

    def on_a_trace(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "trace") or (
            isinstance(node, ast.Attribute) and node.attr == "trace")

    found = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in (t for tgt in targets for t in target_names(tgt)):
            if isinstance(target, ast.Attribute) and target.attr in PRESENTATION and on_a_trace(target.value):
                found.append(f"{ast.unparse(target)} (line {target.lineno})")
    return found


@pytest.mark.parametrize("layer", ["app", "cli"])
def test_app_and_cli_write_nothing_onto_the_trace(layer):
    found = {str(path.relative_to(PACKAGE)): hits for path in sorted((PACKAGE / layer).rglob("*.py"))
             if (hits := _writes_onto_a_trace(ast.parse(path.read_text(encoding="utf-8"))))}
    assert found == {}


def test_the_write_scanner_finds_planted_writes():
    planted = ast.parse("trace.nan_rows, trace.value_note = None, 'x'\n"
                        "run.trace.header = {}\n"
                        "trace.header['steps'] = starts\n"
                        "trace.meta_note: str = 'why'\n"
                        "trace.result = model(x)\n")
    assert _writes_onto_a_trace(planted) == ["trace.nan_rows (line 1)", "trace.value_note (line 1)",
                                             "run.trace.header (line 2)", "trace.header (line 3)",
                                             "trace.meta_note (line 4)"]


def test_a_trace_has_no_presentation_and_takes_values_through_read_values():
    t = _mixed_trace()
    for name in ("header", "meta_note", "value_note", "title"):
        assert not hasattr(t, name), name
    with pytest.raises(AttributeError):
        t.nan_rows = [(0, 0, 1)]   # read-only: the engine's reading, or what read_values gave
    assert t.nan_rows is None   # no softmax or attention output was traced: nothing to read
    assert [(d.kind, d.event) for d in t.diagnostics] == [("mixed-axis", 3)]
    t.read_values(None, "NaN-row check skipped: the meta device has no values")   # the cached findings are dropped
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("error", "mixed-axis"), ("note", "nan-rows-skipped")]
    report = t.report(header={"lines": ["a header"]}, title="a title", notes=["first"])
    assert (report.header, report.title, report.notes, report.nan_rows) == (
        {"lines": ["a header"]}, "a title", ["first", "NaN-row check skipped: the meta device has no values"], None)
    t.read_values([(1, 2, 3)])
    assert t.nan_rows == [(1, 2, 3)] and t.report().notes == []
    assert [(d.kind, d.event) for d in t.diagnostics] == [("nan-rows", None), ("mixed-axis", 3)]


# -- (d) the plain data has one home (issue 33, item 7) ----------------------------------------------

def imports_of_data_from_tracer(tree: ast.AST) -> list[str]:
    """``from shapetrace.engine.tracer import Event`` (or ``TensorInfo``), doctests included: the plain
    data is imported from :mod:`shapetrace.engine.events`, which never reaches back to the recorder."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "shapetrace.engine.tracer":
            found += [a.name for a in node.names if a.name in ("Event", "TensorInfo")]
    return found


def _doctest_trees(text: str) -> list[ast.AST]:
    lines = [line.strip()[4:] for line in text.splitlines() if line.strip().startswith(">>> from ")]
    return [ast.parse(line) for line in lines]


def test_no_module_imports_event_or_tensor_info_from_the_tracer():
    """Every file of the package, tests and benchmarks. Only a text holding the name ``tracer`` can hold an
    import from ``shapetrace.engine.tracer`` (a name is one token: no spacing or line break splits it), so
    only those are parsed: 59 of 668 files (alone, -n 0: 2.98 -> 0.49 s)."""
    root = PACKAGE.parent
    offenders = []
    for path in [*PACKAGE.rglob("*.py"), *(root / "tests").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        if "tracer" not in text:
            continue
        for tree in (ast.parse(text), *_doctest_trees(text)):
            offenders += [f"{path.relative_to(root)}: {name}" for name in imports_of_data_from_tracer(tree)]
    assert offenders == []
    import shapetrace.engine.tracer as tracer

    assert "Event" not in tracer.__all__ and "TensorInfo" not in tracer.__all__


def test_the_tracer_import_scanner_finds_a_planted_import():
    planted = ast.parse("if TYPE_CHECKING:\n    from shapetrace.engine.tracer import Event, Trace, TensorInfo\n")
    assert imports_of_data_from_tracer(planted) == ["Event", "TensorInfo"]
    assert [imports_of_data_from_tracer(t) for t in _doctest_trees(
        '"""\n>>> from shapetrace.engine.tracer import TensorInfo\n"""')] == [["TensorInfo"]]


# -- (e) sizes the issue sets (issue 33): no file in engine/ over 600 lines, no class over 300 ------------

MAX_FILE_LINES = 600
MAX_CLASS_LINES = 300


def long_files(root: Path) -> list[str]:
    return [f"{p.relative_to(root)}: {n}" for p in sorted(root.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES]


def long_classes(root: Path) -> list[str]:
    found = []
    for p in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                found.append(f"{p.relative_to(root)}: {node.name} {node.end_lineno - node.lineno + 1}")
    return found


def test_no_engine_file_over_600_lines_and_no_class_over_300():
    assert long_files(PACKAGE / "engine") == []
    assert long_classes(PACKAGE / "engine") == []


def test_the_size_scanners_find_a_long_file_and_a_long_class(tmp_path):
    (tmp_path / "big.py").write_text("x = 1\n" * 601)
    (tmp_path / "wide.py").write_text("class Wide:\n" + "    a = 1\n" * 300)
    assert long_files(tmp_path) == ["big.py: 601"]
    assert long_classes(tmp_path) == ["wide.py: Wide 301"]
