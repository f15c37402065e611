"""What the end-to-end tests share: an ``alphazero`` command (``train`` most of all) in a session of its own,
waiting on what a run saves, and reading it back (``tests/test_training.py``, ``tests/test_preemption.py``).

A run is started with ``start_new_session`` so that every process it starts, Ray's included, can be
found by session id and killed by PID (``tools/sessions.py``); whatever a run leaves behind is a leak.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from alphazero.checkpoint import read_jsonl
from tools.sessions import describe, kill_session, session_pids

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.yaml"
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
# The command, in a child that turns SIGINT into KeyboardInterrupt whatever it inherited (a shell without
# job control starts background jobs with SIGINT ignored, and a Python started so would ignore Ctrl-C).
TRAIN = [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
         "from commands.main import main; sys.exit(main(sys.argv[1:]))", "train"]


def train_command(run_dir: Path, *extra: str, config: Path | None = SMOKE, address: str | None = None) -> list[str]:
    command = [*TRAIN, "--run-dir", str(run_dir), *extra]
    if config is not None:
        command += ["--config", str(config)]
    if address is not None:
        command += ["--address", address]
    return command


def start(command: list[str], output: int | None = subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=output, stderr=output, text=True, start_new_session=True)


# How long a run's Ray workers may take to exit after its driver has: they leave when they notice their
# raylet has gone, and one seen still running (state R) just after the driver's end was gone a moment later.
EXIT_GRACE_S = 10.0


def run_to_end(command: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``command`` to its end (killed at ``timeout``); it must leave no process behind (``EXIT_GRACE_S``
    after its end; whatever is left then is killed, and the run fails)."""
    process = start(command)
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            kill_session(process)
    deadline = time.monotonic() + EXIT_GRACE_S
    while session_pids(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session_pids(process.pid)
    if left:
        description = describe(left)
        kill_session(process)
        raise AssertionError(f"the run left processes behind: {description}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``predicate`` (a file the run writes) until it holds; a file not written yet counts as False."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def terminated_when(argv: list[str], ready: Callable[[], object], what: str, timeout: float = 120) -> tuple[int, str]:
    """Run ``alphazero ARGV`` in a session of its own, send it SIGTERM once ``ready()`` holds (as ``kill``, a
    scheduler or a session's end would), and return its exit status and stderr; it is killed if it lingers."""
    command = [sys.executable, "-c", "import sys; from commands.main import main; sys.exit(main(sys.argv[1:]))", *argv]
    process = start(command)
    try:
        wait_for(ready, timeout, what)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            kill_session(process)
    return process.returncode, err


def run_state(run_dir: Path) -> dict:
    """``state.json`` as plain JSON."""
    return json.loads((run_dir / "state.json").read_text())


def run_events(run_dir: Path, kind: str | None = None) -> list[dict]:
    """The run's events (of one ``kind``), in the order they happened."""
    return [e for e in read_jsonl(run_dir / "events.jsonl") if kind is None or e["event"] == kind]
