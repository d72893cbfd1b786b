"""Findings inside library code, said at the user's call (engine/library.py, engine/rules/library.py;
issue 35): an op the user did not write (torch's own ``view`` inside ``nn.MultiheadAttention``, a ``view``
inside an installed package) gets one finding per library call, worded at the line of the user's code that
called into the library, with the fix at that level; a correct twin stays silent."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.library import inside_library, is_installed

#: op_table.py's spec of F.multi_head_attention_forward: the fix at the user's level
MHA_FIX = ("nn.MultiheadAttention reads query, key and value as [T, B, D] by default and as [B, T, D] when built "
           "with batch_first=True: for [B, T, D] inputs build it with nn.MultiheadAttention(..., "
           "batch_first=True), or pass x.transpose(0, 1).")
DIMS = "B=2 T=6 D=32 H=4"


def loud(t) -> list:
    return [d for d in t.diagnostics if d.severity in ("error", "warning")]


def traced_mha(shape: tuple, batch_first: bool, need_weights: bool, dims: str = DIMS):
    """torch's documented use, ``attn_output, attn_weights = multihead_attn(query, key, value)``
    (pytorch docs, torch.nn.MultiheadAttention), with the input laid out as ``shape``."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(shape[-1], 4, batch_first=batch_first)
    x = torch.randn(*shape)
    with shapetrace.trace(dims=dims) as t:
        mha(x, x, x, need_weights=need_weights)
    return t


# ---------------------------------------------------------------------------
# nn.MultiheadAttention fed [B, T, D] without batch_first=True: the classic batch_first mistake
# (pytorch/pytorch issue #25100 asks for batch_first because this is so easy to get wrong)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(("need_weights", "at", "op"), [(True, 16, "bmm"), (False, 18, "scaled_dot_product_attention")])
def test_batch_first_mistake_is_one_error_at_the_users_call(need_weights, at, op):
    t = traced_mha((2, 6, 32), batch_first=False, need_weights=need_weights)
    found = loud(t)
    assert [(d.severity, d.kind, d.event, d.also) for d in found] == [("error", "attends-over-batch", at, (9,))]
    line = t.events[at].source
    assert line.endswith("test_library.py:" + line.rsplit(":", 1)[1])
    assert found[0].message.startswith(
        f"{op} #{at} runs inside nn.MultiheadAttention, called by your code at {line} "
        f"(mha(x, x, x, need_weights=need_weights)): it {'computes scores' if op == 'bmm' else 'reads q as'} ")
    assert found[0].message.endswith(" Also seen at #9 view.")
    assert found[0].fix == MHA_FIX
    assert "transpose(1, 2)" not in found[0].text   # torch's own view is not the user's to change


def test_batch_first_mistake_at_equal_sizes_is_not_reported():
    """T = H = B = 4: a [4, 4, 16] input is [T, B, D] as well, what ``batch_first=False`` expects, and nothing in
    the code settles which, so the batch-first reading's finding is left out, named in the order note
    (shapetrace/engine/readings.py); main said ``attends-over-batch`` here, a guess from equal sizes."""
    t = traced_mha((4, 4, 16), batch_first=False, need_weights=True, dims="B=4 T=4 D=16 H=4")
    assert loud(t) == []
    (note,) = [d.message for d in t.diagnostics if d.kind == "order-of-equal-sizes"]
    assert note.startswith("Not reported: attends-over-batch at #16 bmm. It is found where the "
                           "input [4, 4, 16] is read [B, T, D], not where it is read [T, B, D]")


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(("shape", "batch_first"), [((6, 2, 32), False), ((2, 6, 32), True)])
def test_the_correct_twins_are_silent(shape, batch_first, need_weights):
    t = traced_mha(shape, batch_first=batch_first, need_weights=need_weights)
    assert loud(t) == []
    assert t.report().verdict.line.startswith("✓ checked all ")


def test_torch_internal_ops_are_marked_and_the_users_are_not():
    t = traced_mha((6, 2, 32), batch_first=False, need_weights=True)
    inside = t.analysis().inside
    assert sorted(inside) == list(range(len(t.events)))   # every row ran inside torch's forward
    assert {i.what for i in inside.values()} == {"nn.MultiheadAttention"}
    assert len({i.call for i in inside.values()}) == 1

    torch.manual_seed(0)
    with shapetrace.trace(dims=DIMS) as own:
        torch.randn(2, 6, 32).view(2, 6, 4, 8).transpose(1, 2)   # (B, H, T, d_k): the user's own ops
    assert own.analysis().inside == {}


# ---------------------------------------------------------------------------
# an installed package's forward (site-packages): nanoGPT's CausalSelfAttention with the split written
# q.view(B, nh, T, hs) and no transpose (the bug FuxiCTR issue #30 reports), called from the user's model
# ---------------------------------------------------------------------------

PACKAGE = '''
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    """karpathy/nanoGPT model.py with separate q, k, v projections (as FuxiCTR's models), the head
    split written {split}."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(n_embd, n_embd) for _ in range(3))
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()                                                 # (B, T, C)
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)           # (B, T, C) each
        hs = C // self.n_head
        k = {k_split}                                                      # (B, nh, T, hs)
        q = {q_split}                                                      # (B, nh, T, hs)
        v = {v_split}                                                      # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / hs ** 0.5)                # (B, nh, T, T)
        att = att.softmax(dim=-1)
        y = att @ v                                                        # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                   # (B, T, C)
        return self.c_proj(y)
'''


def installed(tmp_path, monkeypatch, transposed: bool) -> str:
    """A package ``fakegpt`` under a ``site-packages`` folder on sys.path; its module's name."""
    name = f"fakegpt_{'right' if transposed else 'bug'}"
    folder = tmp_path / "site-packages" / name
    folder.mkdir(parents=True)
    split = "{0}.view(B, T, self.n_head, hs).transpose(1, 2)" if transposed else "{0}.view(B, self.n_head, T, hs)"
    (folder / "__init__.py").write_text(textwrap.dedent(PACKAGE).format(
        split=split.format("x"), k_split=split.format("k"), q_split=split.format("q"), v_split=split.format("v")))
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    return name


class UserModel(nn.Module):
    """The user's own model around the installed block (a GPT-2 style residual)."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.attn = block

    def forward(self, x):
        return x + self.attn(x)                                            # (B, T, C)


def traced_installed(tmp_path, monkeypatch, transposed: bool):
    module = __import__(installed(tmp_path, monkeypatch, transposed))
    try:
        torch.manual_seed(0)
        model = UserModel(module.CausalSelfAttention(32, 4))
        with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
            model(torch.randn(2, 6, 32))
        return t
    finally:
        sys.modules.pop(module.__name__, None)


def test_a_bug_inside_an_installed_package_is_said_at_the_users_function(tmp_path, monkeypatch):
    t = traced_installed(tmp_path, monkeypatch, transposed=False)
    found = loud(t)
    assert len(found) == 1, [d.to_dict() for d in found]
    d = found[0]
    e = t.events[d.event]
    assert "fakegpt_bug" in e.source and e.op == "view"
    assert d.message.startswith(f"view #{d.event} runs inside fakegpt_bug's CausalSelfAttention.forward, called by "
                                "your code at UserModel.forward in test_library.py: it turns [B=2, T=6, D=32] into ")
    assert d.fix == ("The op is inside fakegpt_bug's CausalSelfAttention.forward, not in your code: check that "
                     "your call passes what it expects (the order of its inputs' axes, their shapes, the options "
                     "you build it with). If it does, the bug is in fakegpt_bug itself; there, the fix is: Split "
                     "the features where they are: view(B, T, H, d_k), then transpose(1, 2) to move the heads "
                     "ahead of the tokens.")
    assert (d.kind, d.event, d.also) == ("mixed-axis", 3, (4, 5, 12, 13))


def test_the_installed_packages_correct_twin_is_silent(tmp_path, monkeypatch):
    t = traced_installed(tmp_path, monkeypatch, transposed=True)
    assert loud(t) == []
    assert set(t.analysis().inside) == {e.index for e in t.events if "fakegpt_right" in e.source}


def test_installed_code_that_only_called_the_users_code_is_no_library():
    """Outside any module, installed code on the stack only called the code that made the op: typer runs
    ``shapetrace strides``, whose chain shapetrace itself evaluates (the old tree said "runs inside typer's
    Typer.__call__")."""
    from conftest import cli_in_process

    r = cli_in_process("strides", "2,6,512", "view(2, 6, 8, 64).view(2, 8, 384)", "--heads", "8", "--no-diagrams",
                       env={"NO_COLOR": "1", "COLUMNS": "100"})
    text = " ".join(r.stdout.split())
    assert "error mixed-axis: step 2 (view) turns [B=2, T=6, H=8, d_k=64] into [B=2, !T·H=8, !H·d_k=384]" in text
    assert "runs inside" not in text


def test_is_installed():
    assert is_installed("/venv/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py")
    assert is_installed("/usr/lib/python3/dist-packages/timm/layers/attention.py")
    assert not is_installed("/home/me/site_packages_notes/model.py")


def test_nothing_opened_and_no_installed_site_marks_nothing():
    assert inside_library([], [], {}) == {}
