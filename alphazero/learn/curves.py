"""Live curves: TensorBoard scalars of a run, beside its JSON-lines files.

``RUN/tensorboard/`` gets the learner's losses and learning rate, self-play's games and positions per
second and its value-target statistics (decisive games, games stopped at the length cap,
resignations and false resignations), and every arena's Elo with its interval: ``tensorboard
--logdir RUN/tensorboard`` shows a run's learning as it happens. Each process (driver, learner)
writes its own event file there. ``metrics.jsonl`` and ``events.jsonl`` stay the record the project
itself reads; these curves are for people.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping


class Curves:
    """Scalars under ``prefix/name`` at a step; the TensorBoard writer is created on first use."""

    def __init__(self, log_dir: str | os.PathLike) -> None:
        self.log_dir = Path(log_dir)
        self._writer: Any = None

    def add(self, prefix: str, step: int, values: Mapping[str, float | int | None]) -> None:
        if self._writer is None:
            from torch.utils.tensorboard import (
                SummaryWriter,  # imports TensorBoard (~1 s): only when used
            )

            self._writer = SummaryWriter(str(self.log_dir))
        for name, value in values.items():
            if value is not None and math.isfinite(float(value)):
                self._writer.add_scalar(f"{prefix}/{name}", float(value), step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
