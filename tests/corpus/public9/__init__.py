"""A ninth round of public-style files (issue 33): the fused multi-query and grouped projections of Falcon
(transformers ``models/falcon/modeling_falcon.py``, ``FalconAttention._split_heads``) and a head width set
apart from D / H (transformers ``models/gemma2/modeling_gemma2.py``); masks in the shapes transformers hands them
in (DistilBERT's ``expand_as(scores)``, BART's ``[bsz, 1, tgt, src]``); decode steps with caches (meta-llama's
static cache, transformers' DynamicCache) and Bloom's ALiBi. Each is a script for
``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug follows a public report or an easy
slip of the idiom, cited in the file."""
