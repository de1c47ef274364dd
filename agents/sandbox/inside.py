"""The process-side half of :mod:`agents.sandbox`; standard library only, run as ``python -S -s -B``.

One idea: what runs inside the jail (it is copied there as one file, so it cannot be split).

Three commands (each imports only what it needs: every run starts two of them):

* ``limit RLIMITS REPORT_FD -- PROGRAM ARGS...``: the trusted wrapper the parent starts: set the
  rlimits (every process below inherits them), run the program, report its status and CPU time;
* ``run JOB_JSON``: read the job (record view, code path, extra ``sys.path`` entries), install the
  seccomp filter, then ``exec`` the untrusted code with the record's globals;
* ``probe [seccomp]``: report as JSON what this process sees (uid, whether seccomp installs and stops
  ``socket``, ``fork`` and ``execve``), for :func:`agents.sandbox.detect_isolation`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported in the jail; mypy reads this block
if TYPE_CHECKING:
    from collections.abc import Callable

EXIT_ERROR = 1  # the code raised
EXIT_MEMORY = 99  # the code raised MemoryError (the address-space limit)
EXIT_SETUP = 98  # the harness could not set the sandbox up; the code did not run
EXIT_USAGE = 97

# ---------------------------------------------------------------------------- seccomp (x86_64)
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM, ENOSYS = 1, 38
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
CLONE_THREAD = 0x00010000
# classic BPF opcodes
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K, JGE_K, JSET_K, RET_K = 0x15, 0x35, 0x45, 0x06
# offsets in struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]  (little endian)
OFF_NR, OFF_ARCH = 0, 4


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


def _arg_hi(i: int) -> int:
    return 20 + 8 * i


# x86_64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl) refused with EPERM.
DENIED_SYSCALLS: dict[str, int] = {
    # network: no sockets at all
    "socket": 41,
    "connect": 42,
    "accept": 43,
    "sendto": 44,
    "recvfrom": 45,
    "sendmsg": 46,
    "recvmsg": 47,
    "shutdown": 48,
    "bind": 49,
    "listen": 50,
    "socketpair": 53,
    "accept4": 288,
    "recvmmsg": 299,
    "sendmmsg": 307,
    # new processes and programs (threads go through the clone check below)
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "execveat": 322,
    # leaving the process group the parent kills (UNSAFE mode has no pid namespace to fall back on)
    "setsid": 112,
    "setpgid": 109,
    # signals to other processes (kill and tgkill are allowed only at our own pid, below)
    "tkill": 200,
    "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297,
    "pidfd_open": 434,
    "pidfd_send_signal": 424,
    "pidfd_getfd": 438,
    # other processes' memory
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    # mounts and namespaces
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    # kernel keyring, bpf, perf, modules, kexec, power, swap
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "bpf": 321,
    "perf_event_open": 298,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    # odd kernel surfaces
    "personality": 135,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "syslog": 103,
    "acct": 163,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "fanotify_init": 300,
    "iopl": 172,
    "ioperm": 173,
    "modify_ldt": 154,
    "uselib": 134,
    "settimeofday": 164,
    "clock_settime": 227,
    "adjtimex": 159,
    "sethostname": 170,
    "setdomainname": 171,
    "vhangup": 153,
}
NR_CLONE, NR_CLONE3, NR_KILL, NR_TGKILL = 56, 435, 62, 234


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def _ret(value: int) -> tuple[int, int, int, int]:
    return _op(RET_K, value)


def _when_nr(nr: int, body: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """``if nr == NR: body`` where ``body`` always ends in a return (so A still holds nr after it)."""
    assert body and body[-1][0] == RET_K and len(body) < 256
    return [_op(JEQ_K, nr, 0, len(body)), *body]


def _only_own_pid(arg: int, pid: int) -> list[tuple[int, int, int, int]]:
    """Allow the call iff argument ``arg`` (a pid_t) equals ``pid``; EPERM otherwise."""
    deny = _ret(SECCOMP_RET_ERRNO | EPERM)
    return [
        _op(LD_W_ABS, _arg_lo(arg)),
        _op(JEQ_K, pid, 0, 3),
        _op(LD_W_ABS, _arg_hi(arg)),
        _op(JEQ_K, 0, 0, 1),
        _ret(SECCOMP_RET_ALLOW),
        deny,
    ]


def seccomp_program(own_pid: int) -> list[tuple[int, int, int, int]]:
    """The filter: kill on a foreign arch, EPERM for x32 and DENIED_SYSCALLS, threads-only clone."""
    deny = _ret(SECCOMP_RET_ERRNO | EPERM)
    prog = [
        _op(LD_W_ABS, OFF_ARCH),
        _op(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _ret(SECCOMP_RET_KILL_PROCESS),
        _op(LD_W_ABS, OFF_NR),
        _op(JGE_K, X32_SYSCALL_BIT, 0, 1),
        deny,
    ]
    for nr in sorted(set(DENIED_SYSCALLS.values())):
        prog += _when_nr(nr, [deny])
    # clone(flags, ...): a thread (CLONE_THREAD set) is allowed, a new process is not
    prog += _when_nr(
        NR_CLONE, [_op(LD_W_ABS, _arg_lo(0)), _op(JSET_K, CLONE_THREAD, 0, 1), _ret(SECCOMP_RET_ALLOW), deny]
    )
    prog += _when_nr(NR_CLONE3, [_ret(SECCOMP_RET_ERRNO | ENOSYS)])  # glibc falls back to clone
    prog += _when_nr(NR_KILL, _only_own_pid(0, own_pid))
    prog += _when_nr(NR_TGKILL, _only_own_pid(0, own_pid))
    prog.append(_ret(SECCOMP_RET_ALLOW))
    return prog


def _prctl(option: int, value: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)):
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


def seccomp_supported() -> str:
    """'' when this machine can take the filter, else why not."""
    if not sys.platform.startswith("linux"):
        return f"seccomp needs Linux; this is {sys.platform}"
    machine = os.uname().machine
    if machine != "x86_64" or sys.maxsize <= 2**32:
        return f"the seccomp filter is written for 64-bit x86_64; this machine is {machine}"
    return ""


def install_seccomp() -> None:
    """Load the filter into this (single-threaded) process; raises OSError when the kernel refuses."""
    reason = seccomp_supported()
    if reason:
        raise OSError(reason)
    threads = os.listdir("/proc/self/task")
    if len(threads) != 1:  # a filter covers only the calling thread and what it starts later
        raise OSError(f"the harness has {len(threads)} threads; seccomp must be installed with one")
    import ctypes

    class SockFilter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    prog = seccomp_program(os.getpid())
    filters = (SockFilter * len(prog))(*(SockFilter(c, jt, jf, k) for c, jt, jf, k in prog))
    fprog = SockFprog(len(prog), filters)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(
        PR_SET_SECCOMP,
        ctypes.c_ulong(SECCOMP_MODE_FILTER),
        ctypes.byref(fprog),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    ):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


# ---------------------------------------------------------------------------- commands
def format_rlimits(limits: dict[str, tuple[int, int]]) -> str:
    """``{"RLIMIT_CPU": (10, 11), ...}`` as the ``limit`` command's ``RLIMIT_CPU=10:11,...``."""
    return ",".join(f"{name}={soft}:{hard}" for name, (soft, hard) in limits.items())


def cmd_limit(argv: list[str]) -> int:
    """``limit RLIMITS REPORT_FD -- PROGRAM ARGS...``: the trusted wrapper, outside the sandbox.

    Sets each ``RLIMIT_X=soft:hard`` (inherited by everything below), becomes a child
    subreaper, starts the program, reaps it and every orphan it leaves, then writes
    ``{"status": wait status, "cpu_s": CPU of all of them}`` to REPORT_FD. (bwrap's outer process
    exits without waiting for its pid-1 reaper, so only a subreaper sees the sandbox's CPU time.)
    """
    import resource

    if len(argv) < 4 or argv[2] != "--":
        print("usage: sandbox_harness.py limit RLIMITS REPORT_FD -- PROGRAM ARGS...", file=sys.stderr)
        return EXIT_USAGE
    report_fd, program = int(argv[1]), argv[3:]
    for item in argv[0].split(","):
        name, _, values = item.partition("=")
        soft, hard = (int(v) for v in values.split(":"))
        resource.setrlimit(getattr(resource, name), (soft, hard))
    _prctl(PR_SET_PDEATHSIG, 9)  # SIGKILL when the parent goes
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(report_fd)
            _prctl(PR_SET_PDEATHSIG, 9)  # not inherited across fork: dies with this wrapper too
            os.execv(program[0], program)
        except OSError as err:
            os.write(2, f"gf2 sandbox wrapper: cannot start {program[0]}: {err}\n".encode())
        finally:
            os._exit(127)
    status = None
    while True:
        try:
            died, st = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if died == pid:
            status = st
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    shown = "null" if status is None else str(status)
    os.write(report_fd, f'{{"status": {shown}, "cpu_s": {usage.ru_utime + usage.ru_stime:.6f}}}'.encode())
    os.close(report_fd)
    return 0


def _builtins(imports: list | None, denied: list) -> object:
    """The code's builtins: all of them, less ``denied``, with ``import`` limited to ``imports``."""
    if imports is None and not denied:
        return __builtins__
    import builtins

    names = {k: v for k, v in vars(builtins).items() if k not in denied}
    if imports is not None:
        allowed = frozenset(imports)
        real_import = builtins.__import__

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
            top = name.partition(".")[0]
            if level != 0 or top not in allowed:
                raise ImportError(
                    f"import of {name!r} is not allowed here; allowed: {', '.join(sorted(allowed))}"
                )
            return real_import(name, globals, locals, fromlist, level)

        names["__import__"] = guarded_import
    return names


def _model_globals(view: dict, job: dict) -> dict:
    """The code's globals: ``RECORD`` and ``PROMPT`` for a paper view, else ``record`` and its keys."""
    if "RECORD" in view:
        names = {"RECORD": view["RECORD"], "PROMPT": view["PROMPT"]}
    else:
        names = {key: view[key] for key in ("n", "p", "d", "g", "K", "prefix", "samples")}
        names["record"] = view
    wrapped = _builtins(job.get("imports"), job.get("denied_builtins", []))
    return {"__name__": "__main__", "__builtins__": wrapped, **names}


def cmd_run(argv: list[str]) -> int:
    """``run JOB_JSON``: the untrusted code's process."""
    import io
    import json
    import linecache
    import traceback  # now: importing it after a MemoryError could fail for want of memory

    assert isinstance(sys.stdout, io.TextIOWrapper)
    sys.stdout.reconfigure(line_buffering=True)  # what was printed survives a kill
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]  # no importing the harness dir
    try:
        with open(argv[0]) as fh:
            job = json.load(fh)
        with open(job["record"]) as fh:
            view = json.load(fh)
        with open(job["code"], encoding="utf-8") as fh:
            code = fh.read()
        sys.path.extend(job["site"])
        if job["seccomp"]:
            install_seccomp()
    except (OSError, ValueError, KeyError) as err:
        print(f"gf2 sandbox harness: setup failed, the code did not run: {err}", file=sys.stderr)
        return EXIT_SETUP
    namespace = _model_globals(view, job)
    try:
        exec(compile(code, "<model>", "exec"), namespace)
    except SystemExit:
        raise
    except BaseException as err:  # report whatever the code raised
        status = EXIT_MEMORY if isinstance(err, MemoryError) else EXIT_ERROR
        if status == EXIT_MEMORY:
            namespace.clear()  # free what the code's globals hold, so that the report has memory
        try:
            linecache.cache["<model>"] = (len(code), None, code.splitlines(True), "<model>")
            tb = err.__traceback__.tb_next if err.__traceback__ is not None else None
            traceback.print_exception(type(err), err, tb)
            sys.stderr.flush()
        except BaseException:  # still say what happened, in the fewest allocations
            os.write(2, f"{type(err).__name__} (its traceback could not be printed)\n".encode())
        return status
    return 0


def cmd_probe(argv: list[str]) -> int:
    """``probe [seccomp]``: print what this process can and cannot do, as one JSON line."""
    import errno
    import json
    import socket

    report: dict[str, object] = {"uid": os.getuid(), "pid": os.getpid(), "machine": os.uname().machine}
    if argv[:1] == ["seccomp"]:
        checks: dict[str, Callable[[], object]] = {}
        try:
            install_seccomp()
            report["seccomp"] = True
        except OSError as err:
            report["seccomp"] = False
            report["seccomp_error"] = str(err)
        else:
            checks = {
                "socket": lambda: socket.socket(),
                "fork": os.fork,
                "execve": lambda: os.execv("/bin/true", ["true"]),
            }
        for name, call in checks.items():
            try:
                pid = call()
            except OSError as err:
                report[f"{name}_blocked"] = err.errno == errno.EPERM
            else:
                if name == "fork" and pid == 0:
                    os._exit(0)
                if name == "fork" and isinstance(pid, int):
                    os.waitpid(pid, 0)
                report[f"{name}_blocked"] = False
    print(json.dumps(report), flush=True)
    return 0


def main(argv: list[str]) -> int:
    commands = {"limit": cmd_limit, "run": cmd_run, "probe": cmd_probe}
    if not argv or argv[0] not in commands:
        print(f"usage: sandbox_harness.py {{{'|'.join(commands)}}} ...; got {argv[:1]}", file=sys.stderr)
        return EXIT_USAGE
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
