"""A twenty-first round of public-style files (tests/corpus/public21): Mistral's rolling-buffer sliding-window
cache, Jais's ALiBi with muP scaling, YaRN's scaled rotary, MPNet's relative position buckets, Hunyuan-Large's
cross-layer key/value sharing with QK-norm, and StreamingLLM's attention sinks with re-based positions, from code
bases not in the corpus before, each a script for ``shapetrace trace`` and a ``build(bug, **sizes)`` for the
tests; each bug follows a public bug report or an easy slip of the idiom, said in the file."""
