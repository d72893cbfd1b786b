"""The engine: recording, op knowledge, axis names, layout maths, meta rules, diagnostics, sentences.

Plain data only. Imports nothing of shapetrace but :mod:`shapetrace.errors` (a test enforces it).
"""
