"""The attention models shapetrace traces: the reference, its variants, the bug catalogue, presets.

Built on :mod:`shapetrace.engine` only.
"""
