# expect: stop_reason=exited|error; stdout_contains=files made; stdout_not_contains=MADE ALL
# modes: bwrap
# 600,000 empty files in the scratch (after such a run the review found the worker's memory cgroup
# left on the host after close()). The scratch's inode cap stops it early (ENOSPC); the judge checks
# that no cgroup of the Sandbox is left after close().
import errno
import os
import time

made, stopped, start = 0, "", time.monotonic()
try:
    for i in range(600_000):
        os.close(os.open(f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600))
        made += 1
    print("MADE ALL")
except OSError as err:
    stopped = errno.errorcode.get(err.errno, str(err.errno))
print("files made", made, "stopped by", stopped or "none", f"in {time.monotonic() - start:.2f} s")
