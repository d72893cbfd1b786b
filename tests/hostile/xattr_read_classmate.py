# exercise: split-heads
# verdict: crash
# expect: No data available
# Round 4: the second half of xattr_tmp.py: holds no solution, reads a classmate's from /tmp and runs it.
import os
body = os.getxattr("/tmp", "user.solution").decode()
exec("def split_heads(x, heads):\n    B, T, D = x.shape\n    " + body)
