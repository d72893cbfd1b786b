"""Round 48's public-style files: Latte's alternating spatial/temporal DiT blocks (video diffusion), torchaudio's
Conformer (time-major speech encoder), Qwen3-Next's gated attention (2025 LLM) and diffusers' Sana linear
attention processor (diffusion, ReLU linear attention over image tokens)."""
