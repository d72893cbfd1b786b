"""A sixty-first round of public-style files (tests/corpus/public61: efficient, linear and retention-style attention
from projects not yet in the corpus: lucidrains' local-attention, LoLCATs' Hedgehog linear attention, Based's Taylor
linear attention, xLSTM's parallel mLSTM, Mega's EMA-gated attention), traced at distinct sizes and at equal sizes,
first sight recorded on d87de48e (main plus the files; other helpers' uncommitted rounds in the tree):

* local_attention_lookaround — lucidrains/local-attention ``LocalAttention`` / ``look_around`` / ``pad_to_multiple``
  under ``LocalMHA`` (heads packed with einops ``pack([t], '* n d')``, autopad, windows ``'b (w n) d -> b w n d'``,
  one window of look-back, causal and exact-window masks from the looked-around positions, ``unpack``); bugs
  ``look-around-pad-after`` (``F.pad(x, (*dims, forward, backward))``: the look-back lost), ``windows-strided``
  (``'b (n w) d'`` for q, k, v against ``'(w n)'`` positions: a leak), ``exact-window-off-by-one`` (``>=``); twin
  ``rearrange-unpack`` (``rearrange('(b h) n d -> b h n d')`` in place of ``unpack``);
* lolcats_hedgehog — HazyResearch/lolcats ``FeatureMapMLP`` (``einsum('hdf,bhld->bhlf')``), ``SoftmaxDim``,
  ``HedgehogFeatureMap``, ``quadratic_attention`` (``triu(n - m + 1)`` filled with 0, ``a / a.sum(dim=-1)``) in a
  Llama-style ``LolcatsLinearAttention``; bugs ``feature-softmax-over-tokens`` (``softmax(x, dim=-2)``),
  ``normaliser-over-queries`` (``a.sum(dim=-2)``), ``mask-hides-diagonal`` (``triu(n - m)``);
* based_taylor_linear — HazyResearch/based ``TaylorExp`` and ``LinearAttention`` (causal path: ``(q * (k *
  v).cumsum(dim=2)).sum(-1) / ((q * k.cumsum(dim=2)).sum(-1) + eps)``); bugs ``kv-cumsum-over-heads``
  (``cumsum(dim=1)``), ``denominator-not-causal`` (``k.sum(dim=2, keepdim=True)`` under the causal numerator),
  ``heads-view-no-transpose`` (``view(b, heads, l, dim)``);
* xlstm_mlstm_parallel — NX-AI/xlstm ``parallel_stabilized_simple``, ``mLSTMCell``, ``MultiHeadLayerNorm``; bugs
  ``decay-matrix-transposed`` (``rep.transpose(-2, -1) - rep``), ``gates-view-not-transpose``
  (``igate_preact.view(B, NH, S, 1)`` from ``(B, S, NH)``), ``igate-on-query-rows`` (the input gate not transposed);
* mega_ema_gated — facebookresearch/mega ``MultiHeadEMA`` (FFT convolution over the length, ``n=2 * L``),
  ``MovingAverageGatedAttention`` (sequence-first, single head, ``SimpleRelativePositionalBias``, causal
  ``attn_mask``); bugs ``ema-fft-circular`` (``n=L``: circular, a leak), ``h-view-not-transpose``
  (``bmm(attn, v).view(L, B, -1)``), ``rel-bias-transposed`` (``bias.t()``).

=========================== ============================ ============================================================
file                        variant                      first sight (DIMS | equal; with dependencies the same unless
                                                         said)
=========================== ============================ ============================================================
local_attention_lookaround  (correct)                    ✗ projection-over-tokens | same (both; false)
local_attention_lookaround  look-around-pad-after        ✗ projection-over-tokens | same (both; only the false error)
local_attention_lookaround  windows-strided              ✗ projection-over-tokens | same (both; only the false error)
local_attention_lookaround  exact-window-off-by-one      ✗ projection-over-tokens | same (both; only the false error)
local_attention_lookaround  rearrange-unpack (twin)      ✗ projection-over-tokens | same (both; false)
lolcats_hedgehog            (correct)                    ? | ?
lolcats_hedgehog            feature-softmax-over-tokens  ? | ?  (with dependencies ✗ causal-mask-leaks | ?)
lolcats_hedgehog            normaliser-over-queries      ? | ?  (with dependencies ✗ causal-mask-leaks | ?)
lolcats_hedgehog            mask-hides-diagonal          ? | ?
based_taylor_linear         (correct)                    ? | ?
based_taylor_linear         kv-cumsum-over-heads         ✗ scan-over-wrong-axis | same
based_taylor_linear         denominator-not-causal       ? | ?  (with dependencies too: causality not measured)
based_taylor_linear         heads-view-no-transpose      ✗ mixed-axis ×4, projection-over-tokens |
                                                         ✗ scan-over-wrong-axis
xlstm_mlstm_parallel        (correct)                    ? | ?
xlstm_mlstm_parallel        decay-matrix-transposed      ? | ?
xlstm_mlstm_parallel        gates-view-not-transpose     ? | ✗ join-mismatch  (with dependencies ✗ causal-mask-leaks |
                                                         ✗ join-mismatch)
xlstm_mlstm_parallel        igate-on-query-rows          ? | ?
mega_ema_gated              (correct)                    ? | ?
mega_ema_gated              ema-fft-circular             ? | ?  (with dependencies ✗ causal-mask-leaks | ?)
mega_ema_gated              h-view-not-transpose         ✗ mixed-axis | ✗ broadcast-mismatch
mega_ema_gated              rel-bias-transposed          ? | ?
=========================== ============================ ============================================================

No bug keeps ``✓`` (no correct file gets ``✓`` either). The correct local-attention file gets a false ``✗
projection-over-tokens`` at both sizes: einops ``pack([t], '* n d')`` (a reshape to ``[B·H, T, d_k]`` then a
one-tensor ``cat``) loses the factors of ``B·H``, and the way back (``unpack``, or the twin's ``rearrange('(b h) n d
-> b h n d')``) is named ``[B·H/4=2, B·H%4=4, T, d_k]`` (reshape #44), so the merge ``'b h n d -> b n (h d)'`` is
read as ``[B·H/4, T, B·H%4·d_k]`` and ``to_out`` "mixes different batch entries into each output feature"; two
``nonstandard-head-split`` notes follow from the same misnaming. The same file with ``rearrange('b h n d -> (b h) n
d')`` in place of ``pack`` is ``✓``. The three local-attention bugs are judged by that false error only: none gets a
finding of its own (``look-around-pad-after`` adds only the note ``window-width-unchecked``). The window axes are
named ``T+1/2`` (the windows) and ``T+1%2`` (the window width), the looked-around keys ``T+1%2+T+1%2``.

The leaks found with dependencies are blamed on the mask: "though the code declares a causal mask (triu #18): the
mask lets queries see the future (reversed, or not applied)" (Hedgehog's feature softmax over the tokens, its
normaliser over the queries), "(tril #14)" (xLSTM's gates of heads and tokens interleaved), "(the attention weights
are zero above the diagonal)" (Mega's circular EMA): in each the mask is right and the leak comes from another op.
Based's ``denominator-not-causal`` leaks too, but Based declares no mask (its causality is the ``cumsum`` over the
tokens), so no causal contract is measured. At equal sizes the dependency contracts are not measured ("names were
found from sizes alone"). ``?`` on the correct files: Hedgehog's feature axis (einsum #9 ``'hdf,bhld->bhlf'``, the
softmaxes, the ``cat``) is unnamed; Based's q and k views (#3, #4: ``[B, T, F=12] -> [B, T, 4, 3]``) are not split
into heads; xLSTM's gate pre-activations (``Linear(3·D, NH)``, #14 transpose, #15 unsqueeze, #17 cumsum, #18 cat);
Mega's EMA kernel (einsum #3 ``'dnl,dn->dl'``), the FFT slice (#4) and its permute (#5).

Fixed since first sight (tests/engine/test_round59_fixes.py; ``EXPECTED`` holds the outcomes now): a ``cat`` of one
tensor keeps its axes as they were, folds included, so after einops ``pack`` the heads come back as ``[B, H, T, d_k]``
and the local-attention file and its twin are ``?`` (three ``pad`` ops of the look-around unnamed), no longer a false
``✗``; a slice of a flattened product, ``(T+1%3)*(T+1/3)[0:5]``, is no longer read as a cut across the parts of a
join. Its three bugs stay ``?``: none is seen (the windowed causal mask is not read as a declared one).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public61 import (
    based_taylor_linear,
    local_attention_lookaround,
    lolcats_hedgehog,
    mega_ema_gated,
    xlstm_mlstm_parallel,
)

MODULES = (local_attention_lookaround, lolcats_hedgehog, based_taylor_linear, xlstm_mlstm_parallel, mega_ema_gated)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (local_attention_lookaround, ""): [UNSURE, UNSURE],
    (local_attention_lookaround, "look-around-pad-after"): [UNSURE, UNSURE],
    (local_attention_lookaround, "windows-strided"): [UNSURE, UNSURE],
    (local_attention_lookaround, "exact-window-off-by-one"): [UNSURE, UNSURE],
    (local_attention_lookaround, "rearrange-unpack"): [UNSURE, UNSURE],
    (lolcats_hedgehog, ""): [UNSURE, UNSURE],
    (lolcats_hedgehog, "feature-softmax-over-tokens"): [UNSURE, UNSURE],
    (lolcats_hedgehog, "normaliser-over-queries"): [UNSURE, UNSURE],
    (lolcats_hedgehog, "mask-hides-diagonal"): [UNSURE, UNSURE],
    (based_taylor_linear, ""): [UNSURE, UNSURE],
    (based_taylor_linear, "kv-cumsum-over-heads"): [("✗", ("scan-over-wrong-axis",))] * 2,
    (based_taylor_linear, "denominator-not-causal"): [UNSURE, UNSURE],
    (based_taylor_linear, "heads-view-no-transpose"): [
        ("✗", ("mixed-axis", "mixed-axis", "mixed-axis", "mixed-axis", "projection-over-tokens")),
        ("✗", ("scan-over-wrong-axis",))],
    (xlstm_mlstm_parallel, ""): [UNSURE, UNSURE],
    (xlstm_mlstm_parallel, "decay-matrix-transposed"): [UNSURE, UNSURE],
    (xlstm_mlstm_parallel, "gates-view-not-transpose"): [UNSURE, ("✗", ("join-mismatch",))],
    (xlstm_mlstm_parallel, "igate-on-query-rows"): [UNSURE, UNSURE],
    (mega_ema_gated, ""): [UNSURE, UNSURE],
    (mega_ema_gated, "ema-fft-circular"): [UNSURE, UNSURE],
    (mega_ema_gated, "h-view-not-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (mega_ema_gated, "rel-bias-transposed"): [UNSURE, UNSURE],
}

#: bugs that keep ``✓`` at DIMS without the value measurement (and with it): none this round
MISSED: set = set()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
