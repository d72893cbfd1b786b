"""Files after public bug reports, round 12 (each cites its report), for tests/corpus/test_public_reports12.py."""
