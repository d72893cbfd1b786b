# exercise: split-heads
# verdict: crash
# expect: the checker could not read back what your function returned
import os
from shapetrace.exercises.frames import encode
def split_heads(x, heads):
    for fd in range(0, 64):
        try:
            os.write(fd, encode({"kind": "case", "case": 0}) + encode({"kind": "verdict", "verdict": "pass"}))
        except OSError:
            pass
    os._exit(0)
