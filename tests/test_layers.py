"""The architecture, enforced: layers as folders, every import pointing down, no cycles, Rich in its
layers, ruff clean (with the Rich ban really checked), and no torch where no tensor is needed."""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

PKG = ROOT / "shapetrace"

#: Lowest first. A module may import from its own layer or a lower one, at module level or inside a
#: function. ``top`` is the public API and the entry points (``__init__``, ``__main__``, ``worker``):
#: they compose the layers, so they may import any of them.
#: ``live`` (the live classroom's server and pages) sits above app and render, below cli.
LAYERS = ["errors", "engine", "attention", "exercises", "app", "render", "tui", "live", "cli", "top"]
RICH_LAYERS = {"render", "tui", "cli"}


def layer_of(module: str) -> str:
    """``shapetrace.engine.axes`` -> ``engine``; ``shapetrace`` and its entry points -> ``top``."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__", "worker"):
        return "top"
    return parts[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _parsed(text: str) -> ast.Module:
    """A module's syntax tree, parsed once per text: the readings below each walk every module (ten passes
    over the package, a planted copy's among them), and a parse costs more than the walk. Read only, never
    changed; a planted file is a new text, so it is parsed."""
    return ast.parse(text)


def tree_of(path: Path) -> ast.Module:
    return _parsed(path.read_text(encoding="utf-8"))


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers inside ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(path: Path) -> list[tuple[str, int, bool]]:
    """Every ``shapetrace`` module ``path`` imports: (module, line, only for type checking).

    Module-level and function-level imports alike; ``from shapetrace.x import y`` counts ``x.y``
    when ``y`` is a module, ``x`` otherwise. Relative imports are refused by ruff's isort rules
    being absolute here, and counted all the same.
    """
    tree = tree_of(path)
    typing_only = _type_checking_lines(tree)
    here = module_name(path)
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here.split(".") if path.name == "__init__.py" else here.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            targets = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
        for target in targets:
            if target == "shapetrace" or target.startswith("shapetrace."):
                found.append((target, node.lineno, node.lineno in typing_only))
    return found


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split("."))
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def all_modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def test_every_module_sits_in_a_known_layer():
    strays = [module_name(p) for p in all_modules() if layer_of(module_name(p)) not in LAYERS]
    assert strays == []


def upward_imports() -> list[str]:
    upward = []
    for path in all_modules():
        here = module_name(path)
        for target, line, _ in imports_of(path):
            if target == "shapetrace" and layer_of(here) != "top":
                upward.append(f"{here}:{line} imports the public API (shapetrace)")
            elif LAYERS.index(layer_of(target)) > LAYERS.index(layer_of(here)):
                upward.append(f"{here}:{line} ({layer_of(here)}) imports {target} ({layer_of(target)})")
    return upward


def import_cycles() -> list[str]:
    """Runtime imports only (lazy ones included); ``if TYPE_CHECKING`` imports are annotations."""
    graph = {module_name(p): {t for t, _, typing_only in imports_of(p) if not typing_only and t != "shapetrace"}
             for p in all_modules()}
    cycles: list[str] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt in graph and nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_every_import_points_down():
    assert upward_imports() == []


def test_engine_imports_nothing_of_shapetrace_but_errors_and_itself():
    outside = [f"{module_name(p)}:{line} imports {target}"
               for p in all_modules() if layer_of(module_name(p)) == "engine"
               for target, line, _ in imports_of(p) if layer_of(target) not in ("engine", "errors")]
    assert outside == []


def test_no_import_cycles():
    assert import_cycles() == []


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """Write modules into a copy of the package, which the readings above then read (never into the
    package itself: a check or a test running meanwhile would meet a file that is not in its digests)."""
    copy = tmp_path / "shapetrace"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PKG", copy)

    def plant(rel: str, code: str) -> None:
        (copy / rel).write_text(code)

    return plant


def test_a_lazy_upward_import_is_caught(planted):
    planted("engine/_planted_up.py", "def f():\n    from shapetrace.render.table import OpTable\n    return OpTable\n")
    assert upward_imports() == ["shapetrace.engine._planted_up:2 (engine) imports shapetrace.render.table (render)"]


def test_a_lazy_cycle_is_caught(planted):
    planted("app/_planted_a.py", "def f():\n    from shapetrace.app import _planted_b\n")
    planted("app/_planted_b.py", "from shapetrace.app import _planted_a\n")
    assert import_cycles() == ["shapetrace.app._planted_a -> shapetrace.app._planted_b -> shapetrace.app._planted_a"]



def _wanted(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement needs loaded: ``from a import b`` needs ``a``, and ``a.b`` when b is
    one of shapetrace's modules."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    return [base] + [f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")]


def _module_level_imports(tree: ast.Module) -> set[str]:
    """What a module's own import runs: its imports outside functions (class bodies and top-level if/try
    included), less those only for type checking."""
    typing_only = _type_checking_lines(tree)
    found: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or node.lineno in typing_only:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(_wanted(node))
        else:
            pending.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
    return found


def loaded_by_import() -> dict[str, set[str]]:
    """For every module of the package, the modules importing it loads, read from the source: its
    parents' and its own module-level imports, followed through the package (not into other packages)."""
    direct = {module_name(p): _module_level_imports(tree_of(p)) for p in all_modules()}
    memo: dict[str, set[str]] = {}

    def loads(module: str) -> set[str]:
        if module not in memo:
            memo[module] = set()  # the import graph is acyclic (test_no_import_cycles)
            parts = module.split(".")
            out = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
            for parent in (".".join(parts[:i]) for i in range(1, len(parts))):
                out |= loads(parent)
            for target in direct.get(module, ()):
                out.add(target)
                if target in direct:
                    out |= loads(target)
            memo[module] = out
        return memo[module]

    return {module: loads(module) for module in direct}


def needless_lazy_imports() -> list[str]:
    """Imports inside functions that load nothing the module's own import has not loaded already: they
    could stand at the top (a lazy import is for a module that would slow the module's import, as torch
    slows ``--help``)."""
    loaded = loaded_by_import()
    found = []
    for path in all_modules():
        here = module_name(path)
        for func in ast.walk(tree_of(path)):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and all(
                        any(m == w or m.startswith(w + ".") for m in loaded[here]) for w in _wanted(node)):
                    found.append(f"{here}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_function_imports_what_its_module_already_loads():
    assert needless_lazy_imports() == []


def test_a_needless_lazy_import_is_caught(planted):
    planted("app/_planted_lazy.py", "import json\n\nfrom shapetrace.errors import UsageError\n\n\n"
                                    "def f():\n    import json\n    from shapetrace.errors import RunError\n\n"
                                    "    return json, RunError, UsageError\n\n\n"
                                    "def g():\n    import torch\n\n    return torch\n")
    assert [f for f in needless_lazy_imports() if "_planted" in f] == [
        "shapetrace.app._planted_lazy:7 import json",
        "shapetrace.app._planted_lazy:8 from shapetrace.errors import RunError"]

def test_rich_is_imported_only_in_render_tui_and_cli():
    offenders = []
    for path in all_modules():
        if layer_of(module_name(path)) in RICH_LAYERS:
            continue
        for node in ast.walk(tree_of(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            if any(n == "rich" or n.startswith("rich.") for n in names):
                offenders.append(module_name(path))
    assert offenders == []


def _ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], capture_output=True, text=True, cwd=ROOT,
                          input=stdin, timeout=120)


ruff_missing = pytest.mark.skipif(shutil.which("ruff") is None and
                                  subprocess.run([sys.executable, "-m", "ruff", "--version"],
                                                 capture_output=True).returncode != 0,
                                  reason="ruff is not installed: pip install -e '.[test]' installs it")


@ruff_missing
def test_ruff_is_clean():
    out = _ruff("check", "--output-format", "concise", ".")
    assert out.returncode == 0, out.stdout + out.stderr


@ruff_missing
@pytest.mark.parametrize("where, banned", [
    ("shapetrace/engine/planted.py", True), ("shapetrace/app/planted.py", True),
    ("shapetrace/exercises/planted.py", True), ("shapetrace/attention/planted.py", True),
    ("shapetrace/render/planted.py", False), ("shapetrace/tui/planted.py", False),
    ("shapetrace/cli/planted.py", False),
])
def test_ruff_reports_a_planted_rich_import(where, banned):
    out = _ruff("check", "--output-format", "concise", "--stdin-filename", where, "-",
                stdin="from rich.text import Text\n\nprint(Text)\n")
    assert ("TID251" in out.stdout) is banned, out.stdout


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, cwd=ROOT, check=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return set(out.stdout.split())


#: engine and attention modules a trace's reading runs through (imported whole: none may load Rich)
ENGINE_READERS = ["engine.tracer", "engine.axes", "engine.propagate", "engine.rules.diagnose", "engine.sentences",
                  "engine.meta", "app.devices", "app.script", "engine.failure", "app.session", "attention.config",
                  "engine.summary", "attention.reference", "attention.variants", "engine.findings", "app.compare",
                  "attention.broken", "attention.notes", "engine.rules.masks"]

#: one fresh interpreter, step by step (each step's modules are what it adds to the steps before): what each
#: layer loads, in the order a user meets it (``import shapetrace`` first, the rendering last)
_LOADS = """
import sys
def loaded(*names):
    print(sorted({m.split('.')[0] for m in sys.modules} & set(names)) or '-',
          sorted(m for m in sys.modules if m.startswith(('shapetrace.render', 'shapetrace.tui', 'shapetrace.cli')))
          or '-', sep='|')
import shapetrace
x = object(); assert shapetrace.name(x, 'B T D') is x
loaded('torch', 'rich')
import shapetrace.engine.layout, shapetrace.app.chain, shapetrace.engine.viewfail
loaded('torch', 'rich')
MODULES
loaded('rich')
from shapetrace.app.session import trace_reference
from shapetrace.attention.config import AttentionConfig
t = trace_reference(AttentionConfig()); t.to_json(); t.diagnostics; t.report()
loaded('rich')
import torch
with shapetrace.trace(dims='B=2 T=6 D=512 H=8') as t:
    torch.zeros(2, 6, 512).view(2, 6, 8, 64)
t.diagnostics; t.to_json(); repr(t)
loaded('rich')
import io; from rich.console import Console
t.show(Console(file=io.StringIO()))
print(len(t.events))
"""


def test_each_layer_loads_only_what_it_needs():
    """``import shapetrace`` loads neither torch nor Rich, and ``name`` is a no-op on a non-tensor; the pure
    layout and view-failure maths load neither; the engine and attention modules load no Rich, and neither do a
    reference trace's reading (json, diagnostics, report: no render, tui or cli module either) nor a user's trace
    read as data; only ``show`` renders (Rich then)."""
    imports = "\n".join(f"import shapetrace.{m}" for m in ENGINE_READERS)
    out = subprocess.run([sys.executable, "-c", _LOADS.replace("MODULES", imports)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["-|-", "-|-", "-|-", "-|-", "-|-", "1"]


def test_help_does_not_import_torch():
    mods = _modules_after("from shapetrace.cli.app import app\n"
                          "for args in (['--help'], ['run', '--help'], ['exercise', '--help']):\n"
                          "    try:\n        app(args)\n    except SystemExit:\n        pass\n")
    assert "torch" not in mods


def test_every_command_module_is_one_hop_from_the_app():
    """``cli/app.py`` wires every command: each command function lives in the module named after it."""
    from shapetrace.cli.app import app

    where = {c.name or c.callback.__name__: c.callback.__module__ for c in app.registered_commands}
    assert where == {
        "run": "shapetrace.cli.run", "strides": "shapetrace.cli.strides", "trace": "shapetrace.cli.trace",
        "lessons": "shapetrace.cli.lessons", "lesson": "shapetrace.cli.lessons", "quiz": "shapetrace.cli.lessons",
        "compare": "shapetrace.cli.compare", "live": "shapetrace.cli.live",
    }
    groups = {g.name: g.typer_instance.registered_commands[0].callback.__module__ for g in app.registered_groups}
    assert groups == {"exercise": "shapetrace.cli.exercise"}


#: folders of tests/ that hold no tests of a layer: shared cases, traced scripts, attackers' files, goldens
SHARED_TEST_FOLDERS = {"corpus", "scripts", "hostile", "golden", "styles", "output", "benchmarks", "__pycache__"}
#: tests of the package as a whole, at the top of tests/
WHOLE_PACKAGE_TESTS = {"test_api.py", "test_layers.py", "test_readme.py"}


def test_the_tests_mirror_the_package():
    """A layer's tests live in tests/<layer>/ (tests/engine/ tests shapetrace/engine/, and so on); the
    benchmarks' in tests/benchmarks/; only the whole package's tests stay at the top."""
    tests = ROOT / "tests"
    # (hidden folders are tools' caches: a hypothesis or pytest run started inside tests/ leaves one)
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith(".")} - SHARED_TEST_FOLDERS
    layers = {p.name for p in (ROOT / "shapetrace").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= layers, f"test folders that name no layer: {sorted(folders - layers)}"
    assert {"engine", "attention", "exercises", "app", "render", "tui", "live", "cli"} <= folders
    assert {p.name for p in tests.glob("test_*.py")} == WHOLE_PACKAGE_TESTS
    for folder in folders | {"benchmarks"}:
        assert list((tests / folder).glob("test_*.py")), f"tests/{folder}/ holds no tests"


def _checks_through_a_helper():
    return _starts_the_checker()


def _starts_the_checker():
    from shapetrace.exercises.checker import check_files

    return check_files


def _traces_only():
    return sorted([3, 1])


def test_the_sandbox_marker_reads_helpers_and_command_lines():
    """tests/conftest.py marks a test ``sandbox`` when its source, or a helper of its module it names,
    calls the checker, or runs an ``exercise check|grade|watch|hint`` command line."""
    from conftest import CHECKER_CALLS, CHECKER_COMMANDS, _reads_of

    here = sys.modules[__name__]
    names, _ = _reads_of(_checks_through_a_helper, here, set())
    assert "check_files" in names and names & CHECKER_CALLS
    names, strings = _reads_of(_traces_only, here, set())
    assert not names & CHECKER_CALLS and not ("exercise" in strings and strings & CHECKER_COMMANDS)


# -- the order the suite starts its tests in (tests/scheduling.py) ---------------------------------------

def _xdist_shares(node_ids: list[str], workers: int) -> list[list[str]]:
    """What pytest-xdist's own worksteal scheduler first sends each of ``workers`` workers."""
    from types import SimpleNamespace

    from xdist.scheduler.worksteal import WorkStealingScheduling

    class Node:
        def __init__(self, number):
            self.gateway, self.shutting_down, self.got = SimpleNamespace(id=f"gw{number}"), False, []

        def send_runtest_some(self, indices):
            self.got += [node_ids[i] for i in indices]

    scheduler = WorkStealingScheduling(SimpleNamespace(getvalue={"tx": [f"{workers}*popen"]}.get))
    nodes = [Node(i) for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, node_ids)
    scheduler.schedule()
    return [node.got for node in nodes]


@pytest.mark.parametrize("count, workers", [(10, 2), (11, 2), (10, 3), (4701, 2), (4701, 4)])
def test_the_shares_the_plan_assumes_are_the_ones_xdist_sends(count, workers):
    from scheduling import share_sizes

    ids = [f"t{i}" for i in range(count)]
    assert [len(share) for share in _xdist_shares(ids, workers)] == share_sizes(count, workers)


def test_the_longest_blocks_start_first_on_every_worker():
    """Three long tests collected at the end of the run: each worker's share starts with its long ones,
    longest first, each added to the share with the least seconds so far; the rest keep their order."""
    from scheduling import Block, plan

    ids = [f"tests/a.py::test_{i}" for i in range(8)] + ["tests/b.py::test_x[1]", "tests/b.py::test_x[2]",
                                                       "tests/c.py::test_y", "tests/d.py::test_z"]
    long = (Block(30, ("tests/c.py::test_y",)), Block(50, ("tests/b.py::test_x",)), Block(20, ("tests/d.py",)))
    order = [ids[i] for i in plan(ids, 2, long)]
    shares = _xdist_shares(order, 2)
    assert shares == [
        ["tests/b.py::test_x[1]", "tests/b.py::test_x[2]", "tests/a.py::test_0", "tests/a.py::test_1",
         "tests/a.py::test_2", "tests/a.py::test_3"],
        ["tests/c.py::test_y", "tests/d.py::test_z", "tests/a.py::test_4", "tests/a.py::test_5",
         "tests/a.py::test_6", "tests/a.py::test_7"]]


def test_a_block_of_tests_apart_spreads_its_tests_over_the_workers():
    """Twenty parametrised checks of a few seconds each: one block per test, not one worker for all."""
    from scheduling import Block, plan

    ids = [f"tests/s.py::test_p[{i}]" for i in range(4)] + [f"tests/a.py::test_{i}" for i in range(4)]
    order = [ids[i] for i in plan(ids, 2, (Block(5, ("tests/s.py::test_p",), apart=True),))]
    assert _xdist_shares(order, 2) == [
        ["tests/s.py::test_p[0]", "tests/s.py::test_p[2]", "tests/a.py::test_0", "tests/a.py::test_1"],
        ["tests/s.py::test_p[1]", "tests/s.py::test_p[3]", "tests/a.py::test_2", "tests/a.py::test_3"]]


def test_files_that_read_one_result_start_together_on_one_worker():
    """A block of two files (one ``once_per_run`` result): on two workers the second to ask would wait idle."""
    from scheduling import Block, plan

    ids = ["tests/x.py::test_1", "tests/x.py::test_2", "tests/y.py::test_1", "tests/z.py::test_1",
           "tests/z.py::test_2", "tests/w.py::test_1", "tests/v.py::test_1", "tests/v.py::test_2"]
    order = [ids[i] for i in plan(ids, 2, (Block(40, ("tests/x.py", "tests/z.py")), Block(10, ("tests/w.py",))))]
    assert _xdist_shares(order, 2) == [
        ["tests/x.py::test_1", "tests/x.py::test_2", "tests/z.py::test_1", "tests/z.py::test_2"],
        ["tests/w.py::test_1", "tests/y.py::test_1", "tests/v.py::test_1", "tests/v.py::test_2"]]


def test_auto_starts_one_worker_more_than_the_cores(monkeypatch):
    """``-n auto`` on two cores starts three workers (a waiting test's core is not left idle), within
    pyproject's ``--maxprocesses``; pytest-xdist's own ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides."""
    import os
    import re
    import shlex

    import conftest

    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert conftest.pytest_xdist_auto_num_workers(None) == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert conftest.pytest_xdist_auto_num_workers(None) == 2
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert conftest.pytest_xdist_auto_num_workers(None) is None  # xdist's own reading of it
    addopts = shlex.split(re.search(r'^addopts = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.M)[1])
    assert "-n" in addopts and addopts[addopts.index("-n") + 1] == "auto"
    assert "--maxprocesses=3" in addopts


def test_a_selection_too_small_for_a_block_keeps_the_files_order():
    from scheduling import Block, plan

    ids = ["tests/a.py::test_1", "tests/b.py::test_1", "tests/b.py::test_2", "tests/b.py::test_3"]
    assert plan(ids, 2, (Block(9, ("tests/b.py",)),)) == [0, 1, 2, 3]
    assert plan(ids, 1, (Block(9, ("tests/b.py",)),)) == [1, 2, 3, 0]


def test_every_long_block_names_a_test_that_exists():
    """A renamed or deleted test would leave its block silently matching nothing."""
    from scheduling import LONG

    assert LONG
    for block in LONG:
        for prefix in block.prefixes:
            file, _, rest = prefix.partition("::")
            assert (ROOT / file).is_file(), prefix
            names = {n.name for n in ast.walk(ast.parse((ROOT / file).read_text()))
                     if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            assert all(part.split("[")[0] in names for part in rest.split("::") if part), prefix


def test_the_suites_processes_run_torch_on_one_thread():
    """tests/conftest.py sets OMP_NUM_THREADS before torch loads (unless the run set it): with torch's
    default of one thread per core, two workers on two cores spin against each other."""
    from conftest import THREADS_SET_BEFORE

    if THREADS_SET_BEFORE:
        pytest.skip("OMP_NUM_THREADS was set before the run")
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "1", done.stderr


#: Scripts whose end a zygote's child must report as ``python -c`` does (tests/zygote.py).
ENDINGS = ["print('out'); import sys; print('err', file=sys.stderr)",
           "import sys; sys.exit(3)",
           "import sys; sys.exit('a message')",
           "def f():\n    1 / 0\nf()",
           "raise KeyboardInterrupt",
           "import atexit; atexit.register(print, 'at exit')",
           "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), print('joined'))).start()",
           "import os, sys; print(sys.argv[1:], os.getcwd(), sys.stdin.read(), sorted(globals()))",
           "import os; print('lost', end=''); os._exit(4)"]


def test_a_zygote_child_ends_as_python_c_ends(tmp_path):
    """A zygote's child (tests/zygote.py) returns what ``subprocess.run([python, "-c", ...])`` returns:
    the exit status, stdout and stderr (a traceback without the zygote's own frames), with ``atexit``
    functions run and threads joined, ``sys.argv``, the folder, stdin and a fresh ``__main__``."""
    from zygote import Zygote

    zygote = Zygote(("json",))
    try:
        for code in ENDINGS:
            fresh = subprocess.run([sys.executable, "-c", code, "an arg"], capture_output=True, text=True,
                                   input="typed", cwd=tmp_path, timeout=60)
            forked = zygote.run(code, "an arg", input="typed", cwd=tmp_path, timeout=60)
            assert (forked.returncode, forked.stdout, forked.stderr) == (
                fresh.returncode, fresh.stdout, fresh.stderr), code
        assert zygote.run("import sys; print('json' in sys.modules)").stdout == "True\n"  # preloaded
        with pytest.raises(subprocess.TimeoutExpired):
            zygote.run("import time; time.sleep(30)", timeout=0.5)
        assert zygote.run("print('next')").stdout == "next\n"  # the killed child's status was read
    finally:
        zygote.close()
    assert zygote.proc.returncode == 0


@pytest.mark.parametrize("args, env", [(["run", "--nope"], {}),
                                       (["strides", "2x6x8x64", "transpose(1, 2).view(2, 6, 512)"], {"NO_COLOR": "1"}),
                                       (["lessons"], {"COLUMNS": "60"})])
def test_cli_forked_returns_what_a_fresh_process_returns(args, env, tmp_path):
    """tests/conftest.py's ``cli_forked`` (a child of the suite's zygote) against ``run_cli`` (a fresh
    ``python -m shapetrace``): the same exit status, stdout and stderr, the environment given for the call
    read by the child, and a ``PYTHON*`` variable, which only a starting interpreter reads, refused."""
    from conftest import cli_forked, run_cli

    fresh, forked = run_cli(*args, env=env, cwd=tmp_path), cli_forked(*args, env=env, cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.args == fresh.args
    with pytest.raises(ValueError, match="PYTHON"):
        cli_forked(*args, env={"PYTHONIOENCODING": "ascii"})


# -- the per-test time limit, one thread per worker (tests/watchdog.py) -------------------------------------

def test_the_watchdog_fires_once_for_the_test_past_its_limit_and_never_for_a_finished_one():
    """A finished test is disarmed before its deadline and never fires; the next one, armed with a limit it
    outlives, fires once, with its own item and settings (pytest-timeout's timeout_timer ends the process)."""
    import threading
    import time
    from types import SimpleNamespace

    from watchdog import Watchdog

    fired, done = [], threading.Event()
    dog = Watchdog(lambda item, settings: (fired.append((item, settings.timeout)), done.set()))
    dog.arm("finished", SimpleNamespace(timeout=0.2))
    dog.disarm()
    dog.arm("hung", SimpleNamespace(timeout=0.3))
    assert done.wait(10)
    time.sleep(0.3)   # (the first test's deadline has passed too by now)
    assert fired == [("hung", 0.3)]


def test_the_suite_keeps_the_limit_with_its_own_thread_and_no_timer_per_test(request):
    """The running test is armed on the one watchdog (no ``threading.Timer`` of pytest-timeout's)."""
    import threading

    if not request.config.pluginmanager.hasplugin("timeout"):
        pytest.skip("pytest-timeout is not loaded (-p no:timeout)")
    import watchdog

    assert request.node.cancel_timeout == watchdog._watchdog.disarm
    assert watchdog._watchdog._armed[1] is request.node
    assert not [t for t in threading.enumerate() if t.name.startswith("pytest_timeout ")]
