# expect: stop_reason=timeout; stdout_contains=setsid refused; stdout_contains=setpgid refused
# limits: wall_s=1.5
# modes: bwrap unsafe
# Leave the process group the parent kills, then sleep past the deadline: setsid and setpgid are
# refused, and the test then finds no process of the run alive.
import os
import time

for name, attempt in (("setsid", os.setsid), ("setpgid", lambda: os.setpgid(0, 0))):
    try:
        attempt()
        print("LEFT the group via", name)
    except OSError as err:
        print(name, "refused:", err)
time.sleep(60)
