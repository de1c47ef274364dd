# expect: stdout_contains=main done; stdout_contains=background 0; wall_max=1.5
# modes: bwrap unsafe
# A daemon thread keeps printing while the code returns: the run ends with the code, whatever the
# thread was writing (a daemon thread holding the stdout lock at shutdown may make Python abort).
import threading
import time


def chatter():
    i = 0
    while True:
        print("background", i)
        i += 1
        time.sleep(0.001)


threading.Thread(target=chatter, daemon=True).start()
time.sleep(0.1)
print("main done", flush=True)
