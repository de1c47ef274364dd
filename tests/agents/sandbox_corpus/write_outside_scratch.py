# expect: ok; stdout_not_contains=WROTE; stdout_not_contains=DELETED; stdout_contains=scratch ok
# expect: host_unchanged
# modes: bwrap
# Writes and deletes outside the scratch directory: the python install, /usr, the repo, numpy's
# site-packages, a canary dir in the host's /tmp, the harness itself. /scratch and /tmp work
# inside, and nothing reaches the host.
import os
import shutil

name = "gf2_sbx_@TOKEN@"
targets = ["@PYTHON_PREFIX@", "/usr", "@REPO@", "@NUMPY_SITE@", "/sandbox/site-packages", "@CANARY_DIR@"]
for directory in [*targets, "/sandbox", "/", "/etc", "/dev/shm", "/root"]:
    try:
        with open(os.path.join(directory, name), "w") as fh:
            fh.write("x")
        print("WROTE", directory)
    except OSError as err:
        print(directory, err)
for victim in ("@CANARY_DIR@/keep", "/sandbox/harness.py", "/sandbox/code.py", "@PYTHON_PREFIX@/bin/python3"):
    try:
        os.remove(victim)
        print("DELETED", victim)
    except OSError as err:
        print(victim, err)
try:
    shutil.rmtree("@CANARY_DIR@")
    print("DELETED tree")
except OSError as err:
    print("rmtree", err)
with open("/tmp/" + name, "w") as fh:  # the sandbox's own /tmp
    fh.write("private")
with open("note.txt", "w") as fh:  # the working directory is /scratch
    fh.write("scratch")
assert os.getcwd() == "/scratch" and open("/scratch/note.txt").read() == "scratch"
print("scratch ok")
