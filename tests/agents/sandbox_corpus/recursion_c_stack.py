# expect: stop_reason=error; stderr_contains=RecursionError; stderr_contains=capped at 10000; wall_max=2
# modes: bwrap unsafe
# Recursion limit lifted, then a C-level recursion (repr of deeply nested lists) that would overflow
# the C stack: the sandbox caps the limit (and says so), so it fails fast with RecursionError.
import sys

sys.setrecursionlimit(10**8)
nested = []
for _ in range(10**6):
    nested = [nested]
print(len(repr(nested)))
