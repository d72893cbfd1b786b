"""Files after public bug reports (each cites its report), for tests/corpus/test_public_reports.py."""
