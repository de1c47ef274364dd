# expect: ok; stdout_contains=main done; wall_max=1.5
# modes: bwrap unsafe
# Non-daemon threads that never end (one sleeping, one spinning) outlive the code's main flow: the
# run must end when the code ends, not at the wall.
import threading
import time


def spin():
    while True:
        pass


threading.Thread(target=time.sleep, args=(3600,)).start()
threading.Thread(target=spin).start()
print("main done", flush=True)
