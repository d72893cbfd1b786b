"""Verdicts that were wrong, pinned to the right wording; none of them gives the fix away."""

from __future__ import annotations

import pytest

from shapetrace.exercises.checker import Job, check_files
from shapetrace.exercises.content import load

CURRICULUM = load()

FILES = {
    ("attention-scores", "k-untransposed"): '''
import math
def attention_scores(q, k):
    d_k = q.shape[-1]
    k_t = k
    return q @ k_t / math.sqrt(d_k)
''',
    ("attention-scores", "k-dot-T"): '''
import math
def attention_scores(q, k):
    d_k = q.shape[-1]
    k_t = k.T
    return q @ k_t / math.sqrt(d_k)
''',
    ("attention-scores", "divides-by-dk"): '''
def attention_scores(q, k):
    d_k = q.shape[-1]
    return q @ k.transpose(-2, -1) / d_k
''',
    ("causal-mask", "triu-diagonal"): '''
import torch
def causal_weights(scores):
    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu()
    masked = scores.masked_fill(future, float("-inf"))
    return torch.softmax(masked, dim=-1)
''',
    ("qkv-heads", "h-before-3"): '''
def split_qkv(qkv, heads):
    B, T, three_D = qkv.shape
    D = three_D // 3
    return qkv.view(B, T, heads, 3, D // heads).permute(3, 0, 2, 1, 4)
''',
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("feedback")
    jobs = []
    for (ex, name), code in FILES.items():
        path = tmp / f"{name}.py"
        path.write_text(code)
        jobs.append(Job(ex, str(path)))
    return dict(zip([name for _, name in FILES], check_files(jobs, CURRICULUM.root, seed=11)))


def _sizes(v) -> dict[str, int]:
    return {k: int(n) for k, n in (p.split("=") for p in v["sizes"].split(", "))}


def test_k_without_transpose_is_not_blamed_on_a_transpose_never_written(verdicts):
    v = verdicts["k-untransposed"]
    s = _sizes(v)
    assert v["verdict"] == "crash" and v["mistake"] is None, v
    assert "transpose(1, 2)" not in v["summary"] and "swapped" not in v["summary"]
    assert v["explanation"][-1] == (f"a @ b needs the last axis of a ({s['d_k']}) to equal the second-to-last of b "
                                    f"({s['T']}), and the leading (batch) axes [{s['B']}, {s['H']}] and "
                                    f"[{s['B']}, {s['H']}] to match or broadcast")
    assert not any("same size" in d["message"] for d in v["diagnostics"]), v["diagnostics"]


def test_k_dot_T_reverses_every_name(verdicts):
    v = verdicts["k-dot-T"]
    s = _sizes(v)
    assert v["verdict"] == "crash" and v["mistake"] is None, v
    names = f"[d_k={s['d_k']}, T_k={s['T']}, H={s['H']}, B={s['B']}]"
    assert any(line.startswith(f"matmul #1 and {names}") for line in v["explanation"]), v["explanation"]


def test_dividing_by_d_k_names_the_factor(verdicts):
    v = verdicts["divides-by-dk"]
    s = _sizes(v)
    assert v["verdict"] == "wrong-values" and v["mistake"] == "scale-by-dk"
    factor = f"{s['d_k'] ** -0.5:.4g}"
    assert v["explanation"][0] == (f"every value of yours is {factor} times the expected one "
                                   f"(1/√d_k, with d_k = {s['d_k']})")
    assert v["summary"].startswith(f"your scores are √d_k times too small (d_k = {s['d_k']} here)")


def test_causal_triu_blames_the_mask_line(verdicts):
    v = verdicts["triu-diagonal"]
    assert v["verdict"] == "wrong-values" and v["mistake"] == "diagonal-masked"
    assert v["line"] == 5 and v["code"] == "future = torch.ones(T, T, dtype=torch.bool).triu()"
    assert v["summary"].startswith("your mask also hides the diagonal: each token cannot attend to itself")
    assert "triu(1)" not in v["summary"]


def test_qkv_distinct_case_has_no_size_equal_to_three(verdicts):
    v = verdicts["h-before-3"]
    s = _sizes(v)
    assert v["verdict"] == "wrong-values" and v["case"] == "distinct"
    assert 3 not in s.values() and len(set(s.values())) == len(s)
    assert v["mistake"] == "h-before-3"


def test_no_verdict_here_prescribes_a_fix(verdicts):
    for v in verdicts.values():
        text = " ".join([v["summary"], *v["explanation"], *(d["message"] for d in v["diagnostics"])])
        for fix in ("transpose(-2, -1)", "triu(1)", "math.sqrt", "reshape(B, T, 3, H, d_k)", "If this is q @ k"):
            assert fix not in text, (fix, v)
