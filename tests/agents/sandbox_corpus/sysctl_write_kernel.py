# expect: ok; stdout_not_contains=WROTE; stdout_not_contains=OPENED; stdout_contains=sysctl walk done
# modes: bwrap
# The host's kernel settings from inside the jail (a jail mapped to host root wrote them): core_pattern,
# pid_max and pipe-max-size, each written with the value it already holds (never a new one, so that
# even a jail that lets the write through changes nothing); drop_caches and sysrq-trigger, opened for
# writing only; then every file under /proc/sys that looks writable, opened for writing and closed.
import errno
import os
from collections import Counter

for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/pid_max", "/proc/sys/fs/pipe-max-size"):
    try:
        with open(path, "rb") as fh:
            current = fh.read()
        fd = os.open(path, os.O_WRONLY)
    except OSError as err:
        print(path, "->", err)
        continue
    print("OPENED", path)
    try:
        os.write(fd, current)
        print("WROTE", path, current)
    except OSError as err:
        print(path, "write ->", err)
    finally:
        os.close(fd)
for path in ("/proc/sys/vm/drop_caches", "/proc/sysrq-trigger"):
    try:
        os.close(os.open(path, os.O_WRONLY))
        print("OPENED", path)
    except OSError as err:
        print(path, "->", err)
tried, refusals = 0, Counter()
for root, dirs, names in os.walk("/proc/sys"):
    dirs[:] = [d for d in dirs if d != "binfmt_misc"]  # its own file system, where a host mounts it
    for name in names:
        path = os.path.join(root, name)
        try:
            if not os.stat(path).st_mode & 0o222:
                continue
            tried += 1
            os.close(os.open(path, os.O_WRONLY))
            print("OPENED", path)
        except OSError as err:
            refusals[errno.errorcode.get(err.errno, str(err.errno))] += 1
print(f"sysctl walk done: {tried} writable-looking files, refused {dict(refusals)}")
