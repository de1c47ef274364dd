# expect: stop_reason=timeout; stdout_contains=before close
# limits: wall_s=1.5
# modes: bwrap unsafe
# Close stdin, stdout and stderr, then run on (a sleeping thread, a spinning main flow): the parent
# sees the pipes close but must still end the run at the wall and leave nothing behind.
import os
import threading
import time

print("before close", flush=True)
for fd in (0, 1, 2):
    os.close(fd)
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
while True:
    pass
