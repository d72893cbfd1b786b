"""Shared test setup: this checkout first on sys.path, a pinned environment, CLI helpers."""

from __future__ import annotations

import ast
import functools
import inspect
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Run in the background (`pytest &`, nohup), this process starts with SIGINT ignored, and every child it
# starts would inherit that: the tests that press Ctrl-C on a child would then wait forever. Python's own
# handler instead: a child's SIGINT is back to its default at exec, as in a terminal. (Tests that mean a
# child to ignore SIGINT, a background job's case, say so in its preexec_fn.)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
for var in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE"):
    os.environ.pop(var, None)
os.environ["COLUMNS"] = "100"
os.environ["SHAPETRACE_TEST"] = "1"
# One intra-op thread in every process the suite starts, torch's own pool left to the tests that ask for
# one: the tensors here are tiny, and two workers with two threads each on two cores wait on each other
# (test_reference_steady's 20 checks of four exercises: 37.6 CPU-s with torch's default, 15.0 with one).
# The package makes the same choice for its own small runs (shapetrace/app/threads.py); a value set
# before the run is kept.
#: Whether the run came with its own OMP_NUM_THREADS (then it is kept).
THREADS_SET_BEFORE = "OMP_NUM_THREADS" in os.environ
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

# The suite runs on the CPU, as CI does (it has no GPU). `--device auto`, the default, picks a GPU where one is
# free, so on a machine with one every default run would move to it: its device line, its heat maps' last digits,
# torch's own error words and the values the engine reads only where reading does not wait on a device would all
# differ from the goldens. So the GPU is hidden from the run and every process it starts, before torch looks for
# it, unless SHAPETRACE_TEST_CUDA=1: then it is shown, for the tests that need one (`pytest -m cuda`).
#: Whether this run shows the suite a GPU (SHAPETRACE_TEST_CUDA=1).
TEST_CUDA = os.environ.get("SHAPETRACE_TEST_CUDA") == "1"
if not TEST_CUDA:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def _bytecode_kept() -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set (as on our build machines), every process the suite starts
    compiled the package from source, and every pytest-xdist worker rewrote and compiled all 330 test
    modules again: the package byte-compiled once, and the run's own rewritten test modules cached by
    pytest, are what an installed wheel and a plain ``pytest`` have. So, where this checkout is writable
    (the ordinary user's run in test_sandbox_layers_round4 reads what root wrote, and writes nothing):
    the first process of the run (never an xdist worker) byte-compiles ``shapetrace/`` into
    ``__pycache__`` (``compileall``, as benchmarks/bench_startup.py does; up to date, it only reads the
    pycs' headers), and each process of the run keeps pytest's rewritten test modules there. Nothing else
    changes: the variable itself is left set, so the processes the tests start write nothing (they read
    the package's bytecode). One worker's collection: 16.3 -> 8.7 CPU-s; tests/cli: 62.5 -> 58.4 CPU-s."""
    if not os.access(ROOT / "tests", os.W_OK) or not os.access(ROOT / "shapetrace", os.W_OK):
        return
    sys.dont_write_bytecode = False
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        import compileall

        compileall.compile_dir(str(ROOT / "shapetrace"), quiet=2)


_bytecode_kept()
GOLDEN = ROOT / "tests" / "golden"
#: Set by .ci/run, which installs tmux and chromium: there, a missing tool fails instead of skipping.
REQUIRE_TOOLS = os.environ.get("SHAPETRACE_REQUIRE_BROWSER") == "1"
OUTPUT = ROOT / "tests" / "output"
#: Screenshots of the pages for a person to look at (tests/output/): taken when SHAPETRACE_SCREENSHOTS=1.
#: No assertion reads them, and each costs Chromium about 0.2 CPU-s (25 a run).
SCREENSHOTS = os.environ.get("SHAPETRACE_SCREENSHOTS") == "1"


def keep_screenshot(page, name: str) -> None:
    """``page`` as a PNG in tests/output/ under ``name``, for a person to look at (:data:`SCREENSHOTS`)."""
    if SCREENSHOTS:
        OUTPUT.mkdir(exist_ok=True)
        page.screenshot(path=str(OUTPUT / name))


def render(renderable, width: int = 100) -> str:
    """Render a Rich renderable to plain text at a fixed width."""
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, legacy_windows=False,
            force_terminal=False).print(renderable)
    return buf.getvalue()


MODEL_DIR = ROOT / "shapetrace" / "attention"


def model_line(code: str, file: str = "reference.py", after: str | None = None) -> int:
    """The number (1-based) of the first line of ``shapetrace/attention/FILE`` whose code, its shape
    comment left out, starts with ``code`` (below the first line that contains ``after``, when given):
    tests find a cited line by its text, so a line added above it does not break them.

    >>> model_line("return x.transpose(1, 2)", after="def split_kv_heads") > model_line("return x.transpose(1, 2)")
    True
    """
    lines = (MODEL_DIR / file).read_text(encoding="utf-8").splitlines()
    start = 0 if after is None else next(i for i, line in enumerate(lines) if after in line)
    for number, line in enumerate(lines[start:], start + 1):
        if line.split("  #")[0].strip().startswith(code):
            return number
    raise AssertionError(f"no line of {file} starts with {code!r}")


#: A cited model line as the table prints it: the code, two spaces, ``reference.py:44``.
_CITATION = re.compile(r"^(?P<lead>\s*)(?P<code>\S.*?)  (?P<file>(?:reference|broken|variants|decode|vision|"
                       r"broken_shapes)\.py):(?P<line>\d+)$", re.M)


def cited_from_source(text: str) -> str:
    """``text`` with each model citation's line number found again in the source by the code beside it."""
    def renumber(m: re.Match) -> str:
        number = model_line(m["code"].rstrip("…").strip(), m["file"])
        return f"{m['lead']}{m['code']}  {m['file']}:{number}"

    return _CITATION.sub(renumber, text)


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/golden/NAME; SHAPETRACE_UPDATE_GOLDEN=1 rewrites it. The line numbers of
    model citations in the golden text are read from the source (:func:`cited_from_source`)."""
    path = GOLDEN / name
    if os.environ.get("SHAPETRACE_UPDATE_GOLDEN") == "1" or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if os.environ.get("SHAPETRACE_UPDATE_GOLDEN") != "1":
            pytest.fail(f"golden file {path} was missing and has been written; check it and re-run")
    expected = cited_from_source(path.read_text())
    assert text == expected, f"{name} differs from golden; re-run with SHAPETRACE_UPDATE_GOLDEN=1 if intended"


def require_tool(tool: str) -> str:
    """The path of ``tool`` (tmux, chromium); skip the test with how to enable it when it is missing.

    With ``SHAPETRACE_REQUIRE_BROWSER=1`` (``.ci/run`` sets it after installing both) a missing tool
    fails the test instead, so CI can never skip these.
    """
    path = shutil.which(tool)
    if path:
        return path
    how = f"{tool} is not installed: apt-get install {tool} to run this test"
    if REQUIRE_TOOLS:
        pytest.fail(f"{how} (SHAPETRACE_REQUIRE_BROWSER=1 says it must run)")
    pytest.skip(f"{how}, or run .ci/run, which installs it (SHAPETRACE_REQUIRE_BROWSER=1 makes this a failure)")


def run_cli(*args: str, input: str | None = None, env: dict | None = None, cwd=None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m shapetrace ARGS`` in a real subprocess, as a user would."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "shapetrace", *args], capture_output=True, text=True,
                          input=input, env=full_env, cwd=cwd, timeout=timeout)


_zygotes: list = []


def shared_zygote():
    """This process's zygote (tests/zygote.py): one interpreter that imported torch alone (with
    ``PYTHONPATH`` and ``COLUMNS`` as :func:`run_cli` starts one), forking a child per call; started on
    first use, stopped when the run ends."""
    if not _zygotes:
        import atexit

        from zygote import Zygote

        _zygotes.append(Zygote(("torch",), env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")))
        atexit.register(_zygotes[0].close)
    return _zygotes[0]


#: ``python -m shapetrace`` as runpy runs it, in a zygote's child.
_AS_MODULE = "import runpy; runpy.run_module('shapetrace', run_name='__main__', alter_sys=True)"


def cli_forked(*args: str, input: str | None = None, env: dict | None = None, cwd=None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m shapetrace ARGS`` as :func:`run_cli` runs it, in a process of its own forked from
    :func:`shared_zygote` (no interpreter start, no torch import per call): the same environment, folder,
    stdin, exit status, stdout and stderr, and the process can end itself (``os._exit``, a fork, a hang
    cut by ``timeout``). For what a process of its own is the point of, but not its start: imports,
    ``PYTHON*`` variables, signals and terminals keep :func:`run_cli`."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    full_env.update(env or {})
    return shared_zygote().run(_AS_MODULE, *args, input=input, env=full_env, cwd=cwd, timeout=timeout,
                              argv0="-m", shown=[sys.executable, "-m", "shapetrace", *args])


#: ``python SCRIPT`` as the interpreter runs it (the script's folder first on ``sys.path``), in a zygote's child.
_AS_SCRIPT = ("import os, runpy, sys; sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0])); "
              "runpy.run_path(sys.argv[0], run_name='__main__')")


def script_forked(script, *args: str, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS`` (a benchmark) in a process of its own forked from :func:`shared_zygote`: its
    ``__main__``, ``sys.argv``, folder, exit status, stdout and stderr, without an interpreter start and a
    torch import per call. For scripts whose output is what the test reads, not their start."""
    script = os.fspath(script)
    return shared_zygote().run(_AS_SCRIPT, *args, cwd=cwd, timeout=timeout, argv0=script,
                              shown=[sys.executable, script, *args])


@pytest.fixture(scope="session")
def torch_zygote():
    """:func:`shared_zygote`, for tests that run scripts in processes of their own."""
    return shared_zygote()


def cli_in_process(*args: str, input: str | None = None, env: dict | None = None, cwd=None,
                   timeout: float | None = None) -> subprocess.CompletedProcess:
    """``shapetrace ARGS`` as :func:`run_cli` runs it, in this process (no interpreter start, no torch
    import per call): the console script's own steps (the argument-length check, the one-line usage
    errors of ``_run_app``), ``env`` and ``cwd`` set for the call, stdout and stderr apart. For what a
    subprocess is not the point of; signals, terminals, hangs and imports keep :func:`run_cli`.
    (``timeout``: accepted as :func:`run_cli` takes it; in this process the suite's guard applies.)"""
    from typer.testing import CliRunner

    from shapetrace.cli.app import _check_argument_lengths, _run_app

    env = {"COLUMNS": "100", **(env or {})}
    runner = CliRunner()
    argv, here = sys.argv, os.getcwd()
    # click names the program from __main__: under `python -m pytest` its package would make the usage
    # line read "python -m pytest.shapetrace"; the console script's __main__ has no package
    main = sys.modules["__main__"]
    package = main.__dict__.get("__package__")
    with runner.isolation(input=input, env=env) as streams:
        sys.argv = ["shapetrace", *args]
        main.__package__ = None
        try:
            if cwd is not None:
                os.chdir(cwd)
            _check_argument_lengths(list(args))
            code = _run_app()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = argv
            main.__package__ = package
            os.chdir(here)
        out, err = (s.getvalue().decode() for s in streams[:2])
    return subprocess.CompletedProcess(["shapetrace", *args], code, out, err)


@pytest.fixture
def cli():
    """Invoke the Typer app in-process: ``cli("run", "--json")`` -> click Result."""
    from typer.testing import CliRunner

    from shapetrace.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input, catch_exceptions=False)

    return invoke


#: fixed so the golden rendering in test_lessons is stable; a real check draws new inputs every time
CURRICULUM_SEED = 7


def _check_the_curriculum(tmp: Path) -> dict[tuple[str, str], dict]:
    from shapetrace.exercises.checker import Job, check_files  # the checker, for the tests that use it
    from shapetrace.exercises.content import load

    curriculum = load()
    jobs, keys = [], []
    for ex in curriculum.exercises:
        jobs += [Job(ex.id, str(ex.starter)), Job(ex.id, str(ex.solution))]
        keys += [(ex.id, "starter"), (ex.id, "solution")]
        for m in ex.mistakes:
            path = tmp / f"{ex.id}__{m.id}.py"
            path.write_text(m.code)
            jobs.append(Job(ex.id, str(path)))
            keys.append((ex.id, m.id))
    return dict(zip(keys, check_files(jobs, curriculum.root, time_limit=20, seed=CURRICULUM_SEED)))


def once_per_run(tmp_path_factory, name: str, make, dump=json.dumps, load=json.loads):
    """``make(folder)`` computed once per run, whatever pytest-xdist worker asks first: with two workers the
    tests of one module can run on both (work stealing), and a module fixture would then pay its setup
    twice. The first worker to ask runs ``make`` in the run's shared temp folder, under a lock, and saves
    ``dump(result)``; the others wait for it and read ``load(saved)`` (pytest-xdist's own recipe for a
    session fixture that runs once). Without workers, ``make`` runs in a fresh temp folder."""
    import fcntl

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return make(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / name
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "result.json"
        if done.exists():
            return load(done.read_text())
        result = make(shared)
        done.write_text(dump(result))
        return result


@pytest.fixture(scope="session")
def curriculum_verdicts(tmp_path_factory):
    """The starter, the solution and every known mistake of every exercise: ``{(exercise id, "starter" |
    "solution" | mistake id): verdict}``. Several files of tests/exercises/ only read these; each check
    starts sandboxed children, so a file checked twice costs time: checked once per run
    (:func:`once_per_run`)."""
    return once_per_run(tmp_path_factory, "curriculum", _check_the_curriculum,
                        dump=lambda verdicts: json.dumps({"\0".join(k): v for k, v in verdicts.items()}),
                        load=lambda text: {tuple(k.split("\0")): v for k, v in json.loads(text).items()})


# -- processes ------------------------------------------------------------------------------------------

def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (its children, theirs, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is running (not gone, not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# -- another user -----------------------------------------------------------------------------------------

#: In a mount namespace of its own (root's), a folder another user may not cross (``/root``, which holds
#: pyenv's interpreter on this machine) becomes an empty tmpfs holding just the child folder needed, bound
#: back; then the command. Nothing outside that namespace changes.
CROSS = """set -e
stash=$(mktemp -d)
mount --bind "$CHILD" "$stash"
mount -t tmpfs -o mode=755,size=1m shapetrace-cross "$BLOCKED"
mkdir -p "$CHILD"
mount --bind "$stash" "$CHILD"
exec "$@"
"""


def may_run(uid: int, path: str) -> bool:
    """Whether user ``uid`` (group ``uid``, no other groups) may run ``path``: asked of the kernel."""
    return subprocess.run(["test", "-x", path], user=uid, group=uid, extra_groups=[]).returncode == 0


def in_reach_of(uid: int, argv: list[str]) -> list[str]:
    """``argv`` (run by root), such that user ``uid`` may run this interpreter from inside it: itself where
    it already may, else in a mount namespace of its own through :data:`CROSS`; skips the test where that
    cannot be done."""
    if may_run(uid, sys.executable):
        return argv
    real = Path(os.path.realpath(sys.executable))
    blocked = next((p for p in reversed(real.parents) if not may_run(uid, str(p))), None)
    if blocked is None or not shutil.which("unshare"):
        pytest.skip(f"user {uid} cannot run {sys.executable}")
    child = blocked / real.relative_to(blocked).parts[0]
    return ["env", f"BLOCKED={blocked}", f"CHILD={child}", "unshare", "-m", "--propagation", "private", "sh",
            "-c", CROSS, "cross", *argv]


def free_uid(start: int = 61000) -> int:
    """A user id with no passwd entry and no process (a test's stand-in for an ordinary user: nothing is
    added to the system, so nothing is left behind)."""
    import grp
    import pwd

    used: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                used.add(os.stat(f"/proc/{entry}").st_uid)
            except OSError:
                pass
    for uid in range(start, start + 1000):
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        try:
            grp.getgrgid(uid)
        except KeyError:
            if uid not in used:
                return uid
    pytest.skip("no free user id")


# -- the sandbox marker --------------------------------------------------------------------------------

#: what starts the checker's sandboxed children: its entry points, and the commands that call them
CHECKER_CALLS = frozenset({"check_job", "check_files", "check_file", "run_child", "grade", "grade_class"})
CHECKER_COMMANDS = frozenset({"check", "grade", "watch", "hint"})


@functools.cache
def _own_reads(func) -> tuple[frozenset[str], frozenset[str]]:
    """Names and strings in ``func``'s own source, parsed once per function: a fixture or a parametrised
    test is asked about for every test that uses it (parsing them again for each of the suite's tests was
    20 CPU-s of each worker's collection)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return frozenset(), frozenset()
    names: set[str] = set()
    strings: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
    return frozenset(names), frozenset(strings)


def _reads_of(func, module, seen: set) -> tuple[set[str], set[str]]:
    """Names and strings ``func`` uses, followed into the functions of its own module it names."""
    names: set[str] = set()
    strings: set[str] = set()
    if func in seen or not inspect.isfunction(func):
        return names, strings
    seen.add(func)
    own_names, own_strings = _own_reads(func)
    names |= own_names
    strings |= own_strings
    for name in own_names:
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper.__module__ == module.__name__:
            more_names, more_strings = _reads_of(helper, module, seen)
            names |= more_names
            strings |= more_strings
    return names, strings


@functools.cache
def _calls_the_checker(func) -> bool:
    """Whether ``func``, or a function of its module it names, calls the checker (once per function)."""
    names, strings = _reads_of(func, sys.modules.get(func.__module__), set())
    return bool(names & CHECKER_CALLS or ("exercise" in strings and strings & CHECKER_COMMANDS))


def _starts_sandboxes(item) -> bool:
    """Whether a test, or a fixture it uses, calls the checker (read from their source)."""
    funcs = [item.function] + [d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs]
    return any(_calls_the_checker(func) for func in funcs)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: :func:`scheduling.auto_workers` of the cores this process may run on (read before
    ``pytest_configure``, so here, not in tests/scheduling.py's plugin); pytest-xdist's own
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides where it is set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from scheduling import auto_workers

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # macOS
    return auto_workers(cores)


def pytest_configure(config):
    import scheduling  # the longest tests first on every worker (tests/scheduling.py)

    config.pluginmanager.register(scheduling, "shapetrace-scheduling")
    if config.pluginmanager.hasplugin("timeout"):
        import watchdog  # pytest-timeout's limit kept by one thread, not a new one per test (tests/watchdog.py)

        config.pluginmanager.register(watchdog, "shapetrace-watchdog")
    _build_the_cli_once()
    _seed_the_devices_there_are()


def _seed_the_devices_there_are() -> None:
    """``torch.manual_seed`` seeds the CPU's generator and queues a seed for each accelerator torch knows that
    has not started (CUDA, XPU, MTIA), each queued with ``traceback.format_stack()`` of the caller
    (torch/cuda/__init__.py ``_lazy_call``): under pytest's deep stacks 0.7 ms a call, measured, and the suite
    calls it 17,140 times (20 CPU-s, 4% of the run). Where the run shows no accelerator (the GPU is hidden
    unless SHAPETRACE_TEST_CUDA=1, above) no queued seed is ever used, so the suite's processes seed the CPU's
    generator alone: the same state torch.manual_seed leaves there. A run shown a device keeps torch's own."""
    import torch

    if TEST_CUDA or torch.cuda.is_available() or torch.xpu.is_available() or torch.mtia.is_available() \
            or torch.backends.mps.is_available():
        return

    def manual_seed(seed) -> torch.Generator:
        return torch.default_generator.manual_seed(int(seed))

    manual_seed.__doc__ = torch.manual_seed.__doc__
    torch.manual_seed = torch.random.manual_seed = manual_seed


def _build_the_cli_once() -> None:
    """Typer builds the click command from the app again on every call (20 ms, measured: the in-process
    runs of tests/cli, tui and app alone asked 483 times, 13 s of CPU); a worker builds shapetrace's
    once and every in-process run (:func:`cli_in_process`, the ``cli`` fixture) reuses it, as a fresh
    process builds it once. Any other Typer app is built as Typer builds it."""
    import typer.main
    import typer.testing

    build, built = typer.main.get_command, {}

    def get_command(typer_app):
        mine = sys.modules.get("shapetrace.cli.app")
        if mine is None or typer_app is not mine.app:
            return build(typer_app)
        if "shapetrace" not in built:
            built["shapetrace"] = build(typer_app)
        return built["shapetrace"]

    typer.main.get_command = typer.testing._get_command = get_command


def pytest_collection_modifyitems(config, items):
    # the marker only selects (``-m "not sandbox"``); reading every test's source for it cost each worker
    # 2 s of its collection, so it is read only where a selection names it
    if "sandbox" in (config.option.markexpr or ""):
        for item in items:
            if hasattr(item, "function") and _starts_sandboxes(item):
                item.add_marker(pytest.mark.sandbox)
    on_gpu = [item for item in items if item.get_closest_marker("cuda")]
    if on_gpu and not _cuda_shown():
        why = ("needs a CUDA GPU: the suite runs on the CPU unless asked (on a machine with one: "
               "SHAPETRACE_TEST_CUDA=1 pytest -m cuda)" if not TEST_CUDA
               else "needs a CUDA GPU (torch.cuda.is_available() is False)")
        for item in on_gpu:
            item.add_marker(pytest.mark.skip(reason=why))


def _cuda_shown() -> bool:
    """Whether this run shows torch a GPU (asked for only where a test needs one: it imports torch)."""
    import torch

    return torch.cuda.is_available()


def playwright_entry(api: str = "sync"):
    """playwright's ``sync_playwright`` (or ``async_playwright`` for ``api="async"``); the test skips, with
    how to install it, where playwright is missing (fails where SHAPETRACE_REQUIRE_BROWSER=1 says it must run)."""
    try:
        module = __import__(f"playwright.{api}_api", fromlist=[f"{api}_playwright"])
    except ImportError:
        how = "playwright is not installed: pip install -e '.[test]' to run this test"
        if REQUIRE_TOOLS:
            pytest.fail(f"{how} (SHAPETRACE_REQUIRE_BROWSER=1 says it must run)")
        pytest.skip(how)
    return getattr(module, f"{api}_playwright")



@pytest.fixture(scope="session")
def chromium_browser():
    """One headless Chromium per worker (the system chromium, never a downloaded browser), started on first
    use: a launch costs about a CPU-second, and four test files launched their own."""
    chromium = require_tool("chromium")
    with playwright_entry("sync")() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def browser(chromium_browser):
    """The worker's Chromium for one test: each ``new_page`` is a context of its own (its own storage,
    viewport and theme), and every context the test opened is closed after it, so no test sees another's
    pages."""
    yield chromium_browser
    for context in chromium_browser.contexts:
        context.close()


def run_async(coro, timeout: float):
    """``asyncio.run(coro)`` bounded by ``timeout`` seconds, on a thread of its own: the worker's Chromium
    (:func:`chromium_browser`) keeps playwright's sync event loop set as running on this thread, where
    ``asyncio.run`` would refuse to start."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="run-async") as pool:
        return pool.submit(asyncio.run, asyncio.wait_for(coro, timeout)).result()
