"""Files after public bug reports, round 7 (each cites its report), for tests/corpus/test_public_reports7.py."""
