"""Multi-head attention written as sibling single-head modules of one ``nn.ModuleList``, joined on the features
(tests/corpus/modheads; each file's docstring cites the public code it follows), traced at their DIMS and at
B = T = H = 4, first sight recorded on eefe532 (the files run on the branch point, before engine/infer/module_heads).

* nlpwt_attention_head — nlp-with-transformers/notebooks ch. 3 (``AttentionHead`` of ``nn.Linear(embed_dim,
  head_dim)`` q, k, v; ``MultiHeadAttention`` cat and ``output_linear``), with the chapter's decoder mask;
* rasbt_blog_self_attention — rasbt's "Understanding and Coding Self-Attention..." (``SelfAttention`` with
  ``nn.Parameter`` weights, ``x @ W``, an unbatched ``[T, d_in]``; ``MultiHeadAttentionWrapper`` cat).

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, the same at DIMS):

=========================  ====================  ===================================  ==========================
file                       variant               first sight on eefe532 (DIMS/equal)  now (this commit)
=========================  ====================  ===================================  ==========================
nlpwt_attention_head       (correct)             ? / ?                                ✓ / ?
nlpwt_attention_head       softmax-over-queries  ✗ softmax-wrong-axis / ?             unchanged
nlpwt_attention_head       scale-embed-dim       ! scale-not-head-dim / ?             unchanged
rasbt_blog_self_attention  (correct)             ? / ?                                ✓ / ✓
rasbt_blog_self_attention  cat-on-tokens         ? / ?                                unchanged
rasbt_blog_self_attention  one-head-for-all      ? / ?                                unchanged
=========================  ====================  ===================================  ==========================

Each head's projection width (``[B, T, 8]``, 8 the size of d_k) had no name: a size never decides one
(engine/axis_compute.projected_width), so the heads' products, softmax, weighted sums and the cat were unchecked.
engine/infer/module_heads names them from the structure: a cat on the features of H parts, each ``softmax(q @
kᵀ) @ v`` of its own projections (``nn.Linear``, or ``x @ W`` of a parameter) in H distinct instances of one
class in one list, reading one input: each width is d_k, the cat H·d_k. rasbt's blog at equal sizes is ✓ too:
its input ``[T, D]`` has no batch, so nothing there is decided by T = H (the seed fits one way; the head count is
the list's, not a size).

Open: both rasbt bugs stay ``?`` (no ✓): a cat of the heads along the tokens and one head's output joined four
times are no multi-head layout the structure proves, so nothing is named, and no rule reads either as a finding.
nlpwt at equal sizes is ``?`` (B = T: the input's seed fits two ways).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.modheads import nlpwt_attention_head, rasbt_blog_self_attention

MODULES = (nlpwt_attention_head, rasbt_blog_self_attention)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (nlpwt_attention_head, ""): [OK, UNSURE],
    (nlpwt_attention_head, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",)), UNSURE],
    (nlpwt_attention_head, "scale-embed-dim"): [("!", ("scale-not-head-dim",)), UNSURE],
    (rasbt_blog_self_attention, ""): [OK, OK],
    (rasbt_blog_self_attention, "cat-on-tokens"): [UNSURE, UNSURE],
    (rasbt_blog_self_attention, "one-head-for-all"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(nlpwt_attention_head, ""), (rasbt_blog_self_attention, "")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
