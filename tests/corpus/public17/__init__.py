"""A seventeenth round of public-style files (tests/corpus/public17): protein MSA and pair attention with a pair
bias, ESM-2's rotary and contact head, Chameleon's per-head q/k LayerNorm, Mask2Former's masked cross-attention,
Deformable DETR's sampled multi-scale attention, Idefics2's perceiver resampler, CogVLM's visual expert, Canine's
local character attention, Enformer's relative shift, pyGAT's dense graph attention and MEGABYTE's patches, from
code bases not in the corpus before, each a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the
tests; each bug follows a public bug report or an easy slip of the idiom, said in the file."""
