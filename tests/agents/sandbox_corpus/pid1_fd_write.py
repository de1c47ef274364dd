# expect: ok; stdout_not_contains=REACHED; stdout_contains=fds tried
# modes: bwrap
# The jail's pid 1 and the run's parent hold descriptors a run must not reach: the control socket, the
# worker's stderr (a pipe to the host). Listing them through /proc/<pid>/fd, reading their links and
# fdinfo, and opening each for writing (a marker written only into a pipe or a terminal) are refused.
import os
import stat

marker = b"gf2_sbx_@TOKEN@ through a descriptor of the fork server\n"
tried = 0
for pid in sorted({1, os.getppid()}):
    try:
        listed = os.listdir(f"/proc/{pid}/fd")
        print("REACHED", pid, "fd list", listed)
    except OSError as err:
        print(pid, "fd list ->", err)
        listed = []
    for fd in sorted({*listed, *map(str, range(8))}, key=int):
        tried += 1
        path = f"/proc/{pid}/fd/{fd}"
        try:
            print("REACHED", path, "->", os.readlink(path))
        except OSError:
            pass
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                print("REACHED", pid, "fdinfo", fd, fh.read().split()[:4])
        except OSError:
            pass
        try:
            out = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as err:
            print(path, "->", err)
            continue
        try:
            mode = os.fstat(out).st_mode
            print("REACHED", path, "opened for writing", stat.filemode(mode))
            if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
                os.write(out, marker)
                print("REACHED", path, "written")
        except OSError as err:
            print(path, "write ->", err)
        finally:
            os.close(out)
print("fds tried", tried)
