"""Graph attention whose output layer averages its heads on purpose (tests/corpus/test_public_headsmean.py)."""
