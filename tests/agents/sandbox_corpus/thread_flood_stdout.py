# expect: stop_reason=output_limit; stdout_truncated; wall_max=5
# modes: bwrap unsafe
# Background threads flood stdout and stderr while the main flow sleeps: the output cap stops it.
import os
import threading
import time


def flood(fd):
    line = b"y" * 65536
    while True:
        os.write(fd, line)


threading.Thread(target=flood, args=(1,), daemon=True).start()
threading.Thread(target=flood, args=(1,)).start()
time.sleep(3600)
