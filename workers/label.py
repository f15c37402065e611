"""The parallel ``alphazero label``: one engine per Ray actor, a bounded number of batches in flight.

A ``Runner`` for ``alphazero.learn.label.run_label``: each ``LabelWorker`` actor owns one engine
process (a core ``Labeller``) and takes tasks (a batch of ``BATCH`` positions, or a game to play);
each actor has at most ``IN_FLIGHT`` tasks queued, so the object store and the driver hold little,
and results come back in completion order to be written by the driver (the only writer of the label file).
"""

from __future__ import annotations

from typing import Callable, Iterator

import ray

from alphazero.errors import UserError
from alphazero.learn.label import Labelled, Task, make_labeller
from workers.cluster import start_ray

IN_FLIGHT = 2  # tasks queued per actor: one running, one ready to start


class LabelWorker:
    """A ``Labeller`` as an actor: one engine process for the actor's lifetime."""

    def __init__(self, labeller_spec: str) -> None:
        self.labeller = make_labeller(labeller_spec)

    def run(self, task: Task) -> list[Labelled]:
        return self.labeller.run(task)

    def close(self) -> None:
        self.labeller.close()


def label_on_ray(tasks: Iterator[Task], labeller_spec: str, on_results: Callable[[list[Labelled]], None],
                 workers: int = 2, address: str | None = None) -> None:
    """Run ``tasks`` on ``workers`` actors of a private local Ray (or the cluster at ``address``).

    A Ray already running in this process is used as it is. An actor that dies ends the run with
    Ray's error; the rows written so far stay, and a rerun labels the rest.
    """
    started = start_ray(address, workers, object_store_memory_mb=128, log_to_driver=False)
    actors: list = []
    try:
        cls = ray.remote(num_cpus=1, max_restarts=0)(LabelWorker)
        actors = [cls.remote(labeller_spec) for _ in range(workers)]
        pending: dict = {}  # ref -> actor index

        def submit(index: int) -> None:
            task = next(tasks, None)
            if task is not None:
                pending[actors[index].run.remote(task)] = index

        for index in range(workers):
            for _ in range(IN_FLIGHT):
                submit(index)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready[0])
            try:
                results = ray.get(ready[0])
            except ray.exceptions.RayTaskError as error:  # a user error inside the actor stays one line
                cause = getattr(error, "cause", None)
                if isinstance(cause, UserError):
                    raise cause from None
                raise
            on_results(results)
            submit(index)
    finally:
        for actor in actors:
            try:
                ray.get(actor.close.remote(), timeout=10)
            except Exception:  # a dead actor has no engine left to close
                pass
            ray.kill(actor)
        if started:
            ray.shutdown()
