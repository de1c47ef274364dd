# expect: ok; stdout_contains=EMFILE
# modes: bwrap unsafe
# Open files until RLIMIT_NOFILE (64) answers EMFILE.
import errno
import os

held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError as err:
    print(errno.errorcode[err.errno], "after", len(held))
