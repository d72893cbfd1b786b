# exercise: split-heads
# verdict: crash
# expect: wrote over the checker's channel
# A frame whose 4 KiB header is 2,040 nested arrays: parsing it recursively blew Python's recursion
# limit in the parent (an internal error, no verdict). The header's depth is capped, so it is a frame
# the checker refuses: the learner's crash. (Depth bombs in the style of the JSON-parser fuzzing reports,
# e.g. CPython issue 12017, "Fix segfault in json.loads() while decoding highly-nested objects".)
import os, struct
def split_heads(x, heads):
    text = b"[" * 2040 + b"]" * 2040
    frame = b"STF1" + struct.pack(">I", len(text)) + text + struct.pack(">Q", 0)
    for fd in range(0, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
