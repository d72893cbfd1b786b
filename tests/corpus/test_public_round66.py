"""A sixty-sixth round of public-style files (tests/corpus/public66: attention with a memory, a recurrence or unusual
score arithmetic, from projects or functions not yet in the corpus: the Block-Recurrent Transformer's state
container, the Compressive Transformer's memories, Infini-attention's compressive memory, the Forgetting
Transformer's decay bias, DeltaNet's delta-rule recurrence), traced at distinct sizes and at equal sizes, first
sight recorded on 8eef3c57 (main plus the files; other rounds' folders and an untracked
shapetrace/engine/infer/built_inputs.py were being written in the same checkout at the time):

* block_recurrent_state — lucidrains/block-recurrent-transformer-pytorch ``AttentionBlock`` / ``StateContainer``
  (multi-query keys ``einsum('b h i d, b j d -> b h i j')``, the previous block's ``xl_memories`` concatenated in
  front and the causal mask padded left for them, the state read (block queries to state keys) and write (states'
  self-attention and cross-attention to the block, ``cat(dim=-1)``, a learned EMA gate)); bugs
  ``xl-mask-pad-right``, ``state-kv-from-init-state`` (issue #3), ``state-query-view-heads``; the block ``T``, the
  state vectors ``S``;
* compressive_memory_attention — lucidrains/compressive-transformer-pytorch ``SelfAttention`` (``cat((cmem, mem, x),
  dim=1)``, ``reshape_dim`` heads, ``einsum('bhid,hjd->bhij')`` positions and ``shift``, the mask ``triu_(diagonal=1
  + mem_len + cmem_len)``, ``queue_fifo``, ``ConvCompress``); bugs ``kv-cat-order-swapped``,
  ``causal-mask-no-mem-offset``, ``compress-reshape-for-transpose``, ``pad-by-remainder`` (the released code's
  ``shape[1] % ratio``); memories ``S``, compressed memories ``N``;
* infini_gemma_memory — Beomi/InfiniTransformer ``GemmaInfiniAttention`` (``elu + 1`` memory read ``sigma(q) M /
  sigma(q) z``, write ``M + sigma(k)^T v``, ``z + sigma(k).sum(dim=2)``, rotary after the memory, causal SDPA, a
  sigmoid gate per head); bugs ``memory-update-transposed``, ``norm-sum-over-heads``, ``rope-before-memory``;
* fox_forgetting_attention — zhixuan-lin/forgetting-transformer ``ForgettingAttentionLayer`` with ``test_op``'s
  plain-torch reference (``log_lambda = cumsum(logsigmoid(fgate), dim=-1)``, ``decay_bias = log_lambda[..., -M:,
  None] - log_lambda[..., None, :]``, ``p[:, :, mask == 0] = -inf``); bugs ``fgate-view-not-rearrange``,
  ``cumsum-over-heads``, ``decay-bias-transposed``;
* fla_delta_rule_recurrent — fla-org/flash-linear-attention ``delta_rule_recurrence`` (naive.py) under the
  head-first ``DeltaNet`` layer (``silu``, per-head L2 norm, ``beta = rearrange(b_proj(x), 'b t h -> b h t')
  .sigmoid()``, the state ``S (b, h, d_k, d_v)`` read ``(S * k[..., None]).sum(-2)``, written ``k ⊗ beta (v -
  S^T k)``, queried ``einsum('bhd,bhdm->bhm', q, S)``); bugs ``beta-view-not-rearrange``, ``state-update-transposed``,
  ``l2norm-before-head-split``.

============================ ============================== ==========================================================
file                         variant                        first sight (DIMS | equal; with dependencies the same
                                                            unless said)
============================ ============================== ==========================================================
block_recurrent_state        (correct)                      ? | ?
block_recurrent_state        xl-mask-pad-right              ? | ?   with dependencies ✗ causal-mask-leaks | ?
block_recurrent_state        state-kv-from-init-state       ? | ?
block_recurrent_state        state-query-view-heads         ✗ mixed-axis, query-key-swapped (the second false) |
                                                            ✗ join-mismatch
compressive_memory_attention (correct)                      ? | ?
compressive_memory_attention kv-cat-order-swapped           ? | ?   (a leak from the future: causality not measured)
compressive_memory_attention causal-mask-no-mem-offset      ? | ?
compressive_memory_attention compress-reshape-for-transpose ? | ?
compressive_memory_attention pad-by-remainder               ? | ?   (no bug at equal sizes: T = 4 needs no pad)
infini_gemma_memory          (correct)                      ? | ?
infini_gemma_memory          memory-update-transposed       ? | ?
infini_gemma_memory          norm-sum-over-heads            ✗ reduction-over-wrong-axis (both)
infini_gemma_memory          rope-before-memory             ? | ?
fox_forgetting_attention     (correct)                      ? | ?
fox_forgetting_attention     fgate-view-not-rearrange       ? | ✗ broadcast-mismatch;  with dependencies
                                                            ✗ causal-mask-leaks | ✗ broadcast-mismatch
fox_forgetting_attention     cumsum-over-heads              ? | ?
fox_forgetting_attention     decay-bias-transposed          ? | ?
fla_delta_rule_recurrent     (correct)                      ✗ attends-over-features (false) | ?
fla_delta_rule_recurrent     beta-view-not-rearrange        ✗ attends-over-features (only the false error) |
                                                            ✗ broadcast-mismatch
fla_delta_rule_recurrent     state-update-transposed        ✗ attends-over-features (only the false error) | ?
fla_delta_rule_recurrent     l2norm-before-head-split       ✗ attends-over-features (only the false error) | ?
============================ ============================== ==========================================================

No bug gets ``✓`` (no correct file gets ``✓`` either). The correct DeltaNet file gets a false ``✗
attends-over-features`` at DIMS (with dependencies too; at equal sizes it is only the note ``order-of-equal-sizes``):
"The layout is made by reshape #3: einsum #25 computes scores [B=2, H=4, d_k=8] whose key axis is d_k (features):
each query weighs features instead of the other tokens, and the tokens sit in the batch axes [B=2]. Also seen at #38
einsum, #51 einsum, #64 einsum, #77 einsum", with the fix "Split the heads with view(B, T, H, d_k), move them ahead
of the tokens with transpose(1, 2), and multiply [B, H, T, d_k] @ [B, H, d_k, T]", which is what the layer does.
The einsum is the recurrence's read of the fast-weight state, ``o_i = q_i S`` with ``q_i = q[:, :, i]`` ``(B, H,
d_k)`` and ``S`` ``(B, H, d_k, d_v)``: one token at a time, no scores and no softmax (the products over the state's
``d_k`` are the point of a linear-attention state). Its three bugs get that error and nothing of their own at
DIMS; at equal sizes ``beta-view-not-rearrange`` gets its own ``✗ broadcast-mismatch`` ("mul #22 lines up [B=4,
T=4, 1] with [B=4, H=4, d_k=8] ... pairs T (tokens) of the first with H (heads)").

Block-recurrent ``state-query-view-heads``: its ``mixed-axis`` (view #20, ``[B, !T·H=4, !T·H=5, d_k]``) is right;
its ``query-key-swapped`` is false: einsum #39 is the state write's cross-attention (``q_from_state [B, H, S, d_k]``
attending to the block's keys ``[B, T, d_k]``), the same op the correct file's trace describes as "scores: ... one
[S, T] matrix per (B, H): row = query token", and the message calls the states the keys and the block the queries.

Where the axes stay unnamed (the ``?``): DeltaNet's and FoX's per-head gate ``Linear(D, num_heads)`` gives ``[B,
T, 4]``, never ``H`` (DeltaNet #11/#12, FoX #8 ``permute`` unchecked), so the ``view(b, h, t)`` bugs at DIMS and
FoX's ``cumsum-over-heads`` (#14 ``cumsum`` over that unnamed axis) are not checked; Infini's memory ``(B, H, d_k,
d_v)`` and norm term ``(B, H, 1, d_k)`` inputs are unnamed although every size is declared and distinct (#15
matmul, #16 transpose); the block-recurrent ``xl_memories`` ``(2, B, T, d_k)`` (#7 unbind, #8-#9 cat) and the
state path after ``state_to_kv = Linear(D, 2·d_k)`` on ``[B, S, D]`` (``[B, S, 16]`` unnamed, where the block's own
``to_kv`` on ``[B, T, D]`` is named ``2·d_k=16``); the Compressive Transformer's position table ``(H, N+S+T,
d_k)`` (shown as the first row ``in input [4, 14, 8]`` in the CLI, ahead of ``x``), the whole ``shift`` and the
padded ``[B, 8, D]`` old memory (so ``compress-reshape-for-transpose``'s reshape to ``[B, 32, 8]`` is not checked).
The value-level bugs (Infini's transposed memory write and rotary-before-memory, FoX's transposed decay bias,
DeltaNet's transposed state write, the remainder pad, issue #3's ``init_state``) change no name.

With dependencies: the Compressive Transformer's rectangular causal mask (``ones(t, t + M).triu_(diagonal=1 +
M)``) is not taken for a causal mask (no causal contract in "held on the values"), so ``kv-cat-order-swapped``,
whose query 0 reads the segment's later tokens (autograd: ``d logits[0, 0] / d x[0, 4]`` is nonzero), is ``?``; and
"each token depends on itself" is said to hold for ``causal-mask-no-mem-offset``, where query 0 sees only key 0
(a compressed memory; a softmax over one key) and its output depends on no input token (``d logits[:, 0] / d x`` is
zero).

Since first sight (tests/engine/test_round63_fixes.py): a product whose output's row letter is a batch letter of
both operands (``'bhd,bhdm->bhm'``: one query vector per head, no query rows) computes no scores, so no key axis
is judged (``rules/diagnose.attention_key_axis``): DeltaNet's correct file and its bugs are ``?`` at DIMS
(``beta-view-not-rearrange`` keeps its own ``✗ broadcast-mismatch`` at equal sizes).
"""

from __future__ import annotations

from tests.corpus.helpers import round_outcome, round_tests
from tests.corpus.public66 import (
    block_recurrent_state,
    compressive_memory_attention,
    fla_delta_rule_recurrent,
    fox_forgetting_attention,
    infini_gemma_memory,
)

MODULES = (block_recurrent_state, compressive_memory_attention, infini_gemma_memory, fox_forgetting_attention,
           fla_delta_rule_recurrent)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (block_recurrent_state, ""): [UNSURE, UNSURE],
    (block_recurrent_state, "xl-mask-pad-right"): [UNSURE, UNSURE],   # (✗ causal-mask-leaks with dependencies)
    (block_recurrent_state, "state-kv-from-init-state"): [UNSURE, UNSURE],
    (block_recurrent_state, "state-query-view-heads"): [("✗", ("mixed-axis", "query-key-swapped")),
                                                        ("✗", ("join-mismatch",))],
    (compressive_memory_attention, ""): [UNSURE, UNSURE],
    (compressive_memory_attention, "kv-cat-order-swapped"): [UNSURE, UNSURE],
    (compressive_memory_attention, "causal-mask-no-mem-offset"): [UNSURE, UNSURE],
    (compressive_memory_attention, "compress-reshape-for-transpose"): [UNSURE, UNSURE],
    (compressive_memory_attention, "pad-by-remainder"): [UNSURE, UNSURE],
    (infini_gemma_memory, ""): [UNSURE, UNSURE],
    (infini_gemma_memory, "memory-update-transposed"): [UNSURE, UNSURE],
    (infini_gemma_memory, "norm-sum-over-heads"): [("✗", ("reduction-over-wrong-axis",))] * 2,
    (infini_gemma_memory, "rope-before-memory"): [UNSURE, UNSURE],
    (fox_forgetting_attention, ""): [UNSURE, UNSURE],
    (fox_forgetting_attention, "fgate-view-not-rearrange"): [UNSURE, ("✗", ("broadcast-mismatch",))],
    (fox_forgetting_attention, "cumsum-over-heads"): [UNSURE, UNSURE],
    (fox_forgetting_attention, "decay-bias-transposed"): [UNSURE, UNSURE],
    (fla_delta_rule_recurrent, ""): [UNSURE, UNSURE],   # (a false ✗ at first sight: see the docstring)
    (fla_delta_rule_recurrent, "beta-view-not-rearrange"): [UNSURE, ("✗", ("broadcast-mismatch",))],
    (fla_delta_rule_recurrent, "state-update-transposed"): [UNSURE, UNSURE],
    (fla_delta_rule_recurrent, "l2norm-before-head-split"): [UNSURE, UNSURE],
}

#: bugs that keep ``✓`` at DIMS without the value measurement (and with it): none this round
MISSED: set = set()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))


def test_delta_rule_state_read_is_no_attention_over_features():
    """First sight (8eef3c57): the state read einsum('bhd,bhdm->bhm', q_i, S) was taken for scores over d_k."""
    assert round_outcome(fla_delta_rule_recurrent, "", fla_delta_rule_recurrent.DIMS[0]) == UNSURE
