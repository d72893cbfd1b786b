"""Lessons, exercises, the answer checker, learner progress and the quiz (engine, no Rich).

Modules that need no tensors (``content``, ``progress``, ``checker``,
``answers``) never import torch, so ``shapetrace lessons`` and
``shapetrace exercise list`` stay fast. ``judge``, ``inputs``
and ``quiz`` import torch and run inside the checker's child process or the
quiz command.
"""
