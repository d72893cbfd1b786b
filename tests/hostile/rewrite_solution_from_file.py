# exercise: split-heads
# verdict: crash
# expect: No such file or directory
# The parent once ran a solution the child rewrote through a shared mapping.
import torch
from pathlib import Path
import shapetrace
SOL = Path(shapetrace.__file__).resolve().parents[1] / "lessons" / "01_split_heads" / "split-heads" / "solution.py"
t = torch.from_file(str(SOL), shared=True, size=16, dtype=torch.uint8)
t[:] = ord("#")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
