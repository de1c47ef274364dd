# expect: ok; stdout_not_contains=PWNED; stdout_contains=found os; no_leftover
# modes: bwrap unsafe
# The classic jail escape: walk object.__subclasses__() to reach os/subprocess/_posixsubprocess
# without importing them, then run a program. Reaching them is easy; running anything is not.
import sys

word = "PW" + "NED"
classes = ().__class__.__base__.__subclasses__()
wrap_close = next(c for c in classes if c.__name__ == "_wrap_close")
os_globals = wrap_close.__init__.__globals__
print("found os:", os_globals["__name__"])
for name, attempt in {
    "system": lambda: os_globals["system"](f"echo {word}"),
    "popen": lambda: os_globals["popen"](f"echo {word}").read(),
    "execv": lambda: os_globals["execv"]("/bin/echo", ["echo", word]),
    "fork": lambda: os_globals["fork"](),
}.items():
    try:
        print(name, "->", repr(attempt()))
    except OSError as err:
        print(name, "refused:", err)
popen = next((c for c in classes if c.__name__ == "Popen"), None)
if popen is None:
    popen = sys.modules.get("subprocess", __import__("subprocess")).Popen
try:
    popen(["/bin/echo", word]).wait()
except OSError as err:
    print("Popen refused:", err)
import _posixsubprocess  # noqa: E402

errpipe_read, errpipe_write = os_globals["pipe"]()
try:
    args = (
        ["/bin/echo", word],
        [b"/bin/echo"],
        True,
        (),
        None,
        None,
        -1,
        -1,
        -1,
        -1,
        -1,
        -1,
        errpipe_read,
        errpipe_write,
        False,
        False,
        -1,
        None,
        None,
        None,
        -1,
        None,
        False,
    )
    print("fork_exec ->", _posixsubprocess.fork_exec(*args))
except (OSError, TypeError, ValueError) as err:
    print("fork_exec refused:", type(err).__name__, err)
