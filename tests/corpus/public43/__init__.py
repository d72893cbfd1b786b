"""A forty-third round of public-style files (tests/corpus/test_public_round43.py)."""
