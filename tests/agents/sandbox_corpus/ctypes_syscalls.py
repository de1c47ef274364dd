# expect: ok; stdout_not_contains=PWNED; stdout_not_contains=ALLOWED; stdout_contains=checked 13; no_leftover
# modes: bwrap unsafe
# Raw syscalls through ctypes, below any Python-level guard: the seccomp filter still refuses them.
import ctypes
import errno

libc = ctypes.CDLL(None, use_errno=True)
word = b"PW" + b"NED"
argv = (ctypes.c_char_p * 3)(b"/bin/echo", word, None)
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
calls = {  # name: (call, the errno the filter answers with)
    "syscall(fork)": (lambda: libc.syscall(57), errno.EPERM),
    "syscall(vfork)": (lambda: libc.syscall(58), errno.EPERM),
    "libc.fork": (lambda: libc.fork(), errno.EPERM),
    "clone(SIGCHLD)": (lambda: libc.syscall(56, SIGCHLD, 0, 0, 0, 0), errno.EPERM),
    "clone3": (lambda: libc.syscall(435, 0, 0), errno.ENOSYS),
    "execve": (lambda: libc.execve(b"/bin/echo", argv, None), errno.EPERM),
    "socket": (lambda: libc.socket(2, 1, 0), errno.EPERM),
    "unshare(NEWUSER)": (lambda: libc.unshare(CLONE_NEWUSER), errno.EPERM),
    "ptrace(TRACEME)": (lambda: libc.ptrace(0, 0, 0, 0), errno.EPERM),
    "mount": (lambda: libc.mount(b"none", b"/scratch", b"tmpfs", 0, None), errno.EPERM),
    "x32 socket": (lambda: libc.syscall(0x40000000 | 41, 2, 1, 0), errno.EPERM),
    "io_uring_setup": (lambda: libc.syscall(425, 1, None), errno.EPERM),
    "personality": (lambda: libc.personality(0x0040000), errno.EPERM),
}
for name, (call, expected) in calls.items():
    ctypes.set_errno(0)
    result = call()
    err = ctypes.get_errno()
    verdict = "refused" if result == -1 and err == expected else "ALLOWED"
    print(name, result, errno.errorcode.get(err, err), verdict)
print("checked", len(calls))
