"""A sixth round of files after public bug reports (tests/corpus/reports6; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4 (S = 4 too where declared; the vision file at Hp = Wp = 4),
first sight recorded on af0e286 before any fix (fla_cache_seen_tokens, written later, on 32891ff, the commit
before its own fix; sdpa_causal_decode's chunk went from two tokens to three on 90ab918, where two equalled
B = 2: its first sight was the same).

* sdpa_causal_decode — pytorch/pytorch issue #144858 and pytorch/executorch PR #21749: ``is_causal=True`` with
  a KV cache (one query, or a chunk, against P + T keys: torch's top-left mask);
* onlybooks_decoder_causal — onlybooks/llm issue #4: the causal mask on the cross attention (``ones(T,
  S).tril()``) and none on the self-attention; twin: no causal mask at all (an encoder layer with cross
  attention looks the same);
* lalamo_window_offset — trymirai/lalamo PR #200: a chunk's sliding window measured from its own rows, not
  from the cache's length;
* aaconv_merge_heads — leaderj1001/Attention-Augmented-Conv2d issue #21: ``(B, Nh, HW, dvh)`` reshaped to
  ``(B, Nh, dvh, H, W)`` with no transpose;
* attention_gym_alibi_sign — meta-pytorch/attention-gym PR #86: ALiBi's ``score_mod`` with ``q_idx - kv_idx``;
* gatr_layernorm_items — Qualcomm-AI-research/geometric-algebra-transformer PR #8: ``layer_norm`` over
  ``inputs.shape[1:]``, the items and the channels;
* vllm_llama4_qk_norm — vllm-project/vllm PR #16311: Llama 4's QK norm over all heads at once; a twin (OLMo 2
  normalises the whole width on purpose);
* executorch_rope_start_pos — pytorch/executorch PR #2010: the cached branch's rotary tables sliced
  ``[:seqlen]`` instead of ``[start_pos:start_pos + seqlen]``;
* te_cross_window — NVIDIA/TransformerEngine issue #629: the self-attention's causal ``window_size = (-1,
  0)`` handed to the cross attention;
* fla_cache_seen_tokens — fla-org/flash-linear-attention issue #766: the seen-token count committed when
  layer 0 writes, so layer 1 rotates each decoding step one position too far;
* aiayn_beam_repeat — jadore801120/attention-is-all-you-need-pytorch issue #28: the source tiled for beam
  search (``repeat(beam, 1)``) against beams stacked sentence by sentence; a twin (written on 3e2d1cd, after
  the fixes): the beams enter as a Python list, so the decoder rows' order is nowhere in what torch records.

First sight (``round_outcome``: at DIMS, then at equal sizes; the CLI, run as a user would, ``shapetrace
trace FILE [bug] --dims "B=2 T=6 D=32 H=4"``, gave the same marks and kinds at DIMS but for GATr's correct
file, ``! heads-talk``):

=========================  =========================  ===========================================  ====================
file                       variant                    first sight (DIMS / equal)                   now (DIMS / equal)
=========================  =========================  ===========================================  ====================
sdpa_causal_decode         (correct)                  ? 22 of 47 (the chunk unnamed) / ?           ? / ?
sdpa_causal_decode         is-causal-at-decode        ✗ causal-mask-misaligned / ✗                 ✗ / ✗
sdpa_causal_decode         is-causal-decode-only      ✗ causal-mask-misaligned / ✗                 ✗ / ✗
onlybooks_decoder_causal   (correct)                  ✓ 39 ops / ?                                 ✓ / ?
onlybooks_decoder_causal   causal-swapped             ✓ 39 ops (false ✓) / ?                       ! causal-mask-… / ?
onlybooks_decoder_causal   cross-causal               ✓ 41 ops (false ✓) / ?                       ! causal-mask-… / ?
onlybooks_decoder_causal   self-not-causal (twin)     ✓ 37 ops / ?                                 ✓ / ?
lalamo_window_offset       (correct)                  ? 14 of 30 (the chunk unnamed) / ?           ? / ?
lalamo_window_offset       window-local-rows          ? 14 of 30 / ?                               ✗ window-widens / ✗
aaconv_merge_heads         (correct)                  ✓ 19 ops / ✓                                 ✓ / ✓
aaconv_merge_heads         reshape-without-transpose  ✗ mixed-axis / ✗ mixed-axis ×2              ✗ / ✗
attention_gym_alibi_sign   (correct)                  ✓ 18 ops / ?                                 ✓ / ?
attention_gym_alibi_sign   alibi-q-minus-k            ✗ distance-bias-reversed / ✗                 ✗ / ✗
gatr_layernorm_items       (correct)                  ✓ 12 ops (CLI: ! heads-talk, false) / ?      ✓ (CLI ✓) / ?
gatr_layernorm_items       norm-over-items            ✗ norm-over-tokens / ✗                       ✗ / ✗
vllm_llama4_qk_norm        (correct)                  ✓ 20 ops / ?                                 ✓ / ?
vllm_llama4_qk_norm        norm-across-heads (twin)   ✓ 20 ops / ?                                 ✓ / ?
executorch_rope_start_pos  (correct)                  ? 41 of 67 (the tables' rows unnamed) / ?    ? / ?
executorch_rope_start_pos  freqs-from-zero            ? 41 of 67 / ?                               ? / ?
te_cross_window            (correct)                  ✓ 25 ops / ?                                 ✓ / ?
te_cross_window            window-into-cross          ✓ 28 ops (false ✓) / ?                       ! causal-mask-… / ?
fla_cache_seen_tokens      (correct)                  ? 76 of 80 (the step's tables) / ?           ✓ 80 ops / ?
fla_cache_seen_tokens      seen-tokens-early          ? 76 of 80 / ?                               ✗ rotary-position-off
aiayn_beam_repeat          (correct)                  ? 30 of 62 (the stacked beams unnamed) / ?   (written on 3e2d1cd)
aiayn_beam_repeat          source-tiled (twin)        ? 29 of 61 / ?                               (written on 3e2d1cd)
=========================  =========================  ===========================================  ====================

At first sight, at DIMS, the 10 correct files were ✓ 6, ? 4, ✗ 0 (the 2 twins ✓); the 11 bugs ✗ 5, ? 3, ✓ 3
(onlybooks' two, TransformerEngine's; 9d6f047's message counted 11 bugs and ✗ 6 before fla's file: it was 10
and ✗ 5). Now: correct ✓ 7, ? 3, ✗ 0; bugs ✗ 7, ! 3, ? 1, ✓ 0 (aiayn_beam_repeat, written after the fixes, is ?
with its twin, and adds no bug). The fixes, one general mechanism each:

* ``rules/directions``: a causal pattern (read on the mask's values, aligned bottom-right or from the first
  key) onto scores whose queries and keys are two declared sequences (T, S) is ``causal-mask-across-sequences``:
  still an error where cut from a square table (Whisper), a warning where built from the two lengths (wait-k
  decoding aligns two sequences so on purpose); nothing where the mask is a square table's last rows (a cache
  mask of one sequence), where the names of the two sequences rest on sizes (T = S), or where the keys are a
  static cache's buffer (``L``, not declared);
* ``directions.causal_window`` + ``rules/directions.windows_kept``: a causal sliding window's width read on the
  values; a later call on the same line of the same module that lets a query see more keys is
  ``window-widens``;
* ``head_structure``/``heads``: an attention found from the structure keeps its merge's heads axis (followed
  from the split), so the heads contract reads the merged output where the merge lays its heads (GATr's split
  ``(qkv d H)`` and merge ``(H d)``: no false ``heads-talk``);
* ``rotary``/``rotary_positions``: a decoding step's rotation is placed through the join that appends it, and
  its one-entry token axis named from that join's result (``T+1``): layer 1's key rotated at 7 and joined after
  6 entries is ``rotary-position-off``, and the correct file's step tables count as checked.

What stays ``?``, and why: sdpa's and lalamo's correct files hold a chunk of three new tokens ``[B, 3, D]``, a
size no name declares, so the chunk and every op after it stay unnamed (naming B and D alone by size leaves the
chunk's tokens unnamed: tried, 22 → 26 of 47, reverted). executorch writes a static cache in place and rotates
by explicit pairs (``x_r·cos − x_i·sin``, ``x_r·sin + x_i·cos``, ``stack``), a form the rotary reader does not
know (smolGPT's halves in reports5 are the same gap), so neither its tables nor the step's position are read:
both variants ``?``. Equal sizes: T = S (or B = T) leave the names of the two sequences to sizes, so the
cross-attention warnings and fla's position rule do not speak there.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports6 import (
    aaconv_merge_heads,
    aiayn_beam_repeat,
    attention_gym_alibi_sign,
    executorch_rope_start_pos,
    fla_cache_seen_tokens,
    gatr_layernorm_items,
    lalamo_window_offset,
    onlybooks_decoder_causal,
    sdpa_causal_decode,
    te_cross_window,
    vllm_llama4_qk_norm,
)

MODULES = (sdpa_causal_decode, onlybooks_decoder_causal, lalamo_window_offset, aaconv_merge_heads,
           attention_gym_alibi_sign, gatr_layernorm_items, vllm_llama4_qk_norm, executorch_rope_start_pos,
           te_cross_window, fla_cache_seen_tokens, aiayn_beam_repeat)
OK, UNSURE = ("✓", ()), ("?", ())
ACROSS = ("!", ("causal-mask-across-sequences",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (sdpa_causal_decode, ""): [UNSURE, UNSURE],
    (sdpa_causal_decode, "is-causal-at-decode"): [("✗", ("causal-mask-misaligned",))] * 2,
    (sdpa_causal_decode, "is-causal-decode-only"): [("✗", ("causal-mask-misaligned",))] * 2,
    (onlybooks_decoder_causal, ""): [OK, UNSURE],
    (onlybooks_decoder_causal, "causal-swapped"): [ACROSS, UNSURE],   # (✓ at af0e286)
    (onlybooks_decoder_causal, "cross-causal"): [ACROSS, UNSURE],     # (✓ at af0e286)
    (onlybooks_decoder_causal, "self-not-causal"): [OK, UNSURE],
    (lalamo_window_offset, ""): [UNSURE, UNSURE],
    # (? ? at af0e286; ✗ at equal sizes too until the prefill's dropped scores, read [T, B, D], vouched for it)
    (lalamo_window_offset, "window-local-rows"): [("✗", ("window-widens",)), UNSURE],
    (aaconv_merge_heads, ""): [OK, OK],
    (aaconv_merge_heads, "reshape-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("mixed-axis", "mixed-axis"))],
    (attention_gym_alibi_sign, ""): [OK, UNSURE],
    (attention_gym_alibi_sign, "alibi-q-minus-k"): [("✗", ("distance-bias-reversed",))] * 2,
    (gatr_layernorm_items, ""): [OK, UNSURE],
    (gatr_layernorm_items, "norm-over-items"): [("✗", ("norm-over-tokens",))] * 2,
    (vllm_llama4_qk_norm, ""): [OK, UNSURE],
    (vllm_llama4_qk_norm, "norm-across-heads"): [OK, UNSURE],
    (executorch_rope_start_pos, ""): [UNSURE, UNSURE],
    (executorch_rope_start_pos, "freqs-from-zero"): [UNSURE, UNSURE],   # (explicit pairs, a static cache: not read)
    (te_cross_window, ""): [OK, UNSURE],
    (te_cross_window, "window-into-cross"): [ACROSS, UNSURE],   # (✓ at af0e286)
    (fla_cache_seen_tokens, ""): [OK, UNSURE],   # (? at 32891ff)
    (fla_cache_seen_tokens, "seen-tokens-early"): [("✗", ("rotary-position-off",)), UNSURE],   # (? at 32891ff)
    (aiayn_beam_repeat, ""): [UNSURE, UNSURE],
    (aiayn_beam_repeat, "source-tiled"): [UNSURE, UNSURE],   # (a twin: the beams' order is a Python list's)
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
