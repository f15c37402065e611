"""tools/sessions.py: the live processes of a session, found by session id and killed by PID."""

from __future__ import annotations

import subprocess
import sys
import time

from tools.sessions import _state, describe, kill_session, session_pids

# A parent that forks a child which exits at once, and never reaps it: the child stays a zombie.
UNREAPED = ("import os, sys, time\n"
            "pid = os.fork()\n"
            "if pid == 0:\n    os._exit(0)\n"
            "print(pid, flush=True)\n"
            "time.sleep(60)\n")


def test_a_session_lists_its_live_processes_and_not_its_zombies_and_a_kill_empties_it() -> None:
    process = subprocess.Popen([sys.executable, "-c", UNREAPED], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert process.stdout is not None
        child = int(process.stdout.readline())
        deadline = time.monotonic() + 10
        while _state(child) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(child) == "Z"
        assert session_pids(process.pid) == [process.pid]  # the zombie has exited: nothing of it is left to kill
        assert describe([process.pid]).startswith(f"{process.pid} ") and "os.fork()" in describe([process.pid])
    finally:
        kill_session(process)
    assert process.returncode == -9 and session_pids(process.pid) == []
