# expect: stop_reason=exited|error; stdout_contains=inotify instances; stdout_not_contains=EXHAUSTED
# modes: bwrap
# inotify instances and watches are counted per host uid (fs.inotify.max_user_instances and
# max_user_watches): a jail that is host root shares root's and could drain them. Instances until
# refused (EMFILE before the run's open-files limit is the per-uid pool), then watches on /usr and on
# new scratch files until ENOSPC (the per-uid pool) or 2.5 s.
import ctypes
import errno
import os
import resource
import time

IN_MODIFY, NR_INOTIFY_INIT1 = 0x2, 294
libc = ctypes.CDLL(None, use_errno=True)
start = time.monotonic()
base = len(os.listdir("/proc/self/fd"))
fds, error = [], 0
for _ in range(1000):
    fd = libc.syscall(NR_INOTIFY_INIT1, os.O_CLOEXEC)
    if fd < 0:
        error = ctypes.get_errno()
        break
    fds.append(fd)
print("inotify instances", len(fds), "then", errno.errorcode.get(error, error))
if error == errno.EMFILE and base + len(fds) < resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 2:
    print("EXHAUSTED the per-uid inotify instances")
for fd in fds[1:]:  # one instance is enough for the watches, and files need descriptors
    os.close(fd)
watches, error = 0, 0


def paths():
    for root, _, names in os.walk("/usr"):
        yield root
        yield from (os.path.join(root, name) for name in names)
    for i in range(1_000_000):
        open(f"w{i}", "w").close()
        yield f"w{i}"


if fds:
    for path in paths():
        if time.monotonic() - start > 2.5:
            break
        if libc.inotify_add_watch(fds[0], path.encode(), IN_MODIFY) < 0:
            error = ctypes.get_errno()
            if error == errno.ENOSPC:
                break
            continue
        watches += 1
print("inotify watches", watches, "then", errno.errorcode.get(error, error))
if error == errno.ENOSPC:
    print("EXHAUSTED the per-uid inotify watches")
    time.sleep(0.5)  # held a moment, for the judge's prober to feel it
