"""A tenth round of public-style files (issue 33): transformers' SDPA path over a left-padded batch
(``models/mistral/modeling_mistral.py`` with the boolean 4-D mask ``masking_utils.py`` builds, the rows of
the queries with no key left opened) and GPT-NeoX's ``torch.where(causal_mask, scores, mask_value)``
(``models/gpt_neox/modeling_gpt_neox.py``). Each is a script for ``shapetrace trace`` and a
``build(bug, **sizes)`` for the tests; each bug follows an easy slip of the idiom, said in the file."""
