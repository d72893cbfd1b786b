"""A twelfth round of public-style files (tests/corpus/public12): vision, speech, encoder-decoder and library
code from eight code bases not in the corpus before, each a script for ``shapetrace trace`` and a
``build(bug, **sizes)`` for the tests; each bug follows a public bug report or an easy slip of the idiom, said
in the file."""
