# exercise: split-heads
# verdict: crash
# expect: wrote over the checker's channel
# Round 5: a case frame numbered 0.0: the parent tested "0.0 in range(7)" (true) and then indexed its list of
# cases with it: TypeError, an internal error. Every header field the checker reads is now typed where it
# enters (a float, a bool or a list where the child writes an int or a string): the learner's crash.
import os
from shapetrace.exercises.frames import encode
from shapetrace.exercises.plain import pack
def split_heads(x, heads):
    frame = encode({"kind": "case", "case": 0.0}, pack({"value": x, "args": [x, heads]}, {"output": ""}))
    for fd in range(0, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
