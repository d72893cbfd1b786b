"""A ninth round of files after public bug reports (each cites its report), for
tests/corpus/test_public_reports9.py."""
