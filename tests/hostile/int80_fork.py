# exercise: split-heads
# verdict: crash
# expect: signal 31
# Round 7 (issue 34): fork(2) by its i386 number through `int 0x80`, the classic way past a seccomp filter that
# reads x86-64 numbers alone: this kernel runs i386 calls from a 64-bit process, and without the filter the
# fork gets through (tests/exercises/test_sandbox_layers.py). libseccomp checks the architecture first and
# kills the call (SIGSYS): the checker's process dies, the learner's crash.
import ctypes, mmap, os
code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
code.write(bytes([0xB8, 2, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 2 (i386 fork); int 0x80; ret
if ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(code)))() == 0:
    import time
    time.sleep(31.4159)  # a daemon, had it got through
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)
