"""A fifty-first round of public-style files (tests/corpus/public51: rotary embeddings whose pairing a flag of the
model declares), traced at distinct sizes and at equal sizes, first sight recorded on 03e5a70 (main plus the
files):

* flash_rotary_flag — Dao-AILab/flash-attention ``flash_attn/layers/rotary.py`` (``RotaryEmbedding(dim,
  interleaved=...)``, ``apply_rotary_emb_torch`` slicing ``x[..., :ro_dim]`` twice, ``einops.repeat`` tables) and
  ``flash_attn/modules/mha.py`` (packed ``qkv``); the bug ``flag-dropped``: the module says interleaved (a GPT-J
  checkpoint) and the call rotates by halves;
* megatron_rotary_config — NVIDIA/Megatron-LM ``rotary_pos_embedding.py`` / ``rope_utils.py`` (``[s, b, h, d]``,
  ``config.rotary_interleaved``); the bug ``config-ignored``: the layer builds and applies its rotary with the
  defaults (halves) while its config says interleaved.

Both bugs follow vllm-project/vllm-ascend pull request #12820 (tests/corpus/reports32/vllm_ascend_mrope_style.py):
a model's pairing flag ignored where the rotation runs, the table and the rotation agreeing with each other.

================= ================= =============================== ===================================
file              variant           first sight (DIMS | equal)      after (DIMS | equal)
================= ================= =============================== ===================================
flash_rotary_flag (correct)         ? | ?                           ? | ?
flash_rotary_flag flag-dropped      ? | ?                           ! rotary-pairing-declared (both)
flash_rotary_flag neox, partial     ? | ?                           ? | ?
megatron_rotary.. (correct)         ✓ | ?                           ✓ | ?
megatron_rotary.. config-ignored    **✓** | ?                       ! rotary-pairing-declared (both)
megatron_rotary.. halves-config     ✓ | ?                           ✓ | ?
================= ================= =============================== ===================================

The fixes (tests/engine/test_rotary_declared.py; each test fails on 03e5a70):

* shapetrace/engine/modules.py ``declared_pairings`` and shapetrace/engine/rules/rotary.py: the flags by which a
  module says how its rotary pairs features (``is_neox_style``, ``interleaved``, ``rotary_interleaved``; a bool, on
  the module or one level into its settings) are read after the run, as ``is_decoder`` is, and the nearest module
  around a rotation that holds one is compared with the pairing the rotation's data moves give:
  ``rotary-pairing-declared`` (a warning: the flag may be stale, but then the model says otherwise than it runs).
* shapetrace/engine/same_moves.py: flash-attn's rotary slices its input twice, so the rotated tensor was not found
  to be made from the one multiplied by ``cos``, and no rotary was found at all in flash_rotary_flag (neither this
  bug nor a table laid out for the other pairing). Two calls of one op on the same operands with the same
  arguments that only move elements are twins, and the rotation is replayed from either.

Why the flash files stay ``?``: ``torch.stack((q, k, v), dim=2)`` after the rotation has an axis of three entries
that no name covers (each entry is computed, not moved), nor does the ``rearrange`` that unbinds it. At equal sizes
(B = T = H = 4) the input reads ``[B, T, D]`` or ``[T, B, D]`` alike.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public51 import flash_rotary_flag, megatron_rotary_config

MODULES = (flash_rotary_flag, megatron_rotary_config)
UNSURE, SURE = ("?", ()), ("✓", ())
DECLARED = ("!", ("rotary-pairing-declared",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (flash_rotary_flag, ""): [UNSURE, UNSURE],
    (flash_rotary_flag, "flag-dropped"): [DECLARED, DECLARED],
    (flash_rotary_flag, "neox"): [UNSURE, UNSURE],
    (flash_rotary_flag, "partial"): [UNSURE, UNSURE],
    (megatron_rotary_config, ""): [SURE, UNSURE],
    (megatron_rotary_config, "config-ignored"): [DECLARED, DECLARED],
    (megatron_rotary_config, "halves-config"): [SURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
