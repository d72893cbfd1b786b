"""A twentieth round of public-style files (tests/corpus/public20): RWKV-4's time-mix, Hyena's FFT long
convolution, the FT-Transformer's feature tokens, the TabTransformer's column embeddings, the Memorizing
Transformer's kNN memory attention, Mamba-2's SSD as masked attention, gated linear attention's chunk form,
Griffin's local attention, Zamba's shared attention block and U-ViT's long skips, from code bases not in the
corpus before, each a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug
follows a public bug report or an easy slip of the idiom, said in the file."""
