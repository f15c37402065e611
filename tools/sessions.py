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
    """The PIDs of every live process in session ``session`` (the PID of the process that started it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) == session:
                pids.append(int(entry.name))
        except (ProcessLookupError, PermissionError):
            continue
    return pids


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
