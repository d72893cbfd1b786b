"""A module that declares itself causal, and the attention it runs (shapetrace/engine/declared.py and its rule,
shapetrace/engine/rules/declared.py): huggingface/transformers issue #48745, RoFormer configured as a decoder
(``is_decoder=True``) given the padding-only mask. The tests of the finding fail on d4dc24b (main before this
change: no ``shapetrace.engine.declared``, the flag never read, the bug ``✓``): 5 of 12 there; the guards (a
correct decoder, flags that declare nothing, a decode step, a cross-attention) pass there and must stay so."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.heads import HEADS

DIMS = "B=2 T=5 D=8 H=2"


class Attention(nn.Module):
    """A self-attention (or, given ``memory``, a cross-attention) whose causal flag and mask are chosen apart."""

    def __init__(self, flag: str = "is_decoder", value=True, causal: bool = False):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.causal_applied = causal
        setattr(self, flag, value)

    def forward(self, x, memory=None):
        B, T, _ = x.shape
        src = x if memory is None else memory
        S = src.shape[1]
        q = self.q(x).view(B, T, 2, 4).transpose(1, 2)                          # (B, H, T, d_k)
        k = self.k(src).view(B, S, 2, 4).transpose(1, 2)                        # (B, H, S, d_k)
        v = self.v(src).view(B, S, 2, 4).transpose(1, 2)                        # (B, H, S, d_k)
        scores = q @ k.transpose(-2, -1) / 2.0                                  # (B, H, T, S)
        if self.causal_applied:
            hidden = torch.ones(T, S, dtype=torch.bool).tril().logical_not()    # (T, S)
            scores = scores.masked_fill(hidden, float("-inf"))
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, 8)       # (B, T, D)


def _traced(model, T=5, memory=None, dependencies=False):
    torch.manual_seed(0)
    x = torch.randn(2, T, 8)
    dims = DIMS if T == 5 else DIMS.replace("T=5", f"T={T}")
    with torch.no_grad(), shapetrace.trace(dims=f"{dims} S=3" if memory is not None else dims,
                                           dependencies=dependencies) as t:
        shapetrace.name(x, "B T D")
        if memory is not None:
            shapetrace.name(memory, "B S D")
        model(x) if memory is None else model(x, memory)
    return t


def _with_config(**flags) -> Attention:
    model = Attention(flag="unused", value=False)
    model.config = SimpleNamespace(hidden_size=8, **flags)
    return model


def test_a_decoder_without_a_causal_mask_is_a_note_that_keeps_the_check_mark_off():
    """The RoFormer bug in small: ``is_decoder = True`` and no mask at all (an encoder's ops): ``?`` with the note,
    its reason in the verdict line. Fails on d4dc24b (``✓``, no finding)."""
    t = _traced(Attention())
    assert [(d.kind, d.severity, d.event) for d in t.diagnostics] == [("causal-declared-unmasked", "note", 11)]
    assert t.diagnostics[0].message.startswith(
        "a module declares itself causal (is_decoder=True) and its attention over 5 queries applies no causal mask: "
        "softmax #11 [B=2, H=2, T=5, T=5] weighs keys of the queries' own sequence")
    line = t.report().verdict.line
    assert line.startswith("?") and "not proven: a module declares itself causal and its attention over several " \
        "queries applies no causal mask" in line


def test_the_values_make_it_an_error_where_a_later_token_reaches_an_earlier_one():
    """With the dependency contracts measured, the flag asks for the causal contract, and it breaks: ``✗``. Fails on
    d4dc24b (``✓``: the causal contract was never asked for)."""
    report = _traced(Attention(), dependencies=True).report()
    kinds = [(d.kind, d.severity) for d in report.diagnostics]
    assert kinds == [("causal-mask-leaks", "error"), ("causal-declared-unmasked", "note")]
    assert report.diagnostics[0].message.startswith(
        "measured on the values: output token 0 of batch 0 depends on input token 4, a later token, though the code "
        "declares a causal mask (a module declares itself causal: is_decoder=True)")
    assert report.verdict.mark == "✗" and report.contracts == [BATCH, OWN_TOKEN, HEADS]


@pytest.mark.parametrize("dependencies", [False, True])
def test_a_decoder_that_applies_its_causal_mask_stays_checked(dependencies):
    """The correct twin: the same flag with a causal ``tril`` mask: no note, ``✓`` (and the contract holds). A
    guard: passes on d4dc24b too."""
    report = _traced(Attention(causal=True), dependencies=dependencies).report()
    assert report.diagnostics == [] and report.verdict.mark == "✓"
    assert report.contracts == ([BATCH, OWN_TOKEN, CAUSAL, HEADS] if dependencies else [])


@pytest.mark.parametrize(("flag", "value"), [("is_decoder", False), ("is_causal", 1), ("bidirectional", True),
                                             ("causal_mask", torch.ones(5, 5))])
def test_only_a_true_bool_under_a_causal_name_declares_anything(flag, value):
    """``False``, a truthy int, another name or a tensor called ``causal_mask`` (a buffer: a mask, not a flag)
    declare nothing: ``✓`` as before (a guard: passes on d4dc24b too)."""
    t = _traced(Attention(flag=flag, value=value))
    assert t.diagnostics == [] and t.report().verdict.mark == "✓"


@pytest.mark.parametrize("flag", ["is_causal", "is_decoder"])
def test_a_flag_in_the_modules_settings_object_declares_it_too(flag):
    """``self.config.is_decoder`` (transformers' RoFormer, BERT, T5 read theirs there), one level in; its path
    is in the message. Fails on d4dc24b (``✓``)."""
    t = _traced(_with_config(**{flag: True}))
    assert [d.kind for d in t.diagnostics] == ["causal-declared-unmasked"]
    assert t.diagnostics[0].message.startswith(f"a module declares itself causal (config.{flag}=True) and its "
                                               "attention over 5 queries")


def test_a_decode_step_and_a_cross_attention_need_no_causal_mask():
    """One query (T = 1: a decode step sees every cached key), and keys of another sequence (``S``, a decoder's
    cross-attention over the encoder's output, which T5 runs with ``is_decoder = True`` too): no note, ``✓``. A
    guard: passes on d4dc24b too."""
    step = _traced(Attention(), T=1)
    cross = _traced(Attention(), memory=torch.randn(2, 3, 8))
    assert (step.diagnostics, cross.diagnostics) == ([], [])
    assert (step.report().verdict.mark, cross.report().verdict.mark) == ("✓", "✓")


def test_a_contract_measured_to_hold_takes_the_note_away():
    """:func:`~shapetrace.engine.declared.held_causal`: the note goes where the causal contract held (the module
    runs causally by a mask the run did not read as one), and only the note. Fails on d4dc24b (no such module)."""
    from shapetrace.engine.declared import held_causal

    note = Diagnostic("note", "causal-declared-unmasked", 3, "m")
    other = Diagnostic("note", "window-width-unchecked", 4, "w")
    assert held_causal([note, other], True) == [other]
    assert held_causal([note, other], False) == [note, other]
