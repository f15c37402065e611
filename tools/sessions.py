"""A process tree started in a session of its own (``start_new_session=True``): its PIDs, and SIGKILL to all of them.

What a preemption does to a run: the driver, Ray's services and every worker die at once. Used by
``tools/preemption.py`` and by the end-to-end tests (``tests/test_training.py``); only processes of
the given session are signalled, by PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def session_pids(session: int) -> list[int]:
    """The PIDs of every live process in session ``session`` (the PID of the process that started it).

    A zombie is not live: it has exited and waits only to be reaped by its parent, which for an orphan is
    PID 1, and some container inits reap late (a run's dead Ray worker was seen as a zombie for a moment
    after the run had ended)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) == session and _state(int(entry.name)) not in ("Z", "X"):
                pids.append(int(entry.name))
        except (ProcessLookupError, PermissionError, FileNotFoundError):
            continue
    return pids


def _state(pid: int) -> str:
    """The process's state letter from ``/proc/PID/stat`` (R, S, D, Z for a zombie, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def describe(pids: list[int]) -> str:
    """Each PID's state and command line, as ``ps`` shows them (for a message about processes left behind)."""
    lines = []
    for pid in pids:
        try:
            state = _state(pid)
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            state, command = "gone", ""
        lines.append(f"{pid} {state} {command[:200]}")
    return "; ".join(lines)


def kill_session(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGKILL every process of ``process``'s session (the driver, Ray's services, its workers), then wait
    up to ``timeout`` s for the process and for the session to be empty."""
    for pid in session_pids(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while session_pids(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
