"""A sixth round of held-out style files, one per public source (issue 33): Meta's llama ``model.py``,
GPT-BigCode's multi-query attention, Transformer-XL's relative attention, espnet's Conformer attention,
Segment Anything's windowed image encoder, CompVis latent diffusion's cross-attention, OLMo and
google's gemma_pytorch. Each is a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the
tests; each bug follows a public report or a classic mistake, cited in the file."""
