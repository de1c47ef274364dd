"""The process-side half of :mod:`gf2env.agents.sandbox`; standard library only, run as ``python -S -s -B``.

One idea: what runs inside the jail (it is copied there as one file, so it cannot be split).

Three commands (each imports only what it needs):

* ``limit RLIMITS CGROUP_PROCS HOST_UID -- PROGRAM ARGS...``: the trusted wrapper the host starts:
  join the worker's memory cgroup (if any), set the jail's rlimits (every process below inherits
  them), on a root host stage what bwrap binds and become the unprivileged HOST_UID, then become the
  program (bwrap, or the worker itself);
* ``serve CTRL_FD SCRATCH SCRATCH_SPEC [SITE...]``: a warm worker (a fork server) inside the jail: it
  imports numpy once, then forks one fresh process per run that reads the job, sets the run's rlimits
  and seccomp filter and runs the untrusted code with the record's globals (:func:`cmd_serve`);
* ``probe [seccomp | jail SCRATCH SCRATCH_SPEC]``: report as JSON what this process sees (uid, whether
  seccomp installs and stops ``socket``, ``fork`` and ``execve``, whether the jail's /proc and a
  scratch can be set up), for :func:`gf2env.agents.sandbox.detect_isolation`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported in the jail; mypy reads this block
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

EXIT_ERROR = 1  # the code raised
EXIT_MEMORY = 99  # the code raised MemoryError (the address-space limit)
EXIT_SETUP = 98  # the harness could not set the sandbox up; the code did not run
EXIT_USAGE = 97
WIPE_S = 1.0  # how long emptying the scratch after a run may take (else the worker serves no more)
# what a warm worker imports once, so that a run's process starts with it (numpy where installed)
PRELOAD = (
    "numpy", "json", "re", "math", "itertools", "collections", "functools", "operator", "heapq",
    "bisect", "random", "string", "fractions", "decimal", "statistics", "linecache", "traceback", "ast",
)  # fmt: skip
MODEL_FILENAME = "<model>"  # the model's code is compiled under this name (tracebacks, the protocol rules)
# Runs never read bytecode caches: a __pycache__ the code planted in a workspace could otherwise make
# `import tools` run something other than tools.py. Nothing can create this directory (it is in /proc).
NO_BYTECODE_CACHE = "/proc/gf2-no-bytecode"
# Where the wrapper of a root host stages what bwrap binds (a tmpfs in its own mount namespace, over the
# first of these directories that exists), so that the unprivileged uid it becomes can reach them.
STAGE_POINTS = ("/mnt", "/media", "/srv", "/opt", "/home", "/var")
# A root host's jail becomes HOST_UID_BASE plus its wrapper's pid (see gf2env.agents.sandbox.isolation)
HOST_UID_BASE, WORKER_UID = 2_100_000_000, "worker"
# /proc inside the jail: host-wide knobs read-only, kernel-information files and directories masked
# (what container runtimes do). The jail's identity is not host root, so none of these is writable to
# it anyway; this is the second layer.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
PROC_MASKED_FILES = ("kcore", "keys", "timer_list", "timer_stats", "sched_debug", "latency_stats")
PROC_MASKED_DIRS = ("acpi", "scsi", "asound")

# ---------------------------------------------------------------------------- seccomp (x86_64)
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM, ENOSYS = 1, 38
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
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
    # state that would outlive a run in a warm worker's namespaces: System V and POSIX IPC, memory
    # files (pages no address-space limit counts)
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "shmdt": 67,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "semtimedop": 220,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "mq_open": 240,
    "mq_unlink": 241,
    "mq_timedsend": 242,
    "mq_timedreceive": 243,
    "mq_notify": 244,
    "mq_getsetattr": 245,
    "memfd_create": 319,
    "memfd_secret": 447,
    # host-wide (or per-user) kernel tables a run could exhaust for everyone: AIO contexts (fs.aio-max-nr
    # is one count for the whole machine), inotify instances and watches, fanotify marks
    "io_setup": 206,
    "io_destroy": 207,
    "io_getevents": 208,
    "io_submit": 209,
    "io_cancel": 210,
    "io_pgetevents": 333,
    "inotify_init": 253,
    "inotify_add_watch": 254,
    "inotify_rm_watch": 255,
    "inotify_init1": 294,
    "fanotify_mark": 301,
    # slowing down other processes of the same uid (the worker that serves the next run)
    "setpriority": 141,
    "ioprio_set": 251,
    "process_madvise": 440,
    "process_mrelease": 448,
}
NR_CLONE, NR_CLONE3, NR_KILL, NR_TGKILL = 56, 435, 62, 234
# calls whose first argument is a pid: allowed only for this process (or 0, which means it)
SELF_PID_SYSCALLS: dict[str, int] = {
    "prlimit64": 302,
    "sched_setparam": 142,
    "sched_setscheduler": 144,
    "sched_setaffinity": 203,
    "sched_setattr": 314,
    "migrate_pages": 256,
    "move_pages": 279,
}
# fcntl/ioctl commands that would send SIGIO (or any signal) to another process
NR_FCNTL, NR_IOCTL, NR_PRCTL = 72, 16, 157
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902


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


def _self_or_zero(arg: int, pid: int) -> list[tuple[int, int, int, int]]:
    """Allow the call iff argument ``arg`` (a pid_t) is 0 or ``pid``; EPERM otherwise."""
    deny = _ret(SECCOMP_RET_ERRNO | EPERM)
    return [
        _op(LD_W_ABS, _arg_hi(arg)),
        _op(JEQ_K, 0, 0, 4),
        _op(LD_W_ABS, _arg_lo(arg)),
        _op(JEQ_K, 0, 1, 0),
        _op(JEQ_K, pid, 0, 1),
        _ret(SECCOMP_RET_ALLOW),
        deny,
    ]


def _unless_arg(arg: int, values: tuple[int, ...]) -> list[tuple[int, int, int, int]]:
    """Allow the call unless the low word of argument ``arg`` is one of ``values`` (EPERM then)."""
    body = [_op(LD_W_ABS, _arg_lo(arg))]
    for i, value in enumerate(values):
        body.append(_op(JEQ_K, value, len(values) - i, 0))
    return [*body, _ret(SECCOMP_RET_ALLOW), _ret(SECCOMP_RET_ERRNO | EPERM)]


def seccomp_program(own_pid: int) -> list[tuple[int, int, int, int]]:
    """The filter: kill on a foreign arch, EPERM for x32 and DENIED_SYSCALLS, threads-only clone,
    signals and pid-taking calls aimed at this process only, no signal-on-I/O owners, no
    ``prctl(PR_SET_DUMPABLE)``."""
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
    for nr in sorted(SELF_PID_SYSCALLS.values()):
        prog += _when_nr(nr, _self_or_zero(0, own_pid))
    prog += _when_nr(NR_FCNTL, _unless_arg(1, (F_SETOWN, F_SETSIG, F_SETOWN_EX)))
    prog += _when_nr(NR_IOCTL, _unless_arg(1, (FIOSETOWN, SIOCSPGRP)))
    # a run stays not dumpable (as the fork server made it): no core dump, no /proc/<pid>/mem for others
    prog += _when_nr(NR_PRCTL, _unless_arg(0, (PR_SET_DUMPABLE,)))
    prog.append(_ret(SECCOMP_RET_ALLOW))
    return prog


_LIBC: list = []  # the C library, loaded once (a run's setup and each new scratch call into it)


def _libc() -> Any:
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _check(result: int, what: str) -> None:
    """Raise OSError (with errno) when a libc call returned non-zero."""
    if result != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _prctl(option: int, value: int) -> None:
    import ctypes

    zero = ctypes.c_ulong(0)
    _check(_libc().prctl(option, ctypes.c_ulong(value), zero, zero, zero), f"prctl({option}, {value})")


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
    if _libc().prctl(
        PR_SET_SECCOMP,
        ctypes.c_ulong(SECCOMP_MODE_FILTER),
        ctypes.byref(fprog),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    ):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


# ---------------------------------------------------------------------------- commands
def format_rlimits(limits: dict[str, tuple[int, int]]) -> str:
    """``{"RLIMIT_CPU": (10, 11), ...}`` as ``RLIMIT_CPU=10:11,...`` (``limit`` and a run's job)."""
    return ",".join(f"{name}={soft}:{hard}" for name, (soft, hard) in limits.items())


def _set_rlimits(text: str) -> None:
    import resource

    for item in filter(None, text.split(",")):
        name, _, values = item.partition("=")
        soft, hard = (int(v) for v in values.split(":"))
        resource.setrlimit(getattr(resource, name), (soft, hard))


# mount(2) and umount2(2) flags, and unshare(2)'s for a mount namespace
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 0x4000, 1 << 18
MNT_DETACH, CLONE_NEWNS = 2, 0x00020000
# bwrap's options that take arguments, and how many (the wrapper reads the command line it stages)
BWRAP_ARITY = {
    "--ro-bind": 2, "--ro-bind-try": 2, "--bind": 2, "--bind-try": 2, "--symlink": 2, "--setenv": 2,
    "--uid": 1, "--gid": 1, "--hostname": 1, "--cap-add": 1, "--cap-drop": 1, "--size": 1,
    "--perms": 1, "--tmpfs": 1, "--proc": 1, "--dev": 1, "--remount-ro": 1, "--chdir": 1, "--dir": 1,
}  # fmt: skip
BWRAP_SWITCHES = (
    "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
    "--clearenv", "--as-pid-1",
)  # fmt: skip
BWRAP_BINDS = ("--ro-bind", "--ro-bind-try", "--bind", "--bind-try")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    libc = _libc()
    enc = lambda v: None if v is None else v.encode()  # noqa: E731
    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _private_mounts() -> None:
    """A mount namespace of this process's own, whose mounts no longer propagate anywhere."""
    _check(_libc().unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def stage_binds(program: list[str]) -> list[str]:
    """``program`` (bwrap's command line) with the source of every bind replaced by a copy of it, bound
    by root under a tmpfs of this process's own mount namespace that any uid can reach: the host uid the
    wrapper then becomes may not reach the originals (a Python under /root, mode 0700). Nothing changes
    on the host: the namespace and its mounts go with the worker."""
    import stat

    _private_mounts()
    program = list(program)
    binds: list[tuple[int, int]] = []  # (index of the source in program, an O_PATH descriptor of it)
    i = 1
    while i < len(program) and program[i].startswith("--"):
        option = program[i]
        if option not in BWRAP_ARITY and option not in BWRAP_SWITCHES:
            raise OSError(f"cannot stage bwrap option {option!r}")
        if option in BWRAP_BINDS:
            try:  # opened in this namespace: a bind's source must belong to it
                binds.append((i + 1, os.open(program[i + 1], os.O_PATH | os.O_CLOEXEC)))
            except FileNotFoundError:
                if not option.endswith("-try"):
                    raise
        i += 1 + BWRAP_ARITY.get(option, 0)
    stage = next((p for p in STAGE_POINTS if os.path.isdir(p) and not os.path.islink(p)), "")
    if not stage:
        raise OSError(f"no directory among {STAGE_POINTS} to stage bwrap's binds on")
    _mount("gf2-stage", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k,nr_inodes=256")
    for n, (index, fd) in enumerate(binds):
        target = f"{stage}/{n}"
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        os.close(fd)
        program[index] = target
    return program


def become(uid: int) -> None:
    """Drop root for good: no supplementary groups, ``uid`` as every uid and gid, no new privileges."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3:
        raise OSError(f"still {os.getresuid()}/{os.getresgid()} after becoming {uid}")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def cmd_limit(argv: list[str]) -> int:
    """``limit RLIMITS CGROUP_PROCS HOST_UID -- PROGRAM ARGS...``: the trusted wrapper, outside the sandbox.

    Joins the memory cgroup whose ``cgroup.procs`` file is CGROUP_PROCS (``-``: none), sets each
    ``RLIMIT_X=soft:hard`` (inherited by everything below); with a HOST_UID (``-``: none; given when
    the host is root; ``worker``: HOST_UID_BASE plus this process's pid, which bwrap keeps) stages
    bwrap's binds (:func:`stage_binds`) and becomes that uid (:func:`become`);
    asks for SIGKILL when the thread that started it ends, then becomes the program (no process of its
    own stays behind)."""
    if len(argv) < 5 or argv[3] != "--":
        print("usage: harness.py limit RLIMITS CGROUP_PROCS HOST_UID -- PROGRAM ARGS...", file=sys.stderr)
        return EXIT_USAGE
    if argv[1] != "-":
        with open(argv[1], "w") as fh:
            fh.write(str(os.getpid()))
    _set_rlimits(argv[0])
    program = argv[4:]
    if argv[2] != "-":
        try:
            program = stage_binds(program)
            become(HOST_UID_BASE + os.getpid() if argv[2] == WORKER_UID else int(argv[2]))
        except (OSError, ValueError) as err:
            print(f"gf2 sandbox wrapper: cannot leave root for uid {argv[2]}: {err}", file=sys.stderr)
            return 126
    _prctl(PR_SET_PDEATHSIG, 9)  # after the uid change (which clears it); kept across exec
    try:
        os.execv(program[0], program)
    except OSError as err:
        print(f"gf2 sandbox wrapper: cannot start {program[0]}: {err}", file=sys.stderr)
    return 127


def _from_model() -> bool:
    """Whether the caller of the function calling this is the model's own code."""
    return sys._getframe(2).f_code.co_filename == MODEL_FILENAME


def _builtins(imports: list | None, denied: list) -> object:
    """The code's builtins: all of them, less ``denied``, with ``import`` limited to ``imports``.

    The same rules then hold for the real builtins, which every module's ``__builtins__`` and every
    function's ``__builtins__`` reach (``re.__builtins__['open']``): there a denied name, or an import
    outside ``imports``, fails when the model's own code calls it, and works for the library code that
    needs it (``collections.namedtuple`` calls ``eval``). These are a protocol's rules, not a wall:
    code can still reach other modules' attributes (``random._os``); the jail is what holds."""
    import builtins

    if imports is None and not denied:
        return builtins
    names = {k: v for k, v in vars(builtins).items() if k not in denied}
    real_import = builtins.__import__
    allowed = None if imports is None else frozenset(imports)

    def check_import(name: str, level: int) -> None:
        if allowed is not None and (level != 0 or name.partition(".")[0] not in allowed):
            listed = ", ".join(sorted(allowed))
            raise ImportError(f"import of {name!r} is not allowed here; allowed: {listed}")

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        check_import(name, level)
        return real_import(name, globals, locals, fromlist, level)

    def real_builtins_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if _from_model():
            check_import(name, level)
        return real_import(name, globals, locals, fromlist, level)

    def refuse(name: str, real: Callable) -> Callable:
        def guarded(*args, **kwargs):
            if _from_model():
                raise NameError(f"name {name!r} is not allowed by this tool protocol")
            return real(*args, **kwargs)

        return guarded

    if allowed is not None:
        names["__import__"] = guarded_import
        builtins.__import__ = real_builtins_import
    for name in denied:
        if hasattr(builtins, name):
            setattr(builtins, name, refuse(name, getattr(builtins, name)))
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


def _cap_recursion(cap: int) -> None:
    """``sys.setrecursionlimit`` above ``cap`` sets ``cap`` and says so on stderr: runaway recursion
    then fails with RecursionError within milliseconds instead of filling the address space."""
    real = sys.setrecursionlimit

    def setrecursionlimit(limit: int) -> None:
        if isinstance(limit, int) and limit > cap:
            os.write(2, f"gf2 sandbox: sys.setrecursionlimit({limit}) capped at {cap}\n".encode())
            limit = cap
        real(limit)

    sys.setrecursionlimit = setrecursionlimit
    real(min(sys.getrecursionlimit(), cap))


def _exit_status(exc: SystemExit) -> int:
    """The status ``sys.exit(x)`` gives a process, as Python's own exit handling computes it."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        print(exc.code, file=sys.stderr)
    except BaseException:
        pass
    return EXIT_ERROR


def _run_model_code(code: str, view: dict, job: dict) -> int:
    """Run the model's code with the record's globals; its exit status (an exception is reported)."""
    import linecache
    import traceback  # now: importing it after a MemoryError could fail for want of memory

    namespace = _model_globals(view, job)
    try:
        exec(compile(code, MODEL_FILENAME, "exec"), namespace)
    except SystemExit as exc:
        return _exit_status(exc)
    except BaseException as err:  # report whatever the code raised
        status = EXIT_MEMORY if isinstance(err, MemoryError) else EXIT_ERROR
        if status == EXIT_MEMORY:
            namespace.clear()  # free what the code's globals hold, so that the report has memory
        try:
            linecache.cache[MODEL_FILENAME] = (len(code), None, code.splitlines(True), MODEL_FILENAME)
            tb = err.__traceback__.tb_next if err.__traceback__ is not None else None
            traceback.print_exception(type(err), err, tb)
        except BaseException:  # still say what happened, in the fewest allocations
            try:
                os.write(2, f"{type(err).__name__} (its traceback could not be printed)\n".encode())
            except OSError:
                pass
        return status
    return 0


def _drop_capabilities() -> None:
    """Give up every capability (the UNSAFE mode run by root has them all; bwrap's fork server keeps
    CAP_SYS_ADMIN in the jail's own user namespace, to mount)."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]

    if _libc().capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()):  # _LINUX_CAPABILITY_VERSION_3
        raise OSError(ctypes.get_errno(), "capset failed")


def _child(job_fd: int, out_fd: int, err_fd: int, spec: dict, scratch: str, zygote: int) -> int:
    """One run, in a process forked from the worker: fresh stdio, limits, seccomp, then the code."""
    import json

    _prctl(PR_SET_PDEATHSIG, 9)
    if os.getppid() != zygote:  # the worker is already gone
        return EXIT_SETUP
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    try:
        chunks = []
        while chunk := os.read(job_fd, 1 << 20):
            chunks.append(chunk)
        job = json.loads(b"".join(chunks))
        code, view = job["code"], job["view"]
        os.closerange(3, 1 << 16)  # the control socket, the job and anything else of the worker
        _set_rlimits(spec["rlimits"])
        os.chdir(scratch)
        sys.path.insert(0, scratch)  # a workspace's modules from earlier runs import like a script's
        randomness = sys.modules.get("numpy.random")
        if randomness is not None:  # a fork shares numpy's global generator state: draw afresh
            randomness.seed()
        _cap_recursion(int(spec["recursion_limit"]))
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _drop_capabilities()  # the fork server's right to mount, in the jail's namespace, included
        if spec["seccomp"]:
            install_seccomp()
    except (OSError, ValueError, KeyError) as err:
        os.write(2, f"gf2 sandbox harness: setup failed, the code did not run: {err}\n".encode())
        return EXIT_SETUP
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # kept if killed
    status = _run_model_code(code, view, spec)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # closed or broken by the code: what it wrote is what came out
            pass
    return status


def enclose_proc() -> None:
    """Give the fork server a mount namespace of its own (its user namespace owns it, so it may mount
    there; runs share it, without the capability), with /proc's host-wide parts read-only or masked."""
    _private_mounts()
    proc_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC  # /proc's own, which a remount must keep
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if os.path.lexists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | proc_flags)
    for name in PROC_MASKED_FILES:
        if os.path.lexists(f"/proc/{name}"):
            _mount("/dev/null", f"/proc/{name}", None, MS_BIND)
    for name in PROC_MASKED_DIRS:
        if os.path.lexists(f"/proc/{name}"):
            _mount("gf2-masked", f"/proc/{name}", "tmpfs", MS_RDONLY | proc_flags, "size=4k,nr_inodes=1")


def new_scratch(scratch: str, spec: str, covering: bool) -> bool:
    """Mount a new, empty tmpfs on ``scratch`` (``spec``: ``tmpfs:MiB:INODES``), dropping the one
    before (``covering``: it is ours); False when that fails, and the worker serves no more runs.
    Nothing of the old one survives, its directory's own extended attributes, times, mode and inode
    numbers included; the kernel frees it once nothing uses it (the run that held it is reaped)."""
    _, size_mb, inodes = spec.split(":")
    try:
        if covering:
            _check(_libc().umount2(scratch.encode(), MNT_DETACH), f"umount {scratch}")
        options = f"size={int(size_mb)}m,nr_inodes={int(inodes)},mode=0700"
        _mount("gf2-scratch", scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options)
    except (OSError, ValueError):
        return False
    return True


def _wipe(scratch: str, seconds: float = WIPE_S) -> bool:
    """Empty ``scratch`` after a run (its process is gone) within ``seconds``; False when something
    could not go, or not in time (a scratch of a million files): the worker then serves no more runs."""
    import time

    end = time.monotonic() + seconds

    def clear(path: str) -> None:
        os.chmod(path, 0o700)  # a directory the code made unreadable or read-only
        for entry in os.scandir(path):
            if time.monotonic() > end:
                raise TimeoutError(path)
            if entry.is_dir(follow_symlinks=False):
                clear(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)

    try:
        clear(scratch)
        return not os.listdir(scratch)
    except (OSError, RecursionError):
        return False


def _serve_one(ctrl: object, spec: dict, fds: list, scratch: str, run_id: int) -> dict:
    """Fork one run, stop it at its wall clock or when the host asks, reap it, wipe the scratch."""
    import json
    import select
    import signal
    import socket
    import time

    assert isinstance(ctrl, socket.socket)
    start = time.monotonic()
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        status = EXIT_SETUP
        try:
            job_fd, out_fd, err_fd = fds
            status = _child(job_fd, out_fd, err_fd, spec, scratch, zygote)
        finally:
            os._exit(status)
    for fd in fds:
        os.close(fd)
    ctrl.send(json.dumps({"id": run_id, "started": True}).encode())  # the host's clock starts now
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(ctrl.fileno(), select.POLLIN)
    deadline = start + float(spec["wall_s"])
    timed_out = stopped = host_gone = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0 and not (timed_out or stopped):
            os.kill(pid, signal.SIGKILL)
            timed_out = True
        wait_ms = None if (timed_out or stopped) else max(left, 0.0) * 1000
        events = dict(poller.poll(wait_ms))
        if ctrl.fileno() in events:
            message = ctrl.recv(4096)
            if not message:  # the host is gone: end the run and the worker
                host_gone = True
            elif json.loads(message).get("stop") != run_id:
                continue  # a late stop for an earlier run
            os.kill(pid, signal.SIGKILL)
            stopped = True
            poller.unregister(ctrl.fileno())
        if pidfd in events:
            break
    os.close(pidfd)
    _, status, usage = os.wait4(pid, 0)
    if host_gone:
        sys.exit(0)
    return {
        "id": run_id,
        "status": status,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "maxrss_kb": usage.ru_maxrss,
        "wall_s": time.monotonic() - start,
        "timeout": timed_out,
    }


def cmd_serve(argv: list[str]) -> int:
    """``serve CTRL_FD SCRATCH SCRATCH_SPEC [SITE...]``: a warm worker inside the jail (a fork server).

    Imports numpy and the standard library's usual modules once, tells the host it is ready, then
    for each run the host sends on the control socket (a SOCK_SEQPACKET pair: ``{"run": id, ...}``
    with the job, stdout and stderr as descriptors) forks a fresh process that reads the job, sets the
    run's rlimits and seccomp, and runs the code (:func:`_child`); the worker itself never reads the
    code or the record, so nothing of one run is in the memory the next run's process starts from.
    It says ``{"started"}`` when the run's process exists, reports ``{"status", "cpu_s", "maxrss_kb",
    "wall_s", "timeout"}`` when it is gone, and only then empties the scratch (within ``WIPE_S``): a
    run that cannot start on a clean scratch is refused (``{"refused"}``), never run. A run with
    ``"keep_scratch": true`` (a workspace's) leaves the scratch as the code left it, for the next run;
    ``{"wipe": id}`` empties it and reports ``clean``. The worker ends when the host closes the socket.
    It is not dumpable, so a run (same uid) cannot open its /proc files.

    With SCRATCH_SPEC ``tmpfs:MiB:INODES`` (in bwrap's jail, where this server is pid 1 and may mount in
    its own namespace) "empty" means a new tmpfs (:func:`new_scratch`), made before each run's fork;
    with ``dir`` (the UNSAFE mode) the directory is wiped file by file (:func:`_wipe`).
    """
    import json
    import signal
    import socket

    ctrl = socket.socket(fileno=int(argv[0]))
    scratch, scratch_spec = argv[1], argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]  # no importing the harness dir
    sys.path.extend(argv[3:])
    _prctl(PR_SET_DUMPABLE, 0)
    mounts = scratch_spec.startswith("tmpfs:")
    if mounts:
        enclose_proc()
        os.chdir("/")  # the server holds no scratch: each one goes once its run is reaped
        if not new_scratch(scratch, scratch_spec, covering=False):
            raise OSError(f"cannot mount a scratch tmpfs on {scratch}")

    def renew() -> bool:
        return new_scratch(scratch, scratch_spec, covering=True) if mounts else _wipe(scratch)

    for name in ("SIGIO", "SIGURG", "SIGPIPE"):  # signals a run could aim at us through a descriptor
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    preloaded = []
    for module in PRELOAD:
        try:
            __import__(module)
            preloaded.append(module)
        except ImportError:
            pass
    sys.pycache_prefix = NO_BYTECODE_CACHE  # after the preload: the standard library's caches were fine
    ctrl.send(json.dumps({"ready": os.getpid(), "preloaded": preloaded}).encode())
    clean = True
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(ctrl, 1 << 16, 3)
        except OSError:
            return 0
        if not message:
            return 0
        request = json.loads(message)
        if "wipe" in request and not fds:  # the end of a workspace: empty the scratch now
            clean = clean and renew()
            ctrl.send(json.dumps({"id": request["wipe"], "clean": clean}).encode())
            continue
        if "run" not in request or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue  # a late stop, or a malformed request from the host
        if not clean:  # the last run's files could not all go: no run may see them
            for fd in fds:
                os.close(fd)
            ctrl.send(json.dumps({"id": request["run"], "refused": "the scratch is not empty"}).encode())
            continue
        report = _serve_one(ctrl, request, fds, scratch, request["run"])
        ctrl.send(json.dumps(report).encode())  # first: the run's time does not include the wipe
        if not request.get("keep_scratch"):
            clean = renew()


def cmd_probe(argv: list[str]) -> int:
    """``probe [seccomp | jail SCRATCH SCRATCH_SPEC]``: print what this process can and cannot do, as
    one JSON line (``jail``: whether it can set /proc and a scratch up as the fork server does)."""
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
    if argv[:1] == ["jail"] and len(argv) == 3:
        try:
            enclose_proc()
            report["mounts"] = new_scratch(argv[1], argv[2], covering=False) or "no scratch tmpfs"
        except OSError as err:
            report["mounts"] = str(err)
    print(json.dumps(report), flush=True)
    return 0


def main(argv: list[str]) -> int:
    commands = {"limit": cmd_limit, "serve": cmd_serve, "probe": cmd_probe}
    if not argv or argv[0] not in commands:
        print(f"usage: sandbox_harness.py {{{'|'.join(commands)}}} ...; got {argv[:1]}", file=sys.stderr)
        return EXIT_USAGE
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
