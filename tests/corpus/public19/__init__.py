"""A nineteenth round of public-style files (tests/corpus/public19): the Synthesizer's dense and random synthesized
attention, FLASH's gated attention unit, cosFormer's reweighted linear attention, Conditional DETR's concatenated
content/position cross-attention, RT-DETR's AIFI with its 2-D sin-cos embedding, SASRec's and BERT4Rec's item
sequences, gMLP's spatial gating unit, TinyViT's window attention with offset-indexed biases and the Audio
Spectrogram Transformer's overlapping patches, from code bases not in the corpus before, each a script for
``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug follows a public bug report or an easy
slip of the idiom, said in the file."""
