"""A ninth round of files in the styles of public code (tests/corpus/public9, each citing its source), traced
at distinct sizes, at B = T = H = 4 and at B = 1, as a held-out set traces them (issue 33).

On 10552a7 every correct run here was ``?``, for want of names: Falcon's fused projection of width
``D + 2·d_k`` (Falcon-7B's multi-query) or ``(H + 2·H_kv)·d_k`` (Falcon-40B's groups) left every axis from
the fused view on unnamed (``? checked 0 of 20 ops``), and the grouped file's tiled key heads were ``?``.
The mechanism, one for the family: a fused width of whole heads factors as (its heads) × d_k, and its heads
axis is itself a sum, H query heads, then the key heads, then the value heads (``H+2``, ``H+2*H_kv``), or,
per group, ``(H_kv, n_rep+2)`` (:func:`shapetrace.engine.axes._fused_head_decompositions`); an index that
takes the parts' bounds (``[..., :-2, :]``) takes those parts (``H``); the one key head grown by ``expand``
to the query heads it serves is those heads (:mod:`shapetrace.engine.infer.backward`). Without ``H_kv`` the
width ``D + 2·d_k`` is the multi-query reading only where no other width has that size and a use reads H
heads of d_k from it (:mod:`shapetrace.engine.infer.widths`).

Gemma-2's head width set apart from D / H (``head_dim`` 16 at D = 32, H = 4, H_kv = 2) was ``?`` with
``d_k=16`` given: its key and value projections are H_kv·head_dim = 32 wide, which is D too, so neither name
was given and nothing from them on was checked (``? checked 8 of 25 ops``). A use decides now
(:func:`shapetrace.engine.infer.widths.widths_by_use`): a width cut into H_kv heads of d_k that attention reads
is D_kv; the merged heads projected back (``o_proj``, from ``H*d_k``) are D. Without ``d_k`` in ``--dims`` the
head width is D / H = 8, which the code's split into heads of 16 disproves: the verdict stays ``?`` and says
the sizes given disagree with the code, and the note asks for ``d_k=16`` (no name is guessed from the view's
literal 16: it may be any width).

``EXPECTED`` pins what the engine says now, including what is still ``?`` (equal sizes: B = T, where the
input ``[4, 4, D]`` fits two orders, so the names rest on sizes alone)."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace import NOT_ASKED
from tests.corpus.helpers import findings, round_outcome, round_sizes
from tests.corpus.helpers import module_name as name
from tests.corpus.helpers import traced_build as traced
from tests.corpus.helpers import verdict_line as line
from tests.corpus.public9 import falcon_grouped, falcon_mqa, gemma2

#: what a Python trace's verdict adds where nobody asked for the dependency contracts
UNASKED = f"; not measured: {NOT_ASKED}"

MODULES = (falcon_mqa, falcon_grouped, gemma2)


def _sizes(module) -> list[str]:
    """Distinct sizes, B = T = H = 4, and the distinct sizes at a batch of one."""
    return [*round_sizes(module), re.sub(r"\bB=\d+", "B=1", module.DIMS[0])]


# -- Falcon's fused projection: H query heads, then one key head, then one value head --------------------

@pytest.mark.parametrize(("dims", "heads"), [("B=2 T=6 D=64 H=4", "H+2"), ("B=1 T=6 D=64 H=4", "H+2"),
                                             ("B=2 T=6 D=64 H=4 H_kv=1", "H+2*H_kv"),
                                             ("B=3 T=5 D=48 H=6", "H+2")])
def test_falcon_multi_query_split_names_its_heads(dims, heads):
    t = traced(falcon_mqa, "", dims)
    by_op = [(e.op, e.output.dims) for e in t.events if e.outputs]
    fused = "D+2*D_kv" if "H_kv" in dims else "D+2*d_k"
    assert by_op[:3] == [("linear", ("B", "T", fused)), ("view", ("B", "T", heads, "d_k")),
                         ("__getitem__", ("B", "T", "H", "d_k"))]
    assert findings(t) == ()
    assert line(t) == ("✓ checked all 23 ops that could carry a layout bug: every axis keeps its meaning "
                       "from input to output" + UNASKED)


def test_falcon_grouped_split_names_groups_and_slots():
    t = traced(falcon_grouped, "", "B=2 T=5 D=32 H=4 H_kv=2")
    dims = [e.output.dims for e in t.events if e.outputs]
    assert dims[:3] == [("B", "T", "D+2*D_kv"), ("B", "T", "H_kv", "n_rep+2", "d_k"),
                        ("B", "T", "H_kv", "n_rep", "d_k")]
    assert dims[7] == ("B", "T", "H", "d_k")   # flatten(2, 3) of (H_kv, n_rep): the query heads, group-major
    assert line(t).startswith("✓ checked all")


def test_the_values_picked_from_the_key_slot_are_found_at_the_second_pick():
    """Names and shapes agree when the values are picked from the key head's slot (``[..., [-2], :]`` twice):
    only the picks' entries tell (:mod:`shapetrace.engine.rules.fused_parts`). On 10552a7 this file had no
    names at all (``?``); with the fused heads named it would be ``✓`` but for the picks' rule."""
    t = traced(falcon_mqa, "kv-same-slot", "B=2 T=6 D=64 H=4")
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert (d.kind, d.event) == ("fused-part-taken-twice", 4)
    assert d.message == (
        "__getitem__ #4 takes the key part of the fused [B=2, T=6, H+2=6, d_k=16] (axis 2, H+2), which "
        "__getitem__ #3 took already, and no pick takes its value part: the two tensors share elements, "
        "and the value part of the projection is computed and never read.")
    assert d.fix == "Take each part once: its value part for the values."


def test_a_key_picked_from_a_query_head_slot_is_found():
    """The key head picked ``[..., [0], :]``, the first query head's slot (a layout with the key/value heads
    first, read as Falcon's): the queries and the key share elements and the key slot is never read."""
    torch.manual_seed(0)
    fused = torch.randn(2, 6, 6, 16)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 H=4 d_k=16") as t:
        shapetrace.name(fused, "B T H+2 d_k")
        q, k, v = fused[..., :-2, :], fused[..., [0], :], fused[..., [-1], :]    # bug: k is query head 0
        torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert d.message == (
        "__getitem__ #1 takes entry 0 (of the query part) of the fused [B=2, T=6, H+2=6, d_k=16] (axis 2, "
        "H+2), which __getitem__ #0 took already, and no pick takes its key part: the two tensors share "
        "elements, and the key part of the projection is computed and never read.")


def test_picks_that_take_each_part_once_in_another_order_say_nothing():
    """The twin: keys from the last slot and values from the one before (a checkpoint's convention, not a
    layout bug: each part is read once) stays silent."""
    torch.manual_seed(0)
    fused = torch.randn(2, 6, 6, 16)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 H=4 d_k=16") as t:
        shapetrace.name(fused, "B T H+2 d_k")
        q, k, v = fused[..., :-2, :], fused[..., [-1], :], fused[..., [-2], :]   # (B, T, H, d), (B, T, 1, d) x2
        torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    assert [e.inputs[0].dims for e in t.events if e.op == "__getitem__"] == [("B", "T", "H+2", "d_k")] * 3
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []


class _BigCodeSliced(nn.Module):
    """transformers models/gpt_bigcode ``GPTBigCodeAttention`` (multi-query): ``c_attn`` cut into the queries
    and ``key_value`` (``split((embed_dim, 2 * kv_dim), dim=2)``), then the key and value head written as
    slices of ``key_value`` (its ``split((head_dim, head_dim), dim=-1)``); ``bug``: the values sliced
    ``[..., :head_dim]`` as the keys are (a copy-paste slip)."""

    def __init__(self, d: int = 32, h: int = 4, bug: bool = False):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.c_attn, self.c_proj = nn.Linear(d, d + 2 * self.hd), nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        query, key_value = self.c_attn(x).split((D, 2 * self.hd), dim=2)    # (B, T, D), (B, T, 2·d_k)
        key = key_value[..., :self.hd]                                      # (B, T, d_k)
        value = key_value[..., :self.hd] if self.bug else key_value[..., self.hd:]   # (B, T, d_k)
        q = query.view(B, T, self.h, self.hd).transpose(1, 2)               # (B, H, T, d_k)
        k, v = key.unsqueeze(1), value.unsqueeze(1)                         # (B, 1, T, d_k)
        y = torch.nn.functional.scaled_dot_product_attention(
            q, k.expand(-1, self.h, -1, -1), v.expand(-1, self.h, -1, -1), is_causal=True)  # (B, H, T, d_k)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, D))              # (B, T, D)


@pytest.mark.parametrize("bug", [False, True])
def test_gpt_bigcode_key_value_half_sliced_twice_is_found(bug):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        _BigCodeSliced(bug=bug)(torch.randn(2, 6, 32))
    picks = [e for e in t.events if e.op == "__getitem__"]
    assert [e.inputs[0].dims for e in picks] == [("B", "T", "d_k+d_k")] * 2
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == (["fused-part-taken-twice"] if bug else [])
    assert line(t).startswith("✗ 1 error" if bug else "✓ checked all")


class _WideMLP(nn.Module):
    """An MLP whose hidden width happens to be D + 2·d_k (96 at D = 64, H = 4): nothing reads it as heads."""

    def __init__(self, d: int = 64, hidden: int = 96):
        super().__init__()
        self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))   # (B, T, D)


def test_a_width_of_h_plus_two_heads_that_nothing_reads_as_heads_is_not_named():
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        _WideMLP()(torch.randn(2, 6, 64))
    assert [e.output.dims for e in t.events if e.op == "linear"] == [("B", "T", None), ("B", "T", None)]


def test_the_one_key_head_grown_to_the_query_heads_is_the_heads_and_nothing_else_is():
    """``k.expand(-1, H, -1, -1)`` of the one key head (Falcon-7B through SDPA) lines up with the query heads:
    each query head reads it, so the grown axis is H; an axis of H entries a gather made is left unnamed."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 6, 4, 16).transpose(1, 2), torch.randn(2, 1, 6, 16)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 H=4 d_k=16") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B 1 T d_k")
        grown = k.expand(-1, 4, -1, -1)                                      # (B, H, T, d_k)
        torch.nn.functional.scaled_dot_product_attention(q, grown, grown, is_causal=True)
        picked = q[:, torch.tensor([3, 2, 1, 0])]                            # (B, ?, T, d_k): a gather
        torch.nn.functional.scaled_dot_product_attention(q, picked, picked, is_causal=True)
    assert [e.output.dims for e in t.events if e.op == "expand"] == [("B", "H", "T", "d_k")]
    assert [e.output.dims[1] for e in t.events if e.op == "__getitem__"] != ["H"]


# -- Gemma-2: a head width set apart from D / H -----------------------------------------------------------

GEMMA = "B={b} T={t} D=32 H=4 H_kv=2 d_k=16"


@pytest.mark.parametrize(("b", "t_"), [(2, 6), (4, 4), (1, 6)])
def test_gemma2_key_value_width_equal_to_d_is_named_by_its_use(b, t_):
    t = traced(gemma2, "", GEMMA.format(b=b, t=t_))
    assert [e.output.dims for e in t.events if e.op == "linear"] == [
        ("B", "T", "H*d_k"), ("B", "T", "D_kv"), ("B", "T", "D_kv"), ("B", "T", "D")]
    assert [e.output.dims for e in t.events if e.op == "view"] == [
        ("B", "T", "H", "d_k"), ("B", "T", "H_kv", "d_k"), ("B", "T", "H_kv", "d_k")]


@pytest.mark.parametrize("spelling", ["d_k=16", "head_dim=16"])
def test_gemma2_head_width_declared_either_spelling_is_checked_whole(spelling):
    t = traced(gemma2, "", f"B=2 T=6 D=32 H=4 H_kv=2 {spelling}")
    # (26 before lib13: the prefill's whole ``attention_mask[:, :, :, : key_states.shape[-2]]`` is not counted)
    assert line(t) == ("✓ checked all 25 ops that could carry a layout bug: every axis keeps its meaning "
                       "from input to output" + UNASKED)


def test_gemma2_without_its_head_width_reads_it_from_its_split():
    """d_k left out: 6e2d55a derived D / H = 8, said "--dims d_k=8, but view #6 splits D=32 into H_kv=2 heads
    of 16: did you mean d_k=16?" and left q_proj's width unnamed (``?``). The split into heads of 16, which
    q·k contracts, proves d_k = 16 (shapetrace.engine.head_width): checked whole, as with d_k given."""
    t = traced(gemma2, "", "B=2 T=6 D=32 H=4 H_kv=2")
    assert [d.message for d in t.diagnostics] == []
    assert t.head_width == 16
    assert line(t) == ("✓ checked all 25 ops that could carry a layout bug: every axis keeps its meaning "
                       "from input to output" + UNASKED)
    assert [e.output.dims for e in t.events if e.op == "linear"][0] == ("B", "T", "H*d_k")


class _SameWidthGate(nn.Module):
    """A projection from D to D that nothing cuts (a gate, GLU-style) beside Gemma's sizes: D, not D_kv."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(32, 32)

    def forward(self, x):
        return x * torch.sigmoid(self.gate(x))   # (B, T, D)


def test_a_width_of_d_that_nothing_cuts_into_heads_is_d():
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4 H_kv=2 d_k=16") as t:
        _SameWidthGate()(torch.randn(2, 6, 32))
    assert [e.output.dims for e in t.events if e.op == "linear"] == [("B", "T", "D")]


# -- every file of the round, at distinct sizes, B = T = H = 4 and a batch of one -------------------------

#: (module, bug) -> for each size of ``_sizes(module)``: the verdict's first letter and the kinds of its
#: errors and warnings. At B = T = H = 4 the correct files stay ``?`` (names from sizes alone: the input
#: ``[4, 4, D]`` fits [B, T, D] and [T, B, D]); the bugs are still found there, by the reading that names them.
EXPECTED = {
    (falcon_mqa, ""): [("✓", ()), ("?", ()), ("✓", ())],
    # (at B = T = H = 4 the queries read [B, T, H, d_k]: the causal mask [T, T] lines up T with H there, the bug's
    # finding; the product [B, T, H, T] @ [B, 1, T, d_k] sums over the whole keys axis with its batch axes lined
    # up, so each query does mix the keys: its attends-over-wrong-axis, "each token only sees its own heads", was
    # false of that product and is gone since r46's rules/diagnose _sums_over_tokens)
    (falcon_mqa, "q-no-transpose"): [("✗", ("mixed-axis",)),
                                     ("✗", ("broadcast-mismatch",)),
                                     ("✗", ("mixed-axis",))],
    (falcon_mqa, "merge-no-permute"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)),
                                       ("✗", ("mixed-axis",))],
    (falcon_mqa, "kv-same-slot"): [("✗", ("fused-part-taken-twice",))] * 3,
    (falcon_grouped, ""): [("✓", ()), ("?", ()), ("✓", ())],
    (falcon_grouped, "kv-tiled"): [("✗", ("gqa-head-order",))] * 3,
    (falcon_grouped, "merge-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)),
                                             ("✗", ("mixed-axis",))],
    (falcon_grouped, "kv-same-slot"): [("✗", ("fused-part-taken-twice",))] * 3,
    # the copies named n_rep (an expand beside H_kv) outside the groups: tiled, as repeat tiles them
    (falcon_grouped, "kv-copies-outside"): [("✗", ("gqa-head-order",))] * 3,
    (gemma2, ""): [("✓", ()), ("?", ()), ("✓", ())],
    (gemma2, "merge-as-hidden"): [("✗", ("tokens-merged-with-features",))] * 3,
    (gemma2, "merge-transposes-features"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)),
                                            ("✗", ("mixed-axis",))],
    (gemma2, "repeat-kv-tiled"): [("✗", ("gqa-head-order",))] * 3,
}

CASES = [pytest.param(m, bug, dims, want, id=f"{name(m)}-{bug or 'correct'}-{dims.replace(' ', ',')}")
         for (m, bug), wants in EXPECTED.items() for dims, want in zip(_sizes(m), wants, strict=True)]


def test_every_bug_and_every_correct_file_of_the_round_is_listed():
    assert {(m, bug) for m, bug in EXPECTED} == {(m, bug) for m in MODULES for bug in ("", *m.BUGS, *m.TWINS)}


@pytest.mark.parametrize(("module", "bug", "dims", "want"), CASES)
def test_each_file_gets_its_verdict(module, bug, dims, want):
    assert round_outcome(module, bug, dims) == want
