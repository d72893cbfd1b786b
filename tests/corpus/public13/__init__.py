"""A thirteenth round of public-style files (tests/corpus/public13): local/global and chunked masks, windowed
vision attention, 2-D and 3-D rotary tables, register tokens, FlexAttention's eager ``score_mod``/``mask_mod``,
block-sparse bands and a KV-cached library MHA, from code bases not in the corpus before, each a script for
``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug follows a public bug report or an
easy slip of the idiom, said in the file."""
