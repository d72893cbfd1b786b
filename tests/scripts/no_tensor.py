"""Never touches a tensor (used by tests/app/test_runner.py)."""

print("hello, no tensors here")
