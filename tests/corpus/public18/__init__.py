"""An eighteenth round of public-style files (tests/corpus/public18): Phi-2's MixFormer, Qwen-1's ``c_attn`` with
``logn`` scaling, SAINT's intersample attention, iTransformer's inverted tokens, the Temporal Fusion Transformer's
interpretable attention, Graphormer's spatial bias, DIN's target attention, MobileViTv2's separable attention,
CoaT's factorized attention and CrossFormer's long/short-distance groups, from code bases not in the corpus before,
each a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug follows a public bug
report or an easy slip of the idiom, said in the file."""
