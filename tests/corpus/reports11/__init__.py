"""Files after public bug reports, round 11 (each cites its report), for tests/corpus/test_public_reports11.py."""
