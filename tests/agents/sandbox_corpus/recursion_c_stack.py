# expect: stop_reason=killed; signal=11
# limits: wall_s=8 cpu_s=5
# modes: bwrap unsafe
# outside: stop_reason=killed|error
# Recursion limit lifted, then a C-level recursion (repr of deeply nested lists) overflows the
# C stack: the process dies by SIGSEGV, and only it. (Where the sandbox caps the recursion limit,
# a RecursionError is as good an end: the outside judge accepts either.)
import sys

sys.setrecursionlimit(10**8)
nested = []
for _ in range(10**6):
    nested = [nested]
print(len(repr(nested)))
