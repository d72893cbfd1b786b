"""A tenth round of public-style files (issue 33): transformers' SDPA path over a left-padded batch
(``models/mistral/modeling_mistral.py`` with the boolean 4-D mask ``modeling_attn_mask_utils.py`` builds and
``AttentionMaskConverter._unmask_unattended`` opens). Each is a script for ``shapetrace trace`` and a
``build(bug, **sizes)`` for the tests; each bug follows a public report or an easy slip of the idiom, cited
in the file."""
