"""A fourteenth round of public-style files (tests/corpus/public14): mask-unit and locally grouped vision
attention, patch unfolding and folding, ReLU linear attention, interleaved return/state/action tokens, value
embeddings mixed into values, clipped fused qkv, gated cross-attention over image tokens, pooled queries over
full-length keys, from code bases not in the corpus before, each a script for ``shapetrace trace`` and a
``build(bug, **sizes)`` for the tests; each bug follows a public bug report or an easy slip of the idiom, said in
the file."""
