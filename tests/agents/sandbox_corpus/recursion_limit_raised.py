# expect: stop_reason=error; exit_code=1; stderr_contains=RecursionError; wall_max=1.5
# modes: bwrap unsafe
# The recursion limit lifted, then unbounded Python recursion: it must fail fast with RecursionError,
# not fill the address space frame by frame until the wall.
import sys

sys.setrecursionlimit(10**9)


def f(n):
    return f(n + 1)


f(0)
