# expect: ok; stdout_not_contains=PWNED; stdout_contains=refused: 6; no_leftover
# modes: bwrap unsafe
# Every way of starting a program: each must fail (EPERM), and echo must never print.
import multiprocessing
import os
import subprocess

word = "PW" + "NED"
attempts = {
    "subprocess.run": lambda: subprocess.run(["/bin/echo", word]),
    "subprocess.Popen": lambda: subprocess.Popen(["/bin/sh", "-c", f"echo {word}"]).wait(),
    "os.posix_spawn": lambda: os.waitpid(os.posix_spawn("/bin/echo", ["echo", word], {}), 0),
    "os.execv": lambda: os.execv("/bin/echo", ["echo", word]),
    "multiprocessing": lambda: multiprocessing.Process(target=print, args=(word,)).start(),
}
refused = 0
for name, attempt in attempts.items():
    try:
        attempt()
        print("started", name)
    except OSError as err:
        refused += 1
        print(name, "->", err)
status = os.system(f"echo {word}")  # returns a status instead of raising
print("os.system status", status)
refused += status != 0
print(f"refused: {refused}")
