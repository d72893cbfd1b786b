"""A thirty-first round of files after public bug reports (tests/corpus/reports31; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED``, at equal sizes too (B = T = H = 4;
the other rows' equal-size outcomes were measured once and are kept in the table: the suite's time is a
budget). First sight recorded on d118e3c (main at 781b178 plus the round's files). The round leans on code
families the corpus holds little of: a speech Conformer, a diffusion U-Net's IP-Adapter attention, Whisper's
flash-attention path, a Dynamic Memory Network ported from TensorFlow.

* openspeech_conformer_scale — openspeech-team/openspeech pull request #182 (issue #176; the same fix in
  sooftware/conformer pull request #55): the Conformer's relative-position attention divided its scores by
  ``sqrt(dim)`` (the model width) instead of ``sqrt(d_head)``;
* diffusers_ip_adapter_batch — huggingface/diffusers issue #9813 (fix proposed in pull request #13959): image
  embeddings repeated once per prompt again, ``(B·B, N, D)``, folded into the image tokens by the
  IP-Adapter processor's ``view(batch_size, -1, heads, head_dim)``: each latent attends to every prompt's image;
* whisper_fa2_mask_cut — huggingface/transformers pull request #36477: ``WhisperFlashAttention2`` cut the 2-D
  padding mask to ``key_states.shape[-2]`` (the heads, in the flash layout) instead of ``shape[-3]``;
* dmn_gate_softmax_batch — therne/dmn-tensorflow issue #6: the episodic module's gate of each fact softmaxed
  across the batch instead of across the facts.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also traces ``build`` and measures the dependency contracts,
in the last column).

==========================  =========================  ==============================  ==============================
file                        variant                    round_outcome d118e3c           CLI on d118e3c
==========================  =========================  ==============================  ==============================
openspeech_conformer_scale  (correct)                  ? / ?                           ? 23 of 34
openspeech_conformer_scale  scale-by-model-dim         ! scale-not-head-dim /          ! scale-not-head-dim
                                                       ! scale-not-head-dim
diffusers_ip_adapter_batch  (correct)                  ✓ / ?                           ✓ all 48
diffusers_ip_adapter_batch  embeds-repeated-per-batch  ? / ?                           ? 41 of 48 (#0 cat unnamed)
whisper_fa2_mask_cut        (correct)                  ? / ?                           ? 37 of 51
whisper_fa2_mask_cut        mask-cut-by-heads          ? / ?                           ? 37 of 51
dmn_gate_softmax_batch      (correct)                  ? / ?                           ? 26 of 32
dmn_gate_softmax_batch      gate-softmax-over-batch    ? / ?                           ? 40 of 46
==========================  =========================  ==============================  ==============================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 1, ? 3, ✗ 0 (the CLI the same); the 4 bugs
? 3, ! 1, ✗ 0, ✓ 0 (the CLI the same). No check mark on a bug, but a near one: the same IP-Adapter bug written
with ``image_embeds.repeat(n, 1, 1)`` instead of ``torch.cat([image_embeds] * n)`` was ``✓ checked all 48 ops``
on 781b178 (the keys ``[B, H, B·N, d_k]`` named, and nothing judged a key axis holding the batch in a fold).

Fixed (two general mechanisms, each with its engine test that failed on 781b178):

* shapetrace/engine/rules/contracts.py ``sdpa_over_batch``: SDPA keys whose axis -2 is a fold holding a batch
  axis of more than one entry (``B·N``, read on the pieces the axis is made of) are ``attends-over-batch``, as
  a batch on axis -2 alone already was and as the matmul rule already read the key axis's pieces
  (tests/engine/test_contracts.py ``test_sdpa_keys_holding_the_batch_fold_attend_over_the_batch``; its
  one-copy twin stays silent);
* shapetrace/engine/infer/copies.py: a ``cat`` whose parts are all one tensor (``[x] * n``: the same captured
  node in every place) is the ``repeat`` it is, element for element, and its joined axis is named so
  (``2·B``, the copy index major); a join of different tensors keeps the join's rule (no name for blocks of one
  batch axis: the Set Transformer's heads) (tests/engine/test_copies.py).

After the round (this module): correct ✓ 1, ? 3, ✗ 0 (the CLI the same); bugs ✗ 1 (diffusers' fold, at DIMS
and at B = H = 4: ``✗ attends-over-batch``, the CLI too), ? 2, ! 1, ✓ 0.

Open (left alone, each a general gap; none is a check mark):

* openspeech_conformer_scale ``scale-by-model-dim`` is a warning (``!``): a scale that is not 1/sqrt(d_k) is a
  choice some models make (the rule's own wording). Its correct file is ``?``: the relative-offset table cut
  from the encoding buffer (``pe[:, center - T + 1: center + T]``, ``2T - 1`` offsets), its projection and
  the ``_relative_shift`` (a zero column, a view to ``(.., 2T, T)``, a row dropped, a cut) carry no names:
  relative offsets are not an axis the engine names yet.
* whisper_fa2_mask_cut: both ``?``. The unpadding gathers the ``(bsz·seq)`` rows by ``nonzero(mask.flatten())``
  and scatters them back: indices read from a mask's values, which no name follows, so the cut of the mask
  (``[:, :H]`` where ``[:, :T]`` was meant) reaches no named op. The dependency probe would see batch 1's
  outputs read batch 0's tokens, but it is not measured: the ``(B, T)`` mask input's axes stay unnamed. At
  equal sizes (T = H) the bug is no bug at all (the cut keeps every column).
* dmn_gate_softmax_batch ``gate-softmax-over-batch``: ``?``. The softmax runs along the named batch ``[B]``,
  but ``softmax-wrong-axis`` along a batch needs the weights to weigh values in a product or a sum (a softmax
  over the batch is right in a contrastive loss); here the gates enter the attention GRU's update elementwise
  (``g * GRUCell(f, h) + (1 - g) * h``) through calls without a row, and ``nn.GRUCell`` is not traced inside.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports31 import (
    diffusers_ip_adapter_batch,
    dmn_gate_softmax_batch,
    openspeech_conformer_scale,
    whisper_fa2_mask_cut,
)

MODULES = (openspeech_conformer_scale, diffusers_ip_adapter_batch, whisper_fa2_mask_cut, dmn_gate_softmax_batch)
UNSURE, SURE = ("?", ()), ("✓", ())
SCALE = ("!", ("scale-not-head-dim",))
OVER_BATCH = ("✗", ("attends-over-batch",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (openspeech_conformer_scale, ""): [UNSURE, UNSURE],
    (openspeech_conformer_scale, "scale-by-model-dim"): [SCALE, SCALE],
    (diffusers_ip_adapter_batch, ""): [SURE, UNSURE],
    (diffusers_ip_adapter_batch, "embeds-repeated-per-batch"): [OVER_BATCH, OVER_BATCH],
    (whisper_fa2_mask_cut, ""): [UNSURE, UNSURE],
    (whisper_fa2_mask_cut, "mask-cut-by-heads"): [UNSURE, UNSURE],
    (dmn_gate_softmax_batch, ""): [UNSURE, UNSURE],
    (dmn_gate_softmax_batch, "gate-softmax-over-batch"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(diffusers_ip_adapter_batch, "embeds-repeated-per-batch")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
