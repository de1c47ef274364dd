# expect: ok; stdout_contains=parked; stdout_not_contains=PARKED ALL
# modes: bwrap
# State parked on the scratch itself, where a wipe that removes only files leaves it: extended
# attributes on '.' and on many files (the review parked ~530 MiB so, and broke the next episode),
# and the directory's times and mode. The scratch's inode cap (which bounds xattrs too) stops the
# parking early; test_sandbox_outside checks that the next run and episode find none of it.
import errno
import os
import time

PARKED_TIME = 1_000_000_000  # the times '.' is given (2001): the next run's scratch must not have them
GOAL = 600 << 20
value = b"x" * 65536  # the largest xattr value
parked, stopped, start = 0, "", time.monotonic()
targets = iter(["."] + [f"f{i}" for i in range(100_000)])
try:
    while parked < GOAL and time.monotonic() - start < 2.5:
        target = next(targets)
        if target != ".":
            open(target, "w").close()
        for k in range(64):
            os.setxattr(target, f"user.park{k}", value)
            parked += len(value)
except OSError as err:
    stopped = errno.errorcode.get(err.errno, str(err.errno))
os.utime(".", (PARKED_TIME, PARKED_TIME))
os.chmod(".", 0o777)
st = os.stat(".")
print(f"parked {parked >> 20} MiB of xattrs, stopped by {stopped or 'time'}")
print("dot:", oct(st.st_mode & 0o7777), int(st.st_mtime), len(os.listxattr(".")), "xattrs")
if parked >= GOAL:
    print("PARKED ALL", parked >> 20, "MiB")
