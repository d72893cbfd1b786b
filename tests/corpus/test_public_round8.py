"""An eighth round of files in the styles of public code (tests/corpus/public8, each citing its source),
traced at distinct sizes, at B = T = H = 4 (or the module's own equal reading, ``EQUAL``) and at B = 1, as a
held-out set traces them (issue 33).

First sight on 44cf251 (30 correct runs: 9 files and one twin at three sizes; 66 buggy runs that do not
raise): correct 2 ``✓``, 21 ``?``, 7 false errors (Nystromformer at every size: its depthwise skip conv over
the tokens named ``[B, ?, T, Wp]``, so the sum with the context paired ``Wp`` with ``d_k``; NAT's
unfold-based neighbourhood attention at every size: ``attends-over-wrong-axis`` on the ``[B, N, heads, 1,
k·k]`` scores; the flash-attention varlen path at distinct sizes: ``scan-over-wrong-axis`` on
``cu_seqlens``); buggy 0 ``✓``, 38 ``✗`` (15 with a false finding beside or instead of the real one: the
same three classes), 28 ``?``, 1 ``!``. Now: correct 2 ``✓``, 28 ``?``, no false error; buggy 0 ``✓``, 37
``✗`` (none for a false reason), 29 ``?``, 1 ``!`` (NAT's kernel-major channels and the varlen path's
sequence-major pad-back were ``✗`` only for the false findings; Performer's heads left beside the features
went ``?`` → ``✗``). Each run here is traced after the same file ran untraced (:func:`round_outcome`), so
einops' shape cache is warm, as it is not in a fresh ``shapetrace trace``: traced cold, that Performer bug
also gets a true ``mixed-axis`` at ``repeat(..., 'j d -> b h j d', h=h)``. The classes fixed this round,
each failing on 44cf251:

* a conv's output axes: a depthwise filter with one output per channel keeps its input's channels
  (``Conv2d(H, H, (k, 1), groups=H)`` over ``[B, H, T, d_k]`` keeps ``H``), a kernel one wide along a named
  axis keeps it (``d_k``), and a named axis of another role than the tokens that a kernel runs along is no
  patch grid (it was named ``Wp``, a name nothing declared);
* a running sum along the batch of token counts (an integer mask summed over the tokens) is the packing
  offsets of ``cu_seqlens``, not one sequence's values carried into the next;
* a product that batches over the tokens proves "each token only sees its own heads" only when its
  matrices' axes are named: NAT's neighbour axis, gathered by ``F.unfold``, has no name and may be tokens;
* a size read from an axis names an axis only in the trace that read it: einops' shape cache handed a
  later trace an earlier trace's reads (a false ``mixed-axis`` on a correct Performer traced after its
  buggy twin at B = T = H = 4);
* an ``einsum`` with an ellipsis names its axes (the ``...`` spelled out from the operands' ranks), and an
  ``einsum`` that sums over the heads of per-head values whose features it keeps mixes the heads:
  Performer with its heads left beside the features (``'b n (h d) -> b n h d'``) was ``?``, now
  ``reduction-over-wrong-axis`` at the keys' sum ``'...nd,...ne->...de'``.

``EXPECTED`` pins what the engine says now, including what is still ``?`` (each listed below it).
"""

from __future__ import annotations

import re

import pytest
import torch

import shapetrace
from tests.corpus.helpers import findings, round_outcome, round_sizes
from tests.corpus.helpers import module_name as name
from tests.corpus.helpers import traced_build as traced
from tests.corpus.helpers import verdict_line as line
from tests.corpus.public8 import (
    bert_relative,
    cohere,
    detr,
    flash_varlen,
    mvit,
    nat_unfold,
    nystromformer,
    performer,
    qwen2_vl,
)

MODULES = (cohere, qwen2_vl, bert_relative, nystromformer, performer, flash_varlen, detr, mvit, nat_unfold)


def _sizes(module) -> list[str]:
    """Distinct sizes, equal sizes, and the distinct sizes at a batch of one."""
    return [*round_sizes(module), re.sub(r"\bB=\d+", "B=1", module.DIMS[0])]


def _outcome(module, bug: str, dims: str):
    try:
        return round_outcome(module, bug, dims)
    except IndexError:   # the varlen path's unpadding indices out of range: the bug raises at these sizes
        return "raises", ()


# -- Nystromformer: a depthwise conv over the tokens, added to the context --------------------------------

@pytest.mark.parametrize("dims", ["B=2 T=12 D=32 H=4", "B=4 T=4 D=32 H=4", "B=1 T=12 D=32 H=4"])
def test_nystromformer_skip_conv_keeps_the_heads_and_features(dims):
    """huggingface/transformers' ``NystromformerSelfAttention``: ``context_layer += self.conv(value_layer)``
    with ``Conv2d(H, H, (k, 1), groups=H)``. 44cf251 named the conv's output ``[B, ?, T, Wp]`` (a grid nothing
    declared) and called the sum a ``broadcast-mismatch`` of ``Wp`` with ``d_k``."""
    t = traced(nystromformer, "", dims)
    conv = next(e for e in t.events if e.op == "conv2d")
    assert conv.outputs[0].dims == ("B", "H", "T", "d_k")
    assert findings(t) == ()
    # (? at every size until c8b1c74; now ? only where B = T = H leave names to sizes: see EXPECTED)
    assert line(t).startswith("? " if dims == "B=4 T=4 D=32 H=4" else "✓ ")


def test_a_conv_names_only_what_its_filter_keeps():
    """The mechanism alone: a depthwise ``(k, 1)`` filter keeps channels ``H`` and the one-wide ``d_k``; a
    ``(1, k)`` filter runs along ``d_k`` (no name, not ``Wp``); a 2-to-4 channel conv over a declared grid
    still makes ``Hp``, ``Wp`` channels of no name."""
    torch.manual_seed(0)
    depthwise = torch.nn.Conv2d(4, 4, (3, 1), padding=(1, 0), groups=4)
    along_features = torch.nn.Conv2d(4, 4, (1, 3), padding=(0, 1), groups=4)
    stem = torch.nn.Conv2d(2, 4, 3, padding=1)
    v, image = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 3, 5)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=6 d_k=8 Hp=3 Wp=5") as t:
        shapetrace.name(v, "B H T d_k")
        depthwise(v)
        along_features(v)
        stem(image)
    assert [e.outputs[0].dims for e in t.events if e.op == "conv2d"] == [
        ("B", "H", "T", "d_k"), ("B", "H", "T", None), ("B", None, "Hp", "Wp")]


def test_nystromformer_global_inverse_start_mixes_the_batch():
    """mlpen/Nystromformer's ``"original"`` start ``1 / torch.max(torch.sum(K, dim=-2))``: one maximum over
    every batch entry and head scales each entry's pseudo-inverse; the per-entry start (HF's default) is
    silent (test above). It is also transformers' own default (``init_option = "original"`` unless the config
    says otherwise), so since lib15 a note that leaves ``?``, not an error: a max over the keys too is one scale
    shared, not one set of weights, and whether it is meant cannot be told from the trace."""
    t = traced(nystromformer, "inverse-init-global-max", "B=2 T=12 D=32 H=4")
    assert [d for d in t.diagnostics if d.severity in ("error", "warning")] == []
    (d,) = [d for d in t.diagnostics if d.kind == "reduction-over-wrong-axis"]
    assert d.severity == "note"
    assert d.message.startswith("max #25 runs along axis 0 (B, the batch entries) of the attention scores")
    assert "share one scale of their weights (it runs over the keys too)" in d.message
    assert line(t).startswith("? ")


# -- flash-attention's varlen path: offsets of packed sequences ----------------------------------------

@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4", "B=1 T=6 D=32 H=4"])
def test_varlen_cu_seqlens_is_no_scan_over_the_batch(dims):
    """transformers' ``_get_unpad_data``: ``F.pad(torch.cumsum(attention_mask.sum(dim=-1), dim=0), (1,
    0))``. 44cf251: ``scan-over-wrong-axis`` ("each of its 2 batch entries accumulates the ones before it")."""
    t = traced(flash_varlen, "", dims)
    assert findings(t) == ()


def test_a_running_sum_of_token_counts_is_an_offset_and_of_values_is_not():
    """The mechanism alone: ``cumsum(0)`` of an integer mask summed over the tokens (lengths) is silent;
    of the same mask itself (Bloom's positions taken down the batch) and of float features summed over the
    tokens it is still ``scan-over-wrong-axis``."""
    mask, x = torch.ones(2, 6, dtype=torch.long), torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        shapetrace.name(mask, "B T")
        shapetrace.name(x, "B T D")
        torch.cumsum(mask.sum(dim=-1), dim=0)                              # (B,): where each entry starts
        mask.cumsum(0)                                                      # (B, T): positions down the batch
        x.sum(dim=1).cumsum(0)                                             # (B, D): features carried on
    assert [(d.kind, t.events[d.event].code.split("#")[0].strip()) for d in t.diagnostics] == [
        ("scan-over-wrong-axis", "mask.cumsum(0)"), ("scan-over-wrong-axis", "x.sum(dim=1).cumsum(0)")]


# -- NAT: neighbours gathered by F.unfold --------------------------------------------------------------

@pytest.mark.parametrize("dims", ["B=2 Hp=5 Wp=6 D=32 H=4", "B=4 Hp=4 Wp=4 D=32 H=4", "B=1 Hp=5 Wp=6 D=32 H=4"])
def test_neighbourhood_attention_batched_over_tokens_is_no_false_error(dims):
    """SHI-Labs' ``LegacyNeighborhoodAttention``: ``q @ k.transpose(-2, -1)`` of ``[B, N, heads, 1, d]`` by
    each token's ``k·k`` neighbours. 44cf251: ``attends-over-wrong-axis`` ("each token only sees its own
    heads")."""
    t = traced(nat_unfold, "", dims)
    assert findings(t) == ()


def test_tokens_as_a_batch_axis_is_an_error_only_when_the_matrices_are_named():
    """The mechanism alone: scores ``[B, T, H, H]`` (no transpose after the view) are still
    ``attends-over-wrong-axis``; scores ``[B, T, H, 1, 9]`` against nine unnamed neighbours are not (44cf251
    counted them as the same finding seen again)."""
    q = torch.randn(2, 6, 4, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 H=4 d_k=8") as t:
        shapetrace.name(q, "B T H d_k")
        k = q.unsqueeze(-2).expand(-1, -1, -1, 9, -1)                      # (B, T, H, 9, d_k)
        q @ q.transpose(-2, -1)                                            # (B, T, H, H): bug
        q.unsqueeze(-2) @ k.transpose(-2, -1)                              # (B, T, H, 1, 9): neighbours
    assert [(d.kind, t.events[d.event].code.split("#")[0].strip()) for d in t.diagnostics if d.severity == "error"] \
        == [("attends-over-wrong-axis", "q @ q.transpose(-2, -1)")]
    assert "Also seen" not in t.diagnostics[0].message


# -- Performer: linear attention written with einsum ellipses ---------------------------------------------

def test_an_einsum_ellipsis_is_named_from_the_operands():
    """lucidrains' ``einsum('...nd,...ne->...de', k, v)``: 44cf251 left every axis of an einsum with ``...``
    unnamed; the ellipsis now stands for the operands' leading axes."""
    k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=6 d_k=8") as t:
        shapetrace.name(k, "B H T d_k")
        shapetrace.name(v, "B H T d_k")
        context = torch.einsum("...nd,...ne->...de", k, v)                # (B, H, d_k, d_k)
        torch.einsum("...de,...nd->...ne", context, k)                     # (B, H, T, d_k)
    assert [e.outputs[0].dims for e in t.events if e.op == "einsum"] == [
        ("B", "H", "d_k", "d_k"), ("B", "H", "T", "d_k")]
    assert findings(t) == ()


@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4", "B=1 T=6 D=32 H=4"])
def test_performer_heads_left_beside_the_features_sum_over_the_heads(dims):
    """lucidrains/performer-pytorch with ``rearrange(t, 'b n (h d) -> b n h d')``: the keys' sum
    ``einsum('...nd,...ne->...de', k, v)`` runs over the heads. 44cf251: ``? checked 10 of 26 ops``."""
    t = traced(performer, "heads-not-moved", dims)
    (d,) = [d for d in t.diagnostics if d.kind == "reduction-over-wrong-axis"]
    assert d.message.startswith("einsum #22 runs along axis 2 (H, the heads) of the per-head values [B=")


def test_an_einsum_summing_heads_with_their_features_is_an_output_projection():
    """The mechanism alone: ``'bhnd,hdD->bnD'`` (a per-head output projection: heads and head features summed
    together) is silent; ``'bhnd,bhne->bde'`` (heads summed, features kept) is the finding."""
    y, w = torch.randn(2, 4, 6, 8), torch.randn(4, 8, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=6 d_k=8 D=32") as t:
        shapetrace.name(y, "B H T d_k")
        torch.einsum("bhnd,hdD->bnD", y, w)                                # (B, T, D)
        torch.einsum("bhnd,bhne->bde", y, y)                               # bug: (B, d_k, d_k)
    assert [(d.kind, t.events[d.event].code.split("#")[0].strip()) for d in t.diagnostics if d.severity == "error"] \
        == [("reduction-over-wrong-axis", 'torch.einsum("bhnd,bhne->bde", y, y)')]


# -- a size read in one trace, handed to the next by a library's cache ----------------------------------

def test_a_size_read_in_another_trace_names_nothing():
    """einops keeps the shapes it built in an ``lru_cache`` keyed by the ints' values, so a later trace can
    get back the int object an earlier trace read from an axis, with that trace's node and axis: 44cf251 named
    an ``arange`` of it after the axis of that node and number in the new trace (here ``B``), and a correct
    Performer at B = T = H = 4 traced after its buggy twin got a false ``mixed-axis``."""
    x, y, kept = torch.randn(2, 6, 8), torch.randn(6, 6, 8), {}
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as first:
        shapetrace.name(x, "B T D")
        kept["n"] = x.size(1)                                              # T, read in the first trace
        torch.arange(kept["n"]).unsqueeze(0)                               # (1, T)
    with torch.no_grad(), shapetrace.trace(dims="B=6 T=6 D=8") as second:
        shapetrace.name(y, "T B D")
        torch.arange(kept["n"]).unsqueeze(0)                               # (1, 6): read elsewhere, not B
        torch.arange(y.size(0)).unsqueeze(0)                               # (1, T)
    assert [e.inputs[0].dims for e in first.events if e.op == "unsqueeze"] == [("T",)]
    assert [e.inputs[0].dims for e in second.events if e.op == "unsqueeze"] == [(None,), ("T",)]


@pytest.mark.parametrize("dims", ["B=4 T=4 D=32 H=4"])
def test_performer_traced_after_its_buggy_twin_is_no_false_error(dims):
    """The order the einops cache saw it in: the buggy twin traced first, then the correct causal file."""
    traced(performer, "heads-not-moved", dims)
    assert findings(traced(performer, "causal", dims)) == ()


# -- every file of the round, at distinct sizes, equal sizes and a batch of one -------------------------

#: (module, bug) -> for each size of ``_sizes(module)``: the verdict's first letter and the kinds of its
#: errors and warnings ("raises": the bug raises at those sizes). Still ``?``, pinned as they are:
#: * correct files: names lost where no declaration settles them: Performer's random features (an einsum
#:   with ``...`` and an unnamed feature axis), BERT's distance embedding (a lookup by position differences),
#:   the varlen path's packed ``B*T[indices]`` after ``cu_seqlens`` slices, DETR's opaque
#:   ``nn.MultiheadAttention`` internals, MViT's pooled grid and joined class token, NAT's ``F.unfold``
#:   channels; equal sizes (names found from sizes alone); Cohere and Qwen2-VL at distinct sizes, whose
#:   ``H_kv = B = 2`` is two equal declared sizes (the /tmp/ea mistral note, left to engine-gaps2);
#: * bugs: BERT's key term indexed by the query's position (both token axes are ``T`` in self-attention:
#:   no name tells the query's tokens from the key's), its padding on the queries at B = 1 (nothing padded)
#:   and ``positions-from-batch`` at B = 1 (only a warning: a table constant along the keys); Cohere's
#:   per-head norm after the transpose at T = H (its weight ``[H, d]`` against ``[T, d]``: ``H`` and ``T``
#:   are one size and the weight's axes have no name); Performer's causal prefix sum over the random
#:   features (the feature maps' axes have no name); the varlen
#:   path's lengths summed over the batch and its rows padded back sequence-major (the packed axis after
#:   the ``cu_seqlens`` slices and ``index_put`` has no name); DETR's mask flattened column-major and the
#:   image's padding given to the queries (masks enter ``nn.MultiheadAttention`` unnamed); MViT's pooled
#:   channels read as tokens and its shortcut grid transposed (the strided conv's grid has no name); NAT's
#:   im2col channels read kernel-major (``F.unfold``'s channels have no name).
EXPECTED = {
    (cohere, ""): [("✓", ()), ("?", ()), ("✓", ())],   # (B = H_kv = 2 decides no name)
    (cohere, "halves-table"): [("✗", ("rotary-pairing-mismatch",))] * 3,
    (cohere, "qk-norm-after-transpose"): [("raises", ()), ("?", ()), ("raises", ())],
    (cohere, "repeat-kv-tiled"): [("✗", ("gqa-head-order",) * 2)] * 3,
    (qwen2_vl, ""): [("✓", ()), ("?", ()), ("✓", ())],
    (qwen2_vl, "rotate-every-two"): [("✗", ("rotary-pairing-mismatch",))] * 3,
    (qwen2_vl, "merge-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)),
                                       ("✗", ("mixed-axis",))],
    (bert_relative, ""): [("?", ())] * 3,
    (bert_relative, "key-term-query-index"): [("?", ())] * 3,
    (bert_relative, "positions-from-batch"): [("raises", ()), ("✗", ("broadcast-mismatch",)),
                                              ("!", ("bias-constant-along-keys",))],
    (bert_relative, "mask-on-queries"): [("✗", ("mask-wrong-axis",)), ("✗", ("mask-wrong-axis",)), ("?", ())],
    # (? ? ? until c8b1c74: the Moore-Penrose start's kernel_2.transpose(-1, -2) moves the landmark kernel's two
    # T/6 axes past each other; they carry the roles query and key (its scores' product), so it is checked)
    (nystromformer, ""): [("✓", ()), ("?", ()), ("✓", ())],
    (nystromformer, "landmarks-before-transpose"): [
        ("✗", ("mixed-axis",)),
        ("✗", ("reduction-over-wrong-axis", "batch-mismatch", "attends-over-wrong-axis", "batch-mismatch",
               "attends-over-wrong-axis")),
        ("✗", ("mixed-axis",))],
    (nystromformer, "kernel1-softmax-queries"): [("✗", ("softmax-wrong-axis",))] * 3,
    # (✗ until lib15: transformers' own NystromformerSelfAttention runs this start by default, init_option
    # "original"; one scale over the batch, a note that leaves ?)
    (nystromformer, "inverse-init-global-max"): [("?", ())] * 3,
    (performer, ""): [("?", ())] * 3,
    (performer, "causal"): [("?", ())] * 3,
    (performer, "heads-not-moved"): [("✗", ("reduction-over-wrong-axis",))] * 3,
    (performer, "causal-cumsum-features"): [("?", ())] * 3,
    (flash_varlen, ""): [("?", ())] * 3,
    (flash_varlen, "no-transpose-before-flash"): [("raises", ()), ("✗", ("tokens-merged-with-features",)),
                                                  ("raises", ())],
    (flash_varlen, "seqlens-over-batch"): [("?", ())] * 3,
    (flash_varlen, "pad-back-seq-major"): [("?", ())] * 3,
    (detr, ""): [("?", ())] * 3,
    (detr, "src-view-no-permute"): [("✗", ("mixed-axis",)),
                                    # (a third broadcast-mismatch since 07aacdd: tgt = zeros_like(query_embed)
                                    # carries the queries' [N, B, D], which the decoder's output meets)
                                    ("✗", ("mixed-axis", "broadcast-mismatch", "broadcast-mismatch",
                                           "broadcast-mismatch")),
                                    ("✗", ("mixed-axis",))],
    (detr, "mask-not-flattened-right"): [("?", ())] * 3,
    (detr, "memory-mask-as-queries"): [("?", ())] * 3,
    (mvit, ""): [("?", ())] * 3,
    (mvit, "pre-pool-no-permute"): [("✗", ("mixed-axis",))] * 3,
    (mvit, "post-pool-no-transpose"): [("?", ())] * 3,
    (mvit, "shortcut-grid-transposed"): [("?", ())] * 3,
    (nat_unfold, ""): [("?", ())] * 3,
    (nat_unfold, "unfold-kernel-major"): [("?", ())] * 3,
    (nat_unfold, "unfold-no-permute"): [("✗", ("mixed-axis",))] * 3,
}


CASES = [pytest.param(m, b, d, want, id=f"{name(m)}-{b or 'correct'}-{d.replace(' ', ',')}")
         for (m, b), wants in EXPECTED.items() for d, want in zip(_sizes(m), wants)]


@pytest.mark.parametrize("module,bug,dims,want", CASES)
def test_each_file_gets_its_verdict(module, bug, dims, want):
    assert _outcome(module, bug, dims) == want


def test_every_file_bug_and_twin_of_the_round_is_listed():
    assert {(m, b) for m, b in EXPECTED} == {(m, b) for m in MODULES for b in ("", *m.TWINS, *m.BUGS)}
    assert all(len(wants) == len(_sizes(m)) for (m, _), wants in EXPECTED.items())


def test_no_bug_of_the_round_gets_a_check_mark_and_no_correct_file_an_error():
    """The bar: no ``✓`` on a buggy file, no ``✗`` or ``!`` on a correct one (7 on 44cf251)."""
    marked = {(name(m), b) for (m, b), wants in EXPECTED.items() if b in m.BUGS for v, _ in wants if v == "✓"}
    false = {(name(m), b) for (m, b), wants in EXPECTED.items() if b not in m.BUGS for v, _ in wants if v in "✗!"}
    assert (marked, false) == (set(), set())
