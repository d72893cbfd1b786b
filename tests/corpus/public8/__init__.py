"""An eighth round of held-out style files, one per public source (issue 33): Cohere's interleaved rotary,
Qwen2-VL's multimodal rotary (M-RoPE), HF BERT's ``relative_key_query`` distance embedding, Nystromformer's
landmarks, Performer's FAVOR+ linear attention, HF's flash-attention varlen path (``_upad_input``), DETR's
decoder, timm's MViTv2 pooling attention and NAT's unfold-based neighbourhood attention. Each is a script for
``shapetrace trace`` and a ``build(bug, **sizes)`` for the tests; each bug follows a public report or an easy
slip of the idiom, cited in the file. ``TWINS`` lists variants that look like a bug and are correct code."""
