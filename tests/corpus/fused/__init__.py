"""Corpus files with a fused projection split into more pieces than q, k and v (tests/corpus/test_fused_pieces.py)."""
