"""Never touches a tensor (used by tests/test_runner.py)."""

print("hello, no tensors here")
