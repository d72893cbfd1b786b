"""Multi-head attention written as separate single-head modules of one ``nn.ModuleList`` joined on the features
(tests/corpus/modheads): the teaching style of Karpathy's lecture and of rasbt's book, from further public code,
each a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug is a natural slip of
the idiom, said in the file."""
