# expect: ok; stdout_contains=refused 5; stdout_contains=own signal ok; canary_alive
# modes: bwrap unsafe
# The same targets with signal 0 (delivers nothing, so safe without namespaces): all refused,
# while a signal to the process itself still works.
import os
import signal

refused = 0
for name, attempt in {
    "parent": lambda: os.kill(os.getppid(), 0),
    "everyone": lambda: os.kill(-1, 0),
    "own group": lambda: os.killpg(0, 0),
    "pid 1": lambda: os.kill(1, 0),
    "host test pid": lambda: os.kill(int("@HOST_PID@"), 0),
}.items():
    try:
        attempt()
        print("SENT", name)
    except OSError as err:
        refused += 1
        print(name, "->", err)
print(f"refused {refused}")
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
os.kill(os.getpid(), signal.SIGUSR1)
print("own signal ok" if got else "own signal LOST")
