"""A fifteenth round of public-style files (tests/corpus/public15): divided space-time attention, transposed
(channel) attention on feature maps, cross-shaped stripe windows, 3-D shifted windows, a Q-Former's shared
query/text self-attention, a perceiver resampler over media frames, ProbSparse query selection, einops attention
with T5 buckets, partial rotary with per-head LayerNorm, fused ``W_pack`` with ALiBi, from code bases not in the
corpus before, each a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug follows
a public bug report or an easy slip of the idiom, said in the file."""
