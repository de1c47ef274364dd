# expect: ok; stdout_contains=inode
# modes: bwrap
# A covert channel between fresh runs: inode numbers. This run prints the inode of its first new file,
# then makes 200 more; test_sandbox_outside runs it twice: a fresh scratch numbers from the start again.
import os

with open("first", "w"):
    pass
here = os.stat(".")
print("inode", os.stat("first").st_ino, "dir", here.st_ino, "dev", here.st_dev)
for i in range(200):
    open(f"f{i}", "w").close()
