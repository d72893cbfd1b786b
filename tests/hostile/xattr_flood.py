# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 4: 720 MiB of extended attributes on a shared /dev/shm sat outside the check's memory cap.
import os
value = b"x" * (60 << 10)
for n in range(12288):
    os.setxattr("/dev/shm", f"user.flood{n}", value)
