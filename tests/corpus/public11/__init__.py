"""An eleventh round of public-style files (tests/corpus/public11): twelve code bases not in the corpus before,
each a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug follows a public
bug report or an easy slip of the idiom, said in the file."""
