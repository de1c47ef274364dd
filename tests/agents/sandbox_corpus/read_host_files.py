# expect: ok; no_secret; stdout_contains=secret file hidden; stdout_contains=shadow hidden
# limits: output_bytes=8000000
# modes: bwrap
# outside: stop_reason=exited|output_limit; no_secret; stdout_contains=secret file hidden
# Reads what the host holds: a secret file the test made, /etc/shadow, /root, /work, the repo,
# the host's /tmp, and the memory of the test process (its pid is given).
import os

secret_file = "@SECRET_FILE@"
try:
    print("SECRET FILE:", open(secret_file).read())
except OSError as err:
    print("secret file hidden:", err)
for directory in ("@SECRET_DIR@", "/root", "/work", "@REPO@", "/tmp", "/home"):
    try:
        for root, dirs, files in os.walk(directory):
            dirs[:] = [d for d in dirs if os.path.join(root, d) != "@PYTHON_PREFIX@"]  # bound, not secret
            for name in files:
                path = os.path.join(root, name)
                try:
                    with open(path, "rb") as fh:
                        print(path, fh.read(200))
                except OSError as err:
                    print(path, err)
        print(directory, "walked")
    except OSError as err:
        print(directory, err)
try:
    print("SHADOW", open("/etc/shadow").read())
except OSError as err:
    print("shadow hidden:", err)
for pid in ("@HOST_PID@",):
    for what in ("environ", "cmdline", "mem"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as fh:
                print(what, fh.read(1 << 16))
        except OSError as err:
            print(f"/proc/{pid}/{what}:", err)
