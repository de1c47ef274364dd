# expect: ok; stdout_not_contains=WROTE; stdout_contains=tried 7; host_unchanged
# modes: bwrap
# Writes into the host's shared temporary places (/var/tmp, /dev/shm, /run, the test's own temp
# directory, where the run's host-side files are): none of them is in the jail, or writable there.
import os

name = "gf2_sbx_@TOKEN@"
tried = 0
for directory in ("/var/tmp", "/dev/shm", "/run", "/run/user", "/run/lock", "/dev/mqueue", "@TMP_PATH@"):
    tried += 1
    try:
        with open(os.path.join(directory, name), "w") as fh:
            fh.write("x")
        print("WROTE", directory)
    except OSError as err:
        print(directory, err)
print("tried", tried)
