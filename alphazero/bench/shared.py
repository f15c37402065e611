"""What every benchmark shares: the default config, a call repeated for a minimum time, and a fresh
interpreter's start with a cold and then a cached numba cache."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable


def default_config_path() -> Path | None:
    """``configs/default.yaml`` of this checkout (what "the default network" means), if present."""
    path = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"
    return path if path.is_file() else None


def timed(fn: Callable[[], object], min_seconds: float) -> tuple[int, float]:
    """Call ``fn`` until ``min_seconds`` of wall time have passed: ``(calls, seconds)``."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return calls, elapsed


def startup_seconds(code: str, digits: int = 2) -> dict[str, float]:
    """Seconds (wall and CPU) a fresh interpreter takes to run ``code`` (Python source that does the
    imports and first calls to time): ``cold`` with an empty numba cache (everything compiles), ``cached``
    the same again (everything loads). Uses a temporary ``NUMBA_CACHE_DIR``, leaving the package's own
    cache alone."""
    probe = ("import time; _w, _c = time.perf_counter(), time.process_time()\n" + code +
             "\nprint(time.perf_counter() - _w, time.process_time() - _c)")
    figures = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("cold", "cached"):
            result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
            wall, cpu = result.stdout.strip().splitlines()[-1].split()
            figures[f"{label}_wall"] = round(float(wall), digits)
            figures[f"{label}_cpu"] = round(float(cpu), digits)
    return figures
