"""Host processes of the sim: start detached, find by pid, stop, and who owns a port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from harness.sim import netns

STOP_GRACE_S = 8.0
LOG_TAIL_LINES = 20
_children: dict[int, subprocess.Popen[bytes]] = {}  # started by this process: their exit status is ours to read


def start(argv: list[str], log: Path, env: dict[str, str] | None = None, netns_name: str | None = None) -> int:
    """Start `argv` in its own session (it outlives gpupoc), output to `log`, inside the sim's network
    namespace `netns_name` when given; return its pid."""
    enter = (lambda: netns.enter_for_exec(netns_name)) if netns_name else None
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, preexec_fn=enter)
    _children[proc.pid] = proc
    return proc.pid


def exit_status(pid: int) -> int | None:
    """Exit status of a process this gpupoc started and that has ended; None when unknown."""
    proc = _children.get(pid)
    return proc.poll() if proc is not None else None


def has_exited(pid: int) -> bool:
    """A process this gpupoc started has ended (its exit status is known), or the pid is gone."""
    status = exit_status(pid)
    return status is not None or not Path(f"/proc/{pid}").exists()


def is_running(pid: int, binary: str) -> bool:
    """True when `pid` is alive and runs `binary` (a recycled pid is not ours).

    Reads /proc/PID/exe, not cmdline: right after exec the kernel has switched the program
    before it fills in the argument area, so cmdline can briefly read empty.
    """
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    exe = exe.removesuffix(" (deleted)")  # the binary was rebuilt while this process ran
    return os.path.realpath(exe) == os.path.realpath(binary) and _state(pid) not in ("Z", "")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def is_frozen(pid: int) -> bool:
    """Stopped by a signal (SIGSTOP): alive, holding its sockets, answering nothing."""
    return _state(pid) in ("T", "t")


def thaw(pid: int, binary: str) -> bool:
    """SIGCONT a frozen process of ours; True when it was frozen."""
    if is_running(pid, binary) and is_frozen(pid):
        os.kill(pid, signal.SIGCONT)
        return True
    return False


def stop(pid: int, binary: str, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM, then SIGKILL after `grace_s`; reap it if it is our child. True when it is gone."""
    if not is_running(pid, binary):
        return True
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not is_running(pid, binary):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    _reap(pid)
    return not is_running(pid, binary)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on `port` (IPv4 and IPv6), read from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_owner(port: int) -> str:
    """'pid 123 (etcd)' for the process listening on `port`, or a hint when it cannot be seen."""
    inodes = listening_inodes(port)
    if not inodes:
        return "an unknown process"
    wanted = {f"socket:[{i}]" for i in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
        if wanted.intersection(fds):
            name = (proc / "comm").read_text().strip()
            return f"pid {proc.name} ({name})"
    return "a process this user cannot inspect"


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
