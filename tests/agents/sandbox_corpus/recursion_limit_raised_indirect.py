# expect: stop_reason=error; exit_code=1; stderr_contains=RecursionError; wall_max=1.5
# expect: stdout_contains=caught mutual; stdout_contains=caught getattr; stdout_contains=caught json
# modes: bwrap unsafe
# The recursion limit lifted, then runaway recursion by other roads: mutual recursion, __getattr__
# calling itself, a deep JSON document, and (uncaught, last) recursion through C's map().
import json
import sys

sys.setrecursionlimit(2**31 - 1)


def a(n):
    return b(n + 1)


def b(n):
    return a(n + 1)


try:
    a(0)
except RecursionError:
    print("caught mutual", flush=True)


class Ghost:
    def __getattr__(self, name):
        return getattr(self, name + "x")


try:
    print(Ghost().boo)
except RecursionError:
    print("caught getattr", flush=True)
try:
    json.loads("[" * 10**6 + "]" * 10**6)
except RecursionError:
    print("caught json", flush=True)


def m(x):
    return list(map(m, [x]))


m(0)
