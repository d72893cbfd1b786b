"""Round 44 of public-style files (tests/corpus/public44: a second round 42, renamed), for the causes that keep correct
files at ``?`` (a sweep of every round at first sight: correct ✓ 209 of 444, bugs ✓ 7 of 588): DiT's block
(facebookresearch/DiT models.py with timm's ``Attention``), a sinusoidal timestep embedding and an MLP made into
the adaLN-Zero shift, scale and gate of the tokens; Hugging Face's Perceiver (modeling_perceiver.py), learned
latents ``expand``\\ ed over the batch as the queries of a cross-attention, then a self-attention over them;
meta-llama's ``Attention`` with its cache, the mask ``hstack([zeros((seqlen, start_pos)), triu(full((seqlen,
seqlen), -inf), 1)])`` over a prefill then a chunk. Traced at distinct sizes and at equal sizes; first sight
recorded before any engine change, on be66702 (main 5afe940 plus the files).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS, on be66702; it also measures the dependency contracts):

================= =============================== ================================= ====================== ==========
file              variant                         distinct (first sight)            equal (first sight)    CLI
================= =============================== ================================= ====================== ==========
dit_block         (correct)                       ? 16 of 28 (the timestep MLP)     ?                      ? 15 of 28
dit_block         qkv-permute-heads-last          ✗ attends-over-wrong-axis,        ✗ attends-over-wrong-  ✗
                                                  mixed-axis                        axis, broadcast-mism.
perceiver_latents (correct)                       ? 8 of 38 (the latents)           ?                      ? 8 of 38
perceiver_latents cross-scores-heads-unsplit-keys ✗ mixed-axis                      ✗ contracts-different- ✗
                                                                                    axes, batch-mismatch
llama_cache_mask  (correct)                       ? 29 of 45 (the prompt)           ?                      ? 29 of 45
llama_cache_mask  mask-cache-last                 ? 29 of 45                        ?                      ? 29 of 45
================= =============================== ================================= ====================== ==========

At first sight: the 3 correct files ✓ 0, ? 3, ✗ 0; the 3 bugs ✗ 2, ? 1, ✓ 0. The round's engine fix, 1ff0138
(``Tensor.new_ones`` / ``new_zeros`` / ``new_full`` / ``new_empty`` made from sizes read from axes are named as
``torch.ones`` is: tests/engine/test_infer_sizes.py), changes none of these rows (none of the three calls a
``new_*`` method) and, in a sweep of every round at its first DIMS, no other row either: correct ✓ 209 of 444 and
bugs ✓ 7 of 588 before and after.

A second change was tried and left out: a size of 1 read from an axis (a decoding step's ``x.size(1)``) taken as a
size-1 axis in ``torch.ones(seqlen, total).tril(offset)``, as a literal 1 already is, names the decoding step's
mask ``[1, T+1]`` and makes reports2.cached_causal_tril and reports8.m2m100_positions_past ✓, but also that file's
bug ``positions-without-past``: the decoding step's positions, one looked-up row of a sinusoidal table, are checked
by nothing, and only the unnamed mask kept the bug at ``?``.

Why each stays ``?``:

* dit_block: ``timestep_embedding``'s frequencies ``arange(0, half)`` have a literal size, so the ``[B, 256]``
  Fourier features and the timestep MLP's ``[B, D]`` output have no name; the adaLN ``Linear(D, 6·D)`` and its
  ``chunk(6)`` follow unnamed. What names them is their use, ``x * (1 + scale.unsqueeze(1))`` on ``[B, T, D]``
  tokens, and a pin from that use reaches the ``chunk``'s pieces only (a piece of an unnamed width is not the
  whole axis): the MLP's output, which is what would carry the name on, stays unnamed.
* perceiver_latents: the latents ``[S, D]`` are a parameter; ``expand(batch_size, -1, -1)`` names B (a size read
  from the inputs) but nothing names S (no input has that axis; the declared S = 3 is a size, and equal sizes
  never decide), so the cross-attention's queries, scores and the whole latent self-attention stay unnamed.
* llama_cache_mask: the prompt ``[B, 3, D]`` has no declared size (T = 4 is the chunk's), so the prefill is
  unnamed; at the chunk, ``zeros((seqlen, start_pos))`` reads ``start_pos`` as an argument (an int, not a size
  read from an axis), so the hstacked mask ``[T, P+T]`` has no names and the ``mask-cache-last`` bug (the
  triangle over the cached keys) is not seen: a rule reading which keys the mask hides on its values would decide
  it, not a name.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public44 import dit_block, llama_cache_mask, perceiver_latents

MODULES = (dit_block, perceiver_latents, llama_cache_mask)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (dit_block, ""): [UNSURE, UNSURE],
    (dit_block, "qkv-permute-heads-last"): [("✗", ("attends-over-wrong-axis", "mixed-axis")),
                                            ("✗", ("attends-over-wrong-axis", "broadcast-mismatch"))],
    (perceiver_latents, ""): [UNSURE, UNSURE],
    (perceiver_latents, "cross-scores-heads-unsplit-keys"): [("✗", ("mixed-axis",)),
                                                             ("✗", ("contracts-different-axes", "batch-mismatch"))],
    (llama_cache_mask, ""): [UNSURE, UNSURE],
    (llama_cache_mask, "mask-cache-last"): [UNSURE, UNSURE],
}

#: no row changed at equal sizes: those outcomes are the table above, measured once (the suite's time is a budget)
EQUAL_TESTED = set()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
