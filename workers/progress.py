"""What a person watching a run sees: one status line (``Progress``) and the recent rates (``Rates``).

Writes to a stream only (standard error by default); the run's record is ``events.jsonl`` and
``metrics.jsonl``, not this. Knows nothing of Ray or of the run's state: the driver composes the text.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """One status line: rewritten in place on a terminal, printed every ``interval`` s otherwise."""

    def __init__(self, stream: TextIO | None = None, interval: float = 10.0) -> None:
        self.stream = stream or sys.stderr  # the one of the moment (a caller may have replaced sys.stderr)
        self.tty = self.stream.isatty()
        self.interval = 1.0 if self.tty else interval
        self.last = 0.0

    def update(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        self.stream.flush()


class Rates:
    """Games and positions per second over the last ``horizon`` seconds (since ``start`` at first)."""

    def __init__(self, horizon: float = 120.0) -> None:
        self.horizon = horizon
        self.events: list[tuple[float, int, int]] = []
        self.start = time.monotonic()

    def add(self, games: int, positions: int) -> None:
        now = time.monotonic()
        self.events.append((now, games, positions))
        self.events = [e for e in self.events if now - e[0] <= self.horizon]

    def _span(self) -> float:
        now = time.monotonic()
        return max(1e-9, min(self.horizon, now - self.start))

    def games_per_s(self) -> float:
        return sum(e[1] for e in self.events) / self._span()

    def positions_per_s(self) -> float:
        return sum(e[2] for e in self.events) / self._span()
