"""``max_alloc_bytes`` is decided by the kernel on a large input, never by a count inside the child.

The learner's code shares its process with the in-child allocation counter, so a file that patches the
counter (or the facts it reports, or the child's own functions) must still fail when it copies; the
reference and honest answers that copy nothing extra must pass, on every seed.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import once_per_run

from shapetrace.exercises import probe as pr
from shapetrace.exercises.checker import Job, check_files
from shapetrace.exercises.content import load

CURRICULUM = load()

REPEAT = "def repeat_kv(kv, n_rep):\n    B, H, T, d = kv.shape\n"
FORGE_COUNTER = '''
import sys
import shapetrace.exercises.calls as calls
import shapetrace.exercises.facts as facts


class Silent(calls.AllocCounter):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


calls.AllocCounter = Silent
_facts = facts.learner_facts


def quiet(*a, **k):
    f = _facts(*a, **k)
    f.update(alloc_bytes=0, allocs=[], copies=[])
    return f


facts.learner_facts = quiet
main = sys.modules["shapetrace.worker"]  # the child's own module (loaded from memory in the sandbox)
main.learner_facts = quiet
'''
FORGE_CHILD = '''
import resource
import sys

main = sys.modules["shapetrace.worker"]
main._run_probe = lambda *a, **k: None          # skip the large input
real_send = main.Channel.send
main.Channel.send = lambda self, header, *a, **k: None if header.get("kind") == "probe" else \\
    real_send(self, header, *a, **k)
try:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass
'''
FILES = {
    ("repeat-kv", "reference"): CURRICULUM.exercise("repeat-kv").solution.read_text(),
    ("repeat-kv", "repeat-interleave"): "def repeat_kv(kv, n_rep):\n"
                                        "    return kv.repeat_interleave(n_rep, dim=1)  # (B, H, T, d_k)\n",
    ("repeat-kv", "stack-views"): "import torch\n" + REPEAT +
                                  "    return torch.stack([kv[:, h // n_rep] for h in range(H * n_rep)], 1)\n",
    ("repeat-kv", "clone-first"): REPEAT + "    kv = kv.clone()\n"
                                  "    return kv[:, :, None].expand(B, H, n_rep, T, d).reshape(B, H * n_rep, T, d)\n",
    ("repeat-kv", "contiguous-then-copy"): REPEAT + "    out = kv[:, :, None].expand(B, H, n_rep, T, d).contiguous()\n"
                                           "    return out.reshape(B, H * n_rep, T, d).clone()\n",
    ("repeat-kv", "forge-counter"): FORGE_COUNTER + "\n\n" + REPEAT + "    kv = kv.clone()\n"
                                    "    return kv[:, :, None].expand(B, H, n_rep, T, d).reshape(B, H * n_rep, T, d)\n",
    ("repeat-kv", "forge-child"): FORGE_COUNTER + FORGE_CHILD + "\n\n" + REPEAT +
                                  "    return kv.clone().repeat_interleave(n_rep, dim=1).clone()\n",
    ("repeat-kv", "wrong-when-large"): REPEAT + "    if kv.numel() > 1_000_000:\n"
                                       "        return kv.repeat(1, n_rep, 1, 1)\n"
                                       "    return kv.repeat_interleave(n_rep, dim=1)\n",
    ("heads-for-kernel", "reference"): CURRICULUM.exercise("heads-for-kernel").solution.read_text(),
    ("heads-for-kernel", "copy-twice"): "def heads_for_kernel(x, heads):\n    B, T, D = x.shape\n"
                                        "    q = x.view(B, T, heads, D // heads).transpose(1, 2).contiguous()\n"
                                        "    return q.clone()  # (B, H, T, d_k)\n",
    ("heads-for-kernel", "forge-counter"): FORGE_COUNTER + "\n\ndef heads_for_kernel(x, heads):\n"
                                           "    B, T, D = x.shape\n    x = x.clone()\n"
                                           "    return x.view(B, T, heads, D // heads).transpose(1, 2).contiguous()\n",
}


def _check_every_file(tmp) -> dict[tuple[str, str], dict]:
    jobs = []
    for (exercise, name), code in FILES.items():
        path = tmp / f"{exercise}-{name}.py"
        path.write_text(code)
        jobs.append(Job(exercise, str(path)))
    return dict(zip(FILES, check_files(jobs, CURRICULUM.root, time_limit=5)))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """Checked once per run, whichever pytest-xdist worker comes first (``once_per_run``; the keys are
    ``(exercise, name)``, joined by a NUL in its JSON)."""
    return once_per_run(tmp_path_factory, "memory-probe", _check_every_file,
                        dump=lambda found: json.dumps({"\0".join(k): v for k, v in found.items()}),
                        load=lambda text: {tuple(k.split("\0")): v for k, v in json.loads(text).items()})


REPEAT_SIZES = "B=1, H_kv=2, n_rep=2, T=1024, d_k=2048"


@pytest.mark.parametrize("name", ["reference", "repeat-interleave", "stack-views"])
def test_answers_that_copy_nothing_extra_pass(verdicts, name):
    v = verdicts["repeat-kv", name]
    assert v["verdict"] == "pass", v
    assert v["summary"] == ("repeat-kv: correct on all 7 random input cases (distinct, equal, odd, large, strided "
                            "sizes), and fits in its output on a large input")


@pytest.mark.parametrize("name", ["clone-first", "contiguous-then-copy", "forge-counter", "forge-child"])
def test_copying_answers_fail_on_the_large_input(verdicts, name):
    v = verdicts["repeat-kv", name]
    assert v["verdict"] == "layout", v
    assert (v["case"], v["sizes"]) == ("large", REPEAT_SIZES)
    assert v["summary"] == (f"your function needs more memory than its output: given a large input "
                            f"({REPEAT_SIZES}) it ran out of memory, so it makes at least one extra copy")
    assert v["explanation"][0] == (
        "the input holds 16.0 MiB and the output 32.0 MiB; this exercise allows 32.0 MiB (out_bytes), and the "
        "checker gave your function 8.0 MiB more for Python itself: an extra copy of the input or of the "
        "output does not fit")


def test_the_traced_copies_explain_but_a_forged_count_changes_nothing(verdicts):
    honest, forged = verdicts["repeat-kv", "clone-first"], verdicts["repeat-kv", "forge-counter"]
    assert "what your function allocated on a small input (traced):" in honest["explanation"]
    assert any("`kv = kv.clone()` clone copied" in line for line in honest["explanation"])
    assert forged["explanation"] == honest["explanation"][:1]  # the forged facts only removed the story
    assert forged["verdict"] == honest["verdict"] == "layout"


def test_an_answer_wrong_only_on_the_large_input_fails(verdicts):
    v = verdicts["repeat-kv", "wrong-when-large"]
    assert v["verdict"] == "wrong-values" and v["case"] == "large", v
    assert v["summary"].startswith(f"with a large input ({REPEAT_SIZES}) your output differs from the "
                                   "expected one: out[0, 1, 0, 0] is ")


def test_heads_for_kernel_reference_passes_and_copies_fail(verdicts):
    assert verdicts["heads-for-kernel", "reference"]["verdict"] == "pass"
    for name in ("copy-twice", "forge-counter"):
        v = verdicts["heads-for-kernel", name]
        assert v["verdict"] == "layout" and v["case"] == "large", v
        assert v["summary"].startswith("your function needs more memory than its output: given a large input "
                                       "(B=1, T=1024, H=8, d_k=512) it ran out of memory")


@pytest.mark.parametrize("exercise", ["repeat-kv", "heads-for-kernel"])
def test_the_reference_passes_on_every_seed_and_the_smallest_memory(exercise):
    sol = str(CURRICULUM.exercise(exercise).solution)
    jobs = [Job(exercise, sol)] * 4
    out = check_files(jobs, CURRICULUM.root, time_limit=5, memory_mb=256)
    assert [v["verdict"] for v in out] == ["pass"] * 4, out


def test_the_probe_is_twice_the_slack_and_its_output_comes_back_exactly():
    for kind in pr.SIZES:
        inputs = pr.probe_inputs(kind, 7)
        first = inputs.args[0]
        assert first.numel() * first.element_size() >= 2 * pr.SLACK_BYTES
        again = pr.probe_inputs(kind, 7).args[0]
        assert torch.equal(first, again)
    out = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).transpose(1, 2)  # not contiguous
    chunks = []
    r, w = __import__("os").pipe()
    send, _ = pr.sender(w)
    send(3, out, {"shape": [2, 4, 3], "dtype": "float32"})
    __import__("os").close(w)
    while data := __import__("os").read(r, 1 << 16):
        chunks.append(data)
    from shapetrace.exercises.frames import Decoder

    (frame,) = list(Decoder().feed(b"".join(chunks)))
    assert frame.header == {"kind": "probe", "case": 3, "shape": [2, 4, 3], "dtype": "float32", "raw": True}
    assert torch.equal(pr.received(frame.header, frame.body), out)
    assert pr.received(dict(frame.header, shape=[2, 4, 4]), frame.body) is None
    assert pr.received(dict(frame.header, dtype="object"), frame.body) is None
    assert pr.received(dict(frame.header, raw=False), frame.body) is None


def test_every_budgeted_exercise_has_a_probe_whose_plan_matches_its_reference():
    from shapetrace.exercises.calls import load_function

    budgeted = [e for e in CURRICULUM.exercises if e.checks.get("max_alloc_bytes")]
    assert {e.id for e in budgeted} == {"repeat-kv", "heads-for-kernel"}
    for ex in budgeted:
        planned = pr.plan(ex)
        probe = pr.prepare(ex, load_function(str(ex.solution), ex.function), seed=3)
        assert list(probe.expected.shape) == planned["shape"] and probe.allow == planned["allow_bytes"]
        assert planned["allow_bytes"] == planned["out_bytes"] and planned["in_bytes"] >= 2 * pr.SLACK_BYTES


def test_a_budget_without_a_large_input_is_a_content_error(tmp_path):
    from shapetrace.exercises.content import ContentError, load_exercise

    folder = tmp_path / "scores-copy"
    folder.mkdir()
    for name in ("starter.py", "solution.py"):
        (folder / name).write_text("def f(s):\n    return s\n")
    (folder / "exercise.toml").write_text(
        'id = "scores-copy"\ntitle = "T"\nfunction = "f"\ntask = "x"\ninputs = "scores"\n'
        'output_names = "B H T T_k"\nstarter_verdict = "layout"\nhints = ["a?"]\n'
        '[checks]\nmax_alloc_bytes = "out_bytes"\n')
    with pytest.raises(ContentError, match="max_alloc_bytes needs a large input for inputs 'scores'"):
        load_exercise(folder, 1)


@pytest.mark.parametrize("shape", [[3], [7, 1, 1, 1, 1]])
def test_a_probe_output_of_another_shape_is_the_learners_verdict_never_a_broadcast(shape):
    """A raw probe frame is the child's word: a forged one of shape [3] raised RuntimeError in the parent (an
    internal error; tests/hostile/forge_probe_shape.py), and one that broadcasts ([7, 1, 1, 1, 1] against
    [B, H, T, d_k]) made the parent compare 7 times the expected output. The shape is compared first."""
    import random

    from shapetrace.exercises import inputs as inp
    from shapetrace.exercises.calls import load_function
    from shapetrace.exercises.judge import Judge, Learned

    ex = CURRICULUM.exercise("repeat-kv")
    judge = Judge(ex, "learner.py", inp.draw(ex.inputs, random.Random(0)))
    judge.probe = pr.prepare(ex, load_function(str(ex.solution), ex.function), seed=3)
    want = list(judge.probe.expected.shape)
    v = judge.large(Learned(value=torch.zeros(shape)), Learned())
    assert (v.verdict, v.summary) == ("wrong-values", f"with a large input ({judge.probe.inputs.describe()}) your "
                                      f"function returned a float32 tensor of shape {shape}; expected a float32 "
                                      f"tensor of shape {want}")
