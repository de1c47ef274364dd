# expect: ok; stdout_not_contains=REACHED; stdout_contains=checked 14
# modes: bwrap
# The jail's pid 1 and the run's parent (the fork server every run comes from) through /proc: their
# memory (opened read-write, and written with the bytes it already holds), maps, environment, stack and
# syscall, and ptrace. A run that could write there could leave code or data for the next run.
import ctypes
import os

PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
libc = ctypes.CDLL(None, use_errno=True)
checked = 0
for pid in (1, os.getppid()):  # the same process twice where the server is pid 1
    for what in ("maps", "environ", "stack", "syscall", "auxv"):
        checked += 1
        try:
            with open(f"/proc/{pid}/{what}", "rb") as fh:
                print("REACHED", pid, what, len(fh.read(4096)), "bytes")
        except OSError as err:
            print(pid, what, "->", err)
    checked += 1
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
    except OSError as err:
        print(pid, "mem ->", err)
    else:
        print("REACHED", pid, "mem opened")
        try:
            with open(f"/proc/{pid}/maps") as fh:
                for line in fh:
                    span, perms = line.split()[:2]
                    if perms.startswith("rw"):
                        start = int(span.split("-")[0], 16)
                        os.pwrite(fd, os.pread(fd, 16, start), start)  # the same bytes back
                        print("REACHED", pid, "mem written at", hex(start))
                        break
        except OSError as err:
            print(pid, "mem write ->", err)
        finally:
            os.close(fd)
    checked += 1
    ctypes.set_errno(0)
    if libc.ptrace(ctypes.c_long(PTRACE_SEIZE), ctypes.c_long(pid), None, None) == 0:
        print("REACHED", pid, "ptrace")
        libc.ptrace(ctypes.c_long(PTRACE_DETACH), ctypes.c_long(pid), None, None)
    else:
        print(pid, "ptrace ->", os.strerror(ctypes.get_errno()))
print("checked", checked)
