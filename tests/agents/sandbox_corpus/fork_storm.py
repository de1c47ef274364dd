# expect: ok; stdout_contains=fork refused 200 times; stdout_not_contains=FORKED; no_leftover
# modes: bwrap unsafe
# A (bounded) fork storm: every os.fork() must fail with EPERM, so nothing is left behind.
import errno
import os
import time

refused = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as err:
        assert err.errno == errno.EPERM, err
        refused += 1
        continue
    if pid == 0:  # only reached if containment failed: linger as evidence, then go
        time.sleep(20)
        os._exit(0)
    print("FORKED", pid)
print(f"fork refused {refused} times")
