# exercise: split-heads
# verdict: crash
# expect: No such file or directory
import json
from shapetrace.exercises.progress import state_dir
path = state_dir() / "progress.json"
path.write_text(json.dumps({"exercises": {"split-heads": {"ever_passed": True}}}))
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
