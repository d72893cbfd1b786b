"""A fifty-eighth round of public-style files (tests/corpus/public58: LLM decoder attention from projects or classes
not yet in the corpus: the first ChatGLM's GLM 2D rotary, DeepSeek-V3's reference MLA with the absorbed
up-projection, mistral-inference's packed-sequence attention, nanotron's sequence-first varlen attention, TeleChat's
per-head packed ``key_value``), traced at distinct sizes and at equal sizes, first sight recorded on 0c703cb0 (main
plus the files; shapetrace/ unchanged):

* chatglm6b_glm2d — THUDM/ChatGLM-6B ``SelfAttention`` / ``attention_fn`` (sequence-first, ``query_key_value``
  packed per head ``view(sq, b, np, 3 * hn)`` and split, the 2D rotary: half of each head by the token positions,
  half by the block positions, ``F.embedding`` of the cos/sin tables, ``query_key_layer_scaling_coeff``,
  ``baddbmm`` on ``[b * np, sq, hn]``), ``get_masks`` (bidirectional context, causal after it) and
  ``get_position_ids``; bugs ``qkv-split-flat`` (``chunk(3)`` of the fused width before the head view),
  ``block-positions-ignored`` (both halves by ``position_ids``), ``context-rows-open``
  (``attention_mask[i, :context_length, :] = 1``);
* deepseek_v3_absorb — deepseek-ai/DeepSeek-V3 ``inference/model.py`` ``MLA.forward`` (``attn_impl="absorb"``:
  ``wkv_b.weight.view(h, -1, kv_lora_rank)`` absorbed into ``q_nope``, the latent ``kv_cache`` and ``pe_cache``,
  ``einsum("bshc,btc->bsht")``, complex-pair rotary) and ``Transformer.forward`` (``freqs_cis[start_pos:...]``);
  a prompt, then one decoded token; bugs ``decode-freqs-from-zero`` (``freqs_cis[:seqlen]``),
  ``decode-cache-write-at-zero`` (caches written at ``[:bsz, :seqlen]``), ``value-rows-front`` (``wkv_b[:,
  :v_head_dim]``, the key rows);
* mistral_packed_seqlens — mistralai/mistral-inference v1 ``Transformer.forward(input_ids, seqlens)`` /
  ``Attention.forward`` (``positions_from_sizes``, ``BlockDiagonalCausalMask.from_seqlens``, ``[seqlen_sum, H,
  head_dim]``, ``repeat_kv`` by ``repeat_interleave``, xformers' attention on ``[1, M, H, K]``, written in torch);
  bugs ``positions-not-reset`` (``arange(seqlen_sum)``), ``causal-across-sequences`` (a plain causal mask over the
  pack), ``repeat-kv-tiled`` (``repeat(1, repeats, 1)``); traced with the sequences' sizes (``B T``) and with the
  packed count ``N`` and ``H_kv`` declared;
* nanotron_varlen_seqfirst — huggingface/nanotron ``CausalSelfAttention`` (sequence-first, ``qkv_proj`` split
  ``[n_q·d, n_kv·d, n_kv·d]``, ``transpose(0, 1).contiguous().view(b, s, h, d)``, keys and values stacked and
  permuted for flash-attn's rotary, ``view(b * s, h, d)``) and ``CoreAttention`` (``cu_seqlens`` from the sequence
  mask, ``flash_attn_varlen_func`` written in torch); bugs ``key-view-no-transpose``, ``output-view-seq-first``;
* telechat_kv_packed — Tele-AI/Telechat ``TelechatAttention`` (eager path: separate ``query``, ``key_value`` packed
  per head ``view(sq, b, n_kv, 2 * hn)`` and split, rotary on ``[sq, b * np, hn]``, ``einsum('bik,bkj->bij')``,
  ``bmm``, ``_merge_heads`` back to batch-first) and ``_prepare_attn_mask``; bugs ``kv-split-flat``
  (``chunk(2)`` of the fused width before the head view), ``merge-heads-no-permute``, ``pad-mask-on-queries``
  (``mask[:, None, :, None]``).

======================== ========================== ========================================================
file                     variant                    first sight (DIMS | equal; with dependencies the same)
======================== ========================== ========================================================
chatglm6b_glm2d          (correct)                  ? | ?
chatglm6b_glm2d          qkv-split-flat             ? | ?
chatglm6b_glm2d          block-positions-ignored    ? | ?
chatglm6b_glm2d          context-rows-open          ✗ mask-wrong-axis | ?
deepseek_v3_absorb       (correct)                  ? | ?
deepseek_v3_absorb       decode-freqs-from-zero     ? | ?
deepseek_v3_absorb       decode-cache-write-at-zero ✗ cache-slot-skipped ×3 (both)
deepseek_v3_absorb       value-rows-front           ? | ?
mistral_packed_seqlens   (correct)                  B T: ? | ?   N H_kv: ? | ?
mistral_packed_seqlens   positions-not-reset        B T: ? | ?   N H_kv: ? | ?
mistral_packed_seqlens   causal-across-sequences    B T: ? | ?   N H_kv: ? | ?  (one op short of ✓)
mistral_packed_seqlens   repeat-kv-tiled            B T: ? | ?   N H_kv: ✗ gqa-head-order | ?
nanotron_varlen_seqfirst (correct)                  ? | ?
nanotron_varlen_seqfirst key-view-no-transpose      ✗ mixed-axis | ✗ join-mismatch
nanotron_varlen_seqfirst output-view-seq-first      ✗ mixed-axis | ✗ broadcast-mismatch
telechat_kv_packed       (correct)                  ✓ | ?
telechat_kv_packed       kv-split-flat              ✓ | ?
telechat_kv_packed       merge-heads-no-permute     ✗ mixed-axis | ✗ broadcast-mismatch
telechat_kv_packed       pad-mask-on-queries        ✗ mask-wrong-axis (both)
======================== ========================== ========================================================

One bug keeps ``✓`` at DIMS, with dependencies too: TeleChat's ``kv-split-flat``. The fused ``key_value`` output is
cut ``[all keys | all values]`` where the checkpoint packs ``[k_h | v_h]`` per head; no activation axis is mixed (a
freshly initialised projection is equally right read either way), only the checkpoint's column order decides it, so
no name or contract sees it. ChatGLM's ``qkv-split-flat`` is the same slip on a three-way packing and is ``?`` only
because the rotary tables' ops stay unnamed (``#18 max``, ``#19 einsum``, ``#20 cat``, ``#21 __getitem__``, ...:
the table is built for ``position_ids.max() + 1`` rows). No correct file got ``✗`` or ``!``. mistral-inference's
``causal-across-sequences`` is ``?`` read with ``N H_kv`` only through ``#27 repeat_interleave`` (the mask's
per-token sequence ids): "checked 35 of 36 ops ... no errors or warnings": the packed causal mask that lets each
sequence see the ones before it is checked and passes. Read with ``B T`` nothing is named at all (the packed ``[B·T,
D]`` input is not read as ``B·T``); without ``H_kv`` the key/value views stay unnamed. DeepSeek-V3's MLA is ``?``
throughout: its query heads are ``qk_nope + qk_rope = 12`` wide, not ``D / H = 8``, so ``view(bsz, seqlen, h, 12)``
names no head axis ("heads (no head split found)", with ``d_k=12`` declared too) and the two positional bugs of the
decode step stay unchecked. nanotron's correct file is ``?`` at ``#15 cat`` / ``#16 permute`` (the keys and values
stacked on a new axis of 2) and ``#35 __setitem__``. The ``gqa-head-order`` message names its own op twice ("matmul
#26 pairs them ... Also seen at #26 matmul, #35 matmul").
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public58 import (
    chatglm6b_glm2d,
    deepseek_v3_absorb,
    mistral_packed_seqlens,
    nanotron_varlen_seqfirst,
    telechat_kv_packed,
)

MODULES = (chatglm6b_glm2d, deepseek_v3_absorb, mistral_packed_seqlens, nanotron_varlen_seqfirst, telechat_kv_packed)
UNSURE = ("?", ())
CHECKED = ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (chatglm6b_glm2d, ""): [UNSURE, UNSURE],
    (chatglm6b_glm2d, "qkv-split-flat"): [UNSURE, UNSURE],
    (chatglm6b_glm2d, "block-positions-ignored"): [UNSURE, UNSURE],
    (chatglm6b_glm2d, "context-rows-open"): [("✗", ("mask-wrong-axis",)), UNSURE],
    (deepseek_v3_absorb, ""): [UNSURE, UNSURE],
    (deepseek_v3_absorb, "decode-freqs-from-zero"): [UNSURE, UNSURE],
    (deepseek_v3_absorb, "decode-cache-write-at-zero"): [("✗", ("cache-slot-skipped",) * 3)] * 2,
    (deepseek_v3_absorb, "value-rows-front"): [UNSURE, UNSURE],
    (mistral_packed_seqlens, ""): [UNSURE] * 4,
    (mistral_packed_seqlens, "positions-not-reset"): [UNSURE] * 4,
    (mistral_packed_seqlens, "causal-across-sequences"): [UNSURE] * 4,
    (mistral_packed_seqlens, "repeat-kv-tiled"): [UNSURE, UNSURE, ("✗", ("gqa-head-order",)), UNSURE],
    (nanotron_varlen_seqfirst, ""): [UNSURE, UNSURE],
    (nanotron_varlen_seqfirst, "key-view-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("join-mismatch",))],
    (nanotron_varlen_seqfirst, "output-view-seq-first"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (telechat_kv_packed, ""): [CHECKED, UNSURE],
    (telechat_kv_packed, "kv-split-flat"): [CHECKED, UNSURE],
    (telechat_kv_packed, "merge-heads-no-permute"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (telechat_kv_packed, "pad-mask-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
}

#: bugs that keep ``✓`` at DIMS without the value measurement (and with it): a packed projection's columns read in
#: the other order, which only the checkpoint decides (no activation axis is mixed)
MISSED = {(telechat_kv_packed, "kv-split-flat")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
