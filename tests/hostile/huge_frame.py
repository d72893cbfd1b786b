# exercise: split-heads
# verdict: crash
# expect: frame of
# A frame that claims a gigabyte body: refused from its length, before anything is buffered.
import os, struct, json
def split_heads(x, heads):
    text = json.dumps({"kind": "case", "case": 0}).encode()
    frame = b"STF1" + struct.pack(">I", len(text)) + text + struct.pack(">Q", 1 << 30) + b"\0" * 65536
    for fd in range(0, 16):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
