"""A seventh round of held-out style files, one per public source (issue 33): fairseq's
``MultiheadAttention``, DeBERTa-v2's disentangled attention, PVT's spatial-reduction attention,
Linformer, CaiT's class attention, Stable Diffusion 3's joint (MMDiT) attention, ChatGLM2, RetNet's
retention and the Set Transformer's PMA. Each is a script for ``shapetrace trace`` and a
``build(bug, **sizes)`` for the tests; each bug follows a public report or an easy slip of the idiom,
cited in the file. ``TWINS`` lists variants that look like a bug and are correct code."""
