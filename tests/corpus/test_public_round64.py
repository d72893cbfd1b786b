"""A sixty-fourth round of public-style files (tests/corpus/public64: attention in audio and music generation, from
projects or functions not yet in the corpus: audiocraft's streaming state, Jukebox's factored attention, GPT-SoVITS's
VALL-E-style AR with its caches, Fish Speech's dual-AR fast transformer, F5-TTS's DiT), traced at distinct sizes and
at equal sizes, first sight recorded on 06b75e7b (main plus the files; the working tree then also held an
uncommitted change to shapetrace/engine/value_checked.py and other helpers' rounds):

* audiocraft_streaming_cache — facebookresearch/audiocraft ``StreamingMultiheadAttention`` (custom, not memory
  efficient: q, k, v kept ``"b t h d"``), ``_get_mask`` with the past steps, ``_apply_rope`` from the streaming
  offset (``RotaryEmbedding.rotate_qk``, ``torch.polar`` table, ``view_as_complex``), ``_complete_kv``
  (``torch.cat`` on the time dim), the einsum path; a prompt of ``T`` frames, then one step; bugs
  ``mask-queries-not-offset`` (the step's query at position 0: it sees only key 0), ``rope-start-not-advanced``
  (``start=0`` on the step), ``rope-offset-from-heads-dim`` (``past_keys.shape[2]``, the other layout's time dim:
  the step rotated as position ``H``);
* jukebox_transpose_block — openai/jukebox ``FactoredAttention`` with ``attn_func=2`` (``transpose_block_attn``:
  ``view(bs, l // block_ctx, block_ctx, d).transpose(1, 2)`` folded to ``(bs·block_ctx, nb, d)``, ``split_heads``
  with the key ``permute(0, 2, 3, 1)``, ``get_mask`` ``tril(kv_l - q_l)``, ``Conv1D`` ``addmm``), a prompt through
  the cache, then one sampled code reading ``k[:, block_l::block_ctx]``; bugs ``transpose-back-missing``,
  ``sample-column-off-by-one`` (``block_l = l % block_ctx``);
* gpt_sovits_t2s_cache — RVC-Boss/GPT-SoVITS ``T2SBlock.process_prompt`` / ``decode_next_token``, two blocks (VALL-E's
  ``[x; y]`` mask: text rows see the text only, audio rows the text and the audio causally, True = masked, passed
  as ``~attn_mask``; caches ``[B, S+T, D]`` before the head split; merge ``permute(2, 0, 1, 3)`` then ``view(T, B,
  D).transpose(1, 0)``; the step embedded at ``pe[:, y_len + idx]``); bugs ``text-sees-audio`` (pad ``value=False``),
  ``merge-batch-time-swapped`` (``transpose(1, 2).reshape(B·T, D)`` read back time-major),
  ``step-position-not-advanced`` (``pe[:, idx]``);
* fish_speech_dual_ar — fishaudio/fish-speech ``DualARTransformer.forward`` (slow gpt-fast attention over the
  frames; the codes shifted one frame left, ``cat([x[:, None], codebook_embeddings], dim=1)``, ``rearrange("b n s d
  -> (b s) n d")``, the fast attention over the ``K`` codebooks, ``"(b s) n d -> b s n d"``); 8 codebooks; bugs
  ``fold-reshape-unmoved`` (``reshape(b * s, -1, d)`` on ``(b, n, s, d)``), ``unfold-seq-major`` (``"(s b) n d"``),
  ``codes-not-shifted`` (``inp[:, 1:-1]``);
* f5_tts_dit_rope — SWivid/F5-TTS v1 ``DiT`` / ``Attention`` (text padded to the mel length, ``InputEmbedding``
  and a grouped ``Conv1d`` position embedding, adaLN-zero, x-transformers rotary on the first ``pe_attn_head = 1``
  heads of the ``(b, h, n, d)`` layout, the frame mask ``'b n -> b 1 1 n'`` expanded, SDPA, padded frames
  zeroed); bugs ``rope-heads-on-frames`` (``query[:, :, :pn]``), ``mask-on-queries`` (``b 1 n 1``).

========================== ========================== =====================================================
file                       variant                    first sight (DIMS | equal; with dependencies the same)
========================== ========================== =====================================================
audiocraft_streaming_cache (correct)                  ? | ?  (49 of 51: the step's mask #27 view, #28 where)
audiocraft_streaming_cache mask-queries-not-offset    ? | ?  (with dependencies: "the causal mask holds")
audiocraft_streaming_cache rope-start-not-advanced    ? | ?
audiocraft_streaming_cache rope-offset-from-heads-dim ? | ?
jukebox_transpose_block    (correct)                  ? | ?  (48 of 56: the sampled step's strided keys)
jukebox_transpose_block    transpose-back-missing     ? | ?  (the output named ``[B, T%3·T/3, D]``, no finding)
jukebox_transpose_block    sample-column-off-by-one   ? | ?
gpt_sovits_t2s_cache       (correct)                  ? | ?  (the mask's key axis unnamed; 0 checked at equal)
gpt_sovits_t2s_cache       text-sees-audio            ✗ mask-wrong-axis | ?  (its message tells of padding)
gpt_sovits_t2s_cache       merge-batch-time-swapped   ✗ mixed-axis | ?
gpt_sovits_t2s_cache       step-position-not-advanced ? | ?
fish_speech_dual_ar        (correct)                  ? | ?  (the frames unnamed from the codes' ``cat`` on)
fish_speech_dual_ar        fold-reshape-unmoved       ✗ mixed-axis | ?
fish_speech_dual_ar        unfold-seq-major           ? | ?
fish_speech_dual_ar        codes-not-shifted          ? | ?
f5_tts_dit_rope            (correct)                  ? | ?  (the time embedding and the input projection)
f5_tts_dit_rope            rope-heads-on-frames       ? | ?
f5_tts_dit_rope            mask-on-queries            ✗ mask-wrong-axis (both)
========================== ========================== =====================================================

No bug gets ``✓``, and no correct file gets ``✗`` or ``!``. Twelve of the fifteen bugs are ``?`` at DIMS, most of them
because an op of the streaming step or of the fold stays unnamed, not because the bug's own op was judged:

* audiocraft: the step's mask is built from ``arange(past_steps + current_steps)`` and is ``[1, 7]`` unnamed (not
  ``[1, T+1]``); with dependencies ``mask-queries-not-offset`` is told "the causal mask holds": the step's query sees
  key 0 only (not itself), which leaks no future, so the check that holds is not the one that fails. The rotary
  table's half width (``d_k/2 = 4``) is named ``3·D/2%4`` (a piece of the fused ``3·D``), and its pair axis
  ``3·D%2``: misleading names for ``d_k/2`` and 2.
* Jukebox: in ``transpose-back-missing`` the way back ``a.view(bs, ql, d)`` from ``[B·T%3, T/3, D]`` is named
  ``[B, T%3·T/3, D]``: the names themselves say the tokens come out offset-major where they went in block-major
  (``T = T/3·T%3``), yet no finding; the ``Conv1D`` flatten after it gets the note ``tokens-regrouped-with-batch``
  ("axis 0 groups blocks of tokens ... how windowed attention (Swin's windows, local chunks) batches its windows").
  The correct fold gets the same note three times, though it groups *offsets* of the blocks (strided attention),
  not blocks. The sampled step's keys ``k[:, block_l::block_ctx]`` (6 of ``T+1 = 16``) are unnamed.
* GPT-SoVITS: the mask's pads are named ``[S, S+6]`` and ``[T, 5+T]`` (the pad widths ``y_len`` and ``x_len`` read
  as numbers), so the concatenated mask's key axis is unnamed (#8 cat, #9 unsqueeze, #10 expand, #11 view).
  ``text-sees-audio`` is ``✗`` but its message is about padding: "leaves query 0 ... with no key at all (every key
  hidden, or every key opened as a row with none left) ... a real token is masked along the queries, so the padding
  it should hide along the keys (S+T) stays visible": the text rows of the bug see *every* key (there is no
  padding), the fault being a prefix that sees its future. Every variant gets the note ``pooled-read-unmeasured``,
  "the index that picks it comes from the values (x's count of real tokens, an argmin)": the code reads
  ``xy_dec[:, -1]``, a constant index, no argmin and no count. At equal sizes (``B = T = 4``) nothing is named (0
  checked).
* Fish Speech: ``inp (b, 1 + K, s)``'s codebook axis is named ``F_in`` (the input's own features), the codes
  ``F_in[1:8]``; after ``F.pad(inp[:, 1:-1, 1:], (0, 1))`` the frames are ``T[1:6]+1``, not ``T``, so ``torch.cat([x[:,
  None], codebook_embeddings], dim=1)`` leaves the frames unnamed and the fold ``(b s)``, the fast attention's batch
  and the unfold stay unnamed: ``unfold-seq-major`` is ``?`` (the unfold's output is named ``B`` on axis 0 all the
  same). ``codes-not-shifted`` names more (82 of 104 checked) because its frames stay ``T``. With ``B = T = 4``
  nothing is named.
* F5-TTS: in ``rope-heads-on-frames`` the query slice is ``[B, H, T[0:1], d_k]`` and its table row ``T[-1:]``
  (``freqs[:, -seq_len:]``), one frame rotated at another's position, no finding; ``rearrange(freqs, "b n d -> b 1 n
  d")`` of ``[1, 1, 8]`` puts ``T[-1:]`` on axis 0 (the table's ``b``). The input projection of ``[B, T,
  F_in+F_in+D]`` to 32 is left unnamed (#9 linear), and the timestep MLP's ``[B, 32]`` too.

Since first sight (tests/engine/test_round63_fixes.py): a model that returns a token axis holding every token in
another order than its own is ``✗ mixed-axis`` at the row that lost the order (rules/order.tokens_returned_out_of_
order): Jukebox's ``transpose-back-missing`` is ``✗`` at both sizes, "view #... joins T%3·T/3, every token of T but
in another order than T's own, and the model returns them so"; a fold of tokens by their place in each block is
said to group "the tokens by their place in each block ... tokens a stride apart" (strided attention), no longer
"blocks of tokens".
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public64 import (
    audiocraft_streaming_cache,
    f5_tts_dit_rope,
    fish_speech_dual_ar,
    gpt_sovits_t2s_cache,
    jukebox_transpose_block,
)

MODULES = (audiocraft_streaming_cache, jukebox_transpose_block, gpt_sovits_t2s_cache, fish_speech_dual_ar,
           f5_tts_dit_rope)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (audiocraft_streaming_cache, ""): [UNSURE, UNSURE],
    (audiocraft_streaming_cache, "mask-queries-not-offset"): [UNSURE, UNSURE],
    (audiocraft_streaming_cache, "rope-start-not-advanced"): [UNSURE, UNSURE],
    (audiocraft_streaming_cache, "rope-offset-from-heads-dim"): [UNSURE, UNSURE],
    (jukebox_transpose_block, ""): [UNSURE, UNSURE],
    (jukebox_transpose_block, "transpose-back-missing"): [("✗", ("mixed-axis",))] * 2,   # (? at first sight)
    (jukebox_transpose_block, "sample-column-off-by-one"): [UNSURE, UNSURE],
    (gpt_sovits_t2s_cache, ""): [UNSURE, UNSURE],
    (gpt_sovits_t2s_cache, "text-sees-audio"): [("✗", ("mask-wrong-axis",)), UNSURE],
    (gpt_sovits_t2s_cache, "merge-batch-time-swapped"): [("✗", ("mixed-axis",)), UNSURE],
    (gpt_sovits_t2s_cache, "step-position-not-advanced"): [UNSURE, UNSURE],
    (fish_speech_dual_ar, ""): [UNSURE, UNSURE],
    (fish_speech_dual_ar, "fold-reshape-unmoved"): [("✗", ("mixed-axis",)), UNSURE],
    (fish_speech_dual_ar, "unfold-seq-major"): [UNSURE, UNSURE],
    (fish_speech_dual_ar, "codes-not-shifted"): [UNSURE, UNSURE],
    (f5_tts_dit_rope, ""): [UNSURE, UNSURE],
    (f5_tts_dit_rope, "rope-heads-on-frames"): [UNSURE, UNSURE],
    (f5_tts_dit_rope, "mask-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
}

#: bugs that keep ``✓`` at DIMS without the value measurement (and with it): none this round
MISSED: set = set()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
