# exercise: repeat-kv
# verdict: wrong-values
# expect: with a large input
# On the memory probe (the first call) writes a raw probe frame of its own on every descriptor: a float32
# tensor of shape [3], not the [B, H, T, d_k] expected. The parent compared it element by element with the
# expected output, and a shape that does not broadcast raised RuntimeError in the parent (an internal error).
import os
import struct
from shapetrace.exercises.frames import head
CALLS = []
def repeat_kv(kv, n_rep):
    if not CALLS:
        body = struct.pack("<3f", 1.0, 2.0, 3.0)
        for case in range(4, 16):
            frame = head({"kind": "probe", "case": case, "shape": [3], "dtype": "float32", "raw": True}, len(body))
            for fd in range(64):
                try:
                    os.write(fd, frame + body)
                except OSError:
                    pass
    CALLS.append(1)
    B, H_kv, T, d_k = kv.shape                             # (B, H_kv, T, d_k)
    kv = kv[:, :, None].expand(B, H_kv, n_rep, T, d_k)     # (B, H_kv, n_rep, T, d_k)
    return kv.reshape(B, H_kv * n_rep, T, d_k)             # (B, H, T, d_k)
