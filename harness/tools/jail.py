"""The sandbox's first process: namespaces, a size-capped filesystem, fewer privileges and
limits, then the command; every descendant is dead before it reports.

:mod:`harness.tools.jail_run` runs this file's text as
``python -I -S -c SOURCE KEY=VALUE... -- ARGV...``:
standard library only (and few modules: each costs start-up time on every run), so nothing in
the workspace can shadow what it imports. The settings are ``KEY=VALUE`` words (see
``_jail_settings`` in the sandbox); the outcome is ``KEY=VALUE`` lines written to the file
descriptor ``status_fd``: ``wait_status`` and ``disk_full``, or ``error``.

Isolated (``isolate``): new network, PID and mount namespaces (and a user namespace when not
root). One tmpfs of ``disk_bytes`` is mounted over the temporary directory and bound over every
world-writable scratch directory, and the workspace copy is copied onto it, so everything the
command can write counts against one cap and vanishes with the namespace. The command runs
under an init process that is PID 1 of the new namespace: when the command exits, init exits,
and the kernel kills everything left in the namespace, ``setsid`` and double-forked children
included. Not isolated (only where the operator allows it): this process becomes a child
subreaper, so orphans come back to it, and it kills them all when the command ends; the disk
cap is checked by polling the copy's size.
"""

from __future__ import annotations

import _signal as signal  # the C module: ``signal`` would import enum, 4 ms on every run
import ctypes
import os
import resource
import stat
import sys

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 4, 36
_SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
_POLL_S = 0.05

__all__ = ["main", "parse_args"]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]


class _Stop(Exception):
    """The sandbox asked this process (SIGTERM) to stop the command."""


class Settings:
    """What the sandbox asks for, parsed from its ``KEY=VALUE`` words."""

    def __init__(self, words: list[str]) -> None:
        values = dict(word.split("=", 1) for word in words)
        self.isolate = values["isolate"] == "1"
        self.workdir = values["workdir"]
        self.scratch_root = values["scratch_root"]
        self.disk_bytes, self.max_files = int(values["disk_bytes"]), int(values["max_files"])
        self.drop_to_uid = int(values["drop_to_uid"]) if values["drop_to_uid"] else None
        self.limits = {name: int(values[key]) for name, key in (
            ("RLIMIT_CPU", "cpu_s"), ("RLIMIT_AS", "memory_bytes"), ("RLIMIT_FSIZE", "file_bytes"),
            ("RLIMIT_CORE", "core_bytes"), ("RLIMIT_NPROC", "nproc"))}
        self.status_fd = int(values["status_fd"])


def parse_args(args: list[str]) -> tuple[Settings, list[str]]:
    """``KEY=VALUE... -- ARGV...`` into the settings and the command."""
    split = args.index("--")
    return Settings(args[:split]), args[split + 1:]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _enter_namespaces() -> None:
    flags = _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWNS
    uid, gid = os.getuid(), os.getgid()
    if os.geteuid() != 0:
        flags |= _CLONE_NEWUSER
    _check(_libc.unshare(flags), "unshare")
    if flags & _CLONE_NEWUSER:  # stay the same user inside, so files keep their owner
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "private mounts")


def _mount_scratch(settings: Settings) -> None:
    root = settings.scratch_root
    options = f"size={settings.disk_bytes},nr_inodes={settings.max_files},mode=1777"
    _check(_libc.mount(b"rs-sandbox", root.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                       options.encode()), f"tmpfs on {root}")
    for directory in _SCRATCH_DIRS:
        if directory != root and os.path.isdir(directory):
            _check(_libc.mount(root.encode(), directory.encode(), None, _MS_BIND, None),
                   f"bind over {directory}")


def _copy_tree(source: str, target: str) -> None:
    """Files, directories and symlinks (as links), with their modes."""
    os.makedirs(target, exist_ok=True)
    for entry in os.scandir(source):
        destination = os.path.join(target, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), destination)
            continue
        if entry.is_dir():
            _copy_tree(entry.path, destination)
        else:
            with open(entry.path, "rb") as reader, open(destination, "wb") as writer:
                while block := reader.read(1 << 20):
                    writer.write(block)
        os.chmod(destination, stat.S_IMODE(entry.stat().st_mode))


def _drop_privileges(settings: Settings) -> None:
    if settings.drop_to_uid is not None:
        os.setgroups([])
        os.setgid(settings.drop_to_uid)
        os.setuid(settings.drop_to_uid)
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # /proc/<this>/fd stays closed to the command


def _spawn(argv: list[str], hidden: tuple[str, ...] = ()) -> int:
    """Fork and exec the command; raises OSError (from the child's errno) if exec failed.
    ``hidden``: the directories this jail has covered with its scratch space."""
    errors_r, errors_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(errors_r)
            for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM):
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(errors_w, str(exc.errno).encode())
        finally:
            os._exit(127)
    os.close(errors_w)
    failed = os.read(errors_r, 32)
    os.close(errors_r)
    if failed:
        os.waitpid(pid, 0)
        errno = int(failed)
        raise OSError(errno, f"could not start {argv[0]!r}: {os.strerror(errno)}"
                             f"{_why_not_reachable(argv[0], hidden)}")
    return pid


def _why_not_reachable(program: str, hidden: tuple[str, ...]) -> str:
    """What keeps this user from ``program``, in words an operator can act on ('' if unclear)."""
    if not program.startswith("/"):
        return ""
    for scratch in hidden:
        if program.startswith(scratch.rstrip("/") + "/"):
            return (f" ({program} lies under {scratch}, which the sandbox replaces with its own "
                    "empty scratch space: install it outside the temporary directories)")
    directory = "/"
    for part in program.strip("/").split("/")[:-1]:
        directory = os.path.join(directory, part)
        if not os.access(directory, os.X_OK):
            try:
                mode = oct(stat.S_IMODE(os.stat(directory).st_mode))
            except OSError:
                mode = "unknown"
            return (f" (uid {os.getuid()} may not enter {directory}, mode {mode}: make it "
                    f"traversable, e.g. chmod o+x {directory}, or install the program elsewhere)")
    return ""


def _report(fd: int, **values: object) -> None:
    os.write(fd, "".join(f"{key}={str(value).replace(chr(10), ' ')}\n"
                         for key, value in values.items()).encode())


def _init(argv: list[str], status_w: int, hidden: tuple[str, ...]) -> None:
    """PID 1 of the new namespace: run the command, reap orphans, report its status, exit."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for signum in (signal.SIGTERM, signal.SIGINT):  # PID 1 ignores what it does not handle
        signal.signal(signum, signal.SIG_DFL)
    try:
        command = _spawn(argv, hidden)
    except OSError as exc:
        _report(status_w, error=exc.strerror)
        return
    while True:
        pid, wait_status = os.wait()
        if pid == command:
            _report(status_w, wait_status=wait_status)
            return  # exiting, init leaves the kernel to kill whatever is left in the namespace


def _run_isolated(argv: list[str], hidden: tuple[str, ...]) -> dict[str, str]:
    status_r, status_w = os.pipe()
    init = os.fork()
    if init == 0:
        try:
            os.close(status_r)
            _init(argv, status_w, hidden)
        finally:
            os._exit(0)  # never return into the caller's code in this process
    os.close(status_w)
    try:
        os.waitpid(init, 0)
    except _Stop:
        os.kill(init, signal.SIGKILL)
        os.waitpid(init, 0)
        raise
    lines = os.read(status_r, 4096).decode().splitlines()
    report = dict(line.split("=", 1) for line in lines)
    return report or {"error": "the sandbox's init process died"}


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat_file:
                    fields = stat_file.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
    return found


def _kill_descendants() -> None:
    """Kill every child; as a subreaper, their orphans come back here, and die next round."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0]:
                continue  # reaped one; look again
        except ChildProcessError:
            return  # none left
        for pid in _children(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _disk_used_bytes(root: str) -> int:
    used = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                used += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                continue
    return used


def _run_unisolated(argv: list[str], settings: Settings) -> dict[str, str]:
    _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # waited for, with a timeout
    try:
        command = _spawn(argv)
    except OSError as exc:
        return {"error": exc.strerror or str(exc)}
    report = {"disk_full": "0"}
    try:
        while "wait_status" not in report:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
            if pid == command:
                report["wait_status"] = str(wait_status)
            elif pid == 0:
                if _disk_used_bytes(settings.workdir) > settings.disk_bytes:
                    report["disk_full"] = "1"
                    os.kill(command, signal.SIGKILL)
                signal.sigtimedwait({signal.SIGCHLD}, _POLL_S)
    finally:
        _kill_descendants()
    if _disk_used_bytes(settings.workdir) > settings.disk_bytes:  # filled between two looks
        report["disk_full"] = "1"
    return report


def _disk_full(workdir: str) -> bool:
    stats = os.statvfs(workdir)
    return stats.f_bavail * stats.f_frsize < 64 * 1024 or stats.f_favail == 0


def _stop(_signum: int, _frame: object) -> None:
    raise _Stop


def main(settings: Settings, argv: list[str]) -> dict[str, str]:
    """Set up, run ``argv``, and return what to report."""
    if settings.isolate:
        _enter_namespaces()
        source = os.open(settings.workdir, os.O_RDONLY | os.O_DIRECTORY)
        _mount_scratch(settings)
        _drop_privileges(settings)
        os.fchdir(source)
        _copy_tree(".", settings.workdir)
        os.close(source)
    else:
        _drop_privileges(settings)
    os.chdir(settings.workdir)
    for name, value in settings.limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if not settings.isolate:
        return _run_unisolated(argv, settings)
    report = _run_isolated(argv, (settings.scratch_root, *_SCRATCH_DIRS))
    if "wait_status" in report:
        report["disk_full"] = "1" if _disk_full(settings.workdir) else "0"
    return report


if __name__ == "__main__":
    _settings, _argv = parse_args(sys.argv[1:])
    os.set_inheritable(_settings.status_fd, False)
    signal.signal(signal.SIGTERM, _stop)
    try:
        _outcome = main(_settings, _argv)
    except _Stop:
        _outcome = {"error": "stopped"}
    except OSError as exc:
        _outcome = {"error": str(exc)}
    _report(_settings.status_fd, **_outcome)
