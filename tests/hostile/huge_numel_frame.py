# exercise: split-heads
# verdict: crash
# expect: the checker could not read back what your function returned
# Round 5: a case frame whose result tensor has four sizes of 2**31 on a stride of 0: each size within its
# bound, their product past what torch counts, so rebuilding it (as_strided) raised RuntimeError in the parent:
# an internal error, no verdict. A shape whose element count overflows is now refused: the learner's crash.
# (torch's own size check answers "numel: integer multiplication overflow": it raised that, uncaught.)
import json, os
from shapetrace.exercises.frames import encode
from shapetrace.exercises.plain import pack
def split_heads(x, heads):
    body = pack({"value": x.new_zeros(1), "args": [x, heads]}, {"output": "", "output_total": 0})
    n = int.from_bytes(body[:4], "big")
    head = json.loads(body[4:4 + n])
    head["values"]["value"].update(shape=[1 << 31] * 4, stride=[0] * 4)
    text = json.dumps(head).encode()
    frame = encode({"kind": "case", "case": 0}, len(text).to_bytes(4, "big") + text + body[4 + n:])
    for fd in range(0, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
