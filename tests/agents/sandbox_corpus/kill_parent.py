# expect: ok; stdout_contains=refused 5; canary_alive
# modes: bwrap
# SIGKILL aimed at the parent, at every process (-1), at the process group, at pid 1 and at the
# test's own pid: all refused, and the host (a canary process the test runs) is unaffected.
import os

refused = 0
for name, attempt in {
    "parent": lambda: os.kill(os.getppid(), 9),
    "everyone": lambda: os.kill(-1, 9),
    "own group": lambda: os.killpg(0, 9),
    "pid 1": lambda: os.kill(1, 9),
    "host test pid": lambda: os.kill(int("@HOST_PID@"), 9),
}.items():
    try:
        attempt()
        print("SENT", name)
    except OSError as err:
        refused += 1
        print(name, "->", err)
print(f"refused {refused}")
