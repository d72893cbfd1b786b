"""A fifth round of held-out style files, one per public source (issue 33): CLIP's text tower, diffusers'
``Attention`` (heads folded into the batch), Whisper's encoder and decoder, BERT's self-attention with
its extended mask, MPT's ALiBi, DeepSeek-V2's latent attention, Swin v2's cosine attention, Perceiver's
latent cross-attention and xformers' reference attention. Each is a script for ``shapetrace trace``
(``python -m shapetrace trace tests/corpus/public5/clip_text.py --dims ... [bug]``) and a ``build(bug,
**sizes)`` for the tests; each bug follows a public report or a classic mistake, cited in the file."""
