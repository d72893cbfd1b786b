"""The hostile corpus (tests/hostile/): every learner file gets its asserted verdict in the full sandbox.

Each file's header names its exercise, its verdict (``!pass``: anything but a pass) and a text its verdict
must hold (searched in the summary, explanation, case and mistake). Afterwards nothing it aimed at has
changed: the lessons, the package, the state folder and /tmp hold no file a learner made.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, once_per_run

from shapetrace.exercises.checker import PARALLEL, CheckerError, Job, check_job
from shapetrace.exercises.content import load

CURRICULUM = load()
HERE = ROOT / "tests" / "hostile"
FILES = sorted(HERE.glob("*.py"))
LEAVINGS = ("/tmp/shapetrace-hostile-fifo", "/tmp/shapetrace-hostile-node", "/tmp/shapetrace-hostile.sock",
            "/tmp/shapetrace-hostile.db", "/root/shapetrace-hostile.txt", "/tmp/shapetrace-hostile-exec",
            "/dev/shm/shapetrace-seen")
#: What round 4's files aim at on this machine: the device nodes' mode and times, /proc's mode, the
#: extended attributes of /tmp and /dev/shm.
HOST_MARKS = ("/dev/null", "/dev/full", "/proc", "/tmp", "/dev/shm")


def _host_marks() -> dict[str, tuple]:
    import os

    out = {}
    for path in HOST_MARKS:
        st = os.stat(path)
        try:
            names = tuple(sorted(os.listxattr(path)))
        except OSError:
            names = ()
        # mtime, not ctime: test_sandbox_layers_round4's no-layer controls chmod and touch /dev/null and
        # /dev/full with the values they already have, which moves ctime alone, on another worker meanwhile
        times = (st.st_mtime_ns,) if path.startswith("/dev/") and path != "/dev/shm" else ()
        out[path] = (st.st_mode, st.st_uid, names, times)  # (other helpers write into /tmp meanwhile)
    return out


def header(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines()[:3]:
        key, _, value = line.lstrip("# ").partition(":")
        out[key.strip()] = value.strip()
    return out


def _digest(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _guarded_files() -> dict[str, str]:
    package = Path(__import__("shapetrace").__file__).resolve().parent
    return _digest([*package.rglob("*.py"), *Path(CURRICULUM.root).rglob("*.py")])


def _check(path: Path) -> dict:
    """The verdict; a checker that could not start is this file's failure, not the whole corpus's."""
    want = header(path)
    # 5 s: scan_memory_for_code.py reads every writable mapping of a process with torch loaded (0.5 s on a
    # quiet core), and the corpus runs two checks at a time; 2 s timed it out once on a loaded machine. A
    # file that must end at its deadline gets 2 s: what it proves (the deadline holds) is the same.
    limit = 2 if want["verdict"] == "timeout" else 5
    try:
        return check_job(Job(want["exercise"], str(path)), CURRICULUM.root, time_limit=limit, memory_mb=512)
    except CheckerError as exc:
        return {"verdict": "checker-error", "summary": str(exc), "explanation": []}


def _as_json(value):
    """``value`` as the JSON that carries it from one pytest-xdist worker to the other holds it."""
    return json.loads(json.dumps(value))


def _check_the_corpus(_folder) -> tuple[dict, tuple]:
    before = (_guarded_files(), _host_marks())
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        out = list(pool.map(_check, FILES))
    return _as_json((dict(zip([p.name for p in FILES], out)), before))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """Every file's verdict and what the corpus aims at as it was before: checked once per run, whichever
    worker comes first (``once_per_run``: one sandboxed check per file, never twice)."""
    return once_per_run(tmp_path_factory, "hostile-corpus", _check_the_corpus)


def test_the_corpus_covers_every_class():
    assert len(FILES) >= 45
    assert {header(p)["exercise"] for p in FILES} >= {"split-heads", "test-split-square", "head-dim", "repeat-kv",
                                                      "causal-mask", "heads-to-batch"}


@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_each_file_gets_its_verdict(verdicts, name):
    v, want = verdicts[0][name], header(HERE / name)
    if want["verdict"] == "!pass":
        assert v["verdict"] not in ("pass", "unverified"), v
    else:
        assert v["verdict"] == want["verdict"], v
    text = " ".join([v["summary"], *v.get("explanation", []), v.get("case") or "", v.get("mistake") or ""])
    assert want["expect"] in text, v


#: What must never reach a terminal, table, CSV or JSON from learner code, written out here independently of
#: shapetrace.exercises.untrusted: C0 and C1 controls (tab and newline aside), bidi overrides and isolates,
#: line separators and lone surrogates.
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def test_no_verdict_holds_a_control_character(verdicts):
    """escape_in_*.py put escape sequences in an exception, a type name, stderr and a test's message."""
    dirty = {name: [s for s in _strings(v) if CONTROLS.search(s)] for name, v in verdicts[0].items()}
    assert {name: found for name, found in dirty.items() if found} == {}


def test_nothing_aimed_at_changed_and_nothing_was_left_behind(verdicts):
    assert _guarded_files() == verdicts[1][0]
    assert _as_json(_host_marks()) == verdicts[1][1]
    assert [p for p in LEAVINGS if Path(p).exists()] == []
    left = subprocess.run(["pgrep", "-f", "sleep 31.4159|time.sleep"], capture_output=True, text=True).stdout
    assert left == ""
