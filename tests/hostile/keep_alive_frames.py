# exercise: split-heads
# verdict: timeout
# expect: was stopped
# Start frames every half second used to stretch a 2 s check to 92 s; the deadline is fixed now.
import os, time, gc
from shapetrace.exercises.frames import encode
def split_heads(x, heads):
    while True:
        for fd in range(0, 16):
            try:
                os.write(fd, encode({"kind": "start", "case": 0}))
            except OSError:
                pass
        time.sleep(0.3)
