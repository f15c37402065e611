"""Driver pieces that need no cluster: whether a config fits the machine, and self-play statistics."""

from __future__ import annotations

import numpy as np
import pytest

from alphazero.config import load_config
from alphazero.search.records import GameRecord
from workers.driver import RunError, _GameStats, available_cpus, check_fits


def test_a_config_that_fits_gets_the_machine_and_one_that_does_not_is_refused_with_the_fixes() -> None:
    cpus = available_cpus()
    fits = load_config(None, [f"workers.num_selfplay_workers={cpus}", "workers.learner_cpus=0"])
    assert check_fits(fits) == cpus
    big = load_config(None, [f"workers.num_selfplay_workers={cpus + 3}", "workers.learner_cpus=1",
                             "workers.arena_cpus=0.5"])
    with pytest.raises(RunError) as caught:
        check_fits(big)
    message = str(caught.value)
    assert f"asks for {cpus + 4.5:g} CPUs" in message and f"this machine has {cpus}" in message
    assert f"workers.num_selfplay_workers={max(cpus - 2, 0)}" in message or cpus < 3
    assert "--address" in message and "--oversubscribe" in message
    assert check_fits(big, oversubscribe=True) == cpus + 5  # a Ray as large as the config asks


def test_cuda_without_a_gpu_is_refused() -> None:
    import torch

    config = load_config(None, ["train.device=cuda"])
    if torch.cuda.is_available():
        assert check_fits(config) >= 1
    else:
        with pytest.raises(RunError, match="train.device is cuda but this machine has no CUDA GPU"):
            check_fits(config)


def _game(result: str, termination: str, extra: dict) -> GameRecord:
    empty = np.zeros(0)
    return GameRecord(planes=np.zeros((0, 122), np.uint8), policy_offsets=np.zeros(1, np.int64), policy_actions=empty,
                      policy_counts=empty, z=empty, root_values=empty, result=result, termination=termination,
                      network_version=0, pgn="", plies=10, extra=extra)


def test_game_statistics_count_value_targets_and_false_resignations() -> None:
    stats = _GameStats()
    assert stats.summary()["decisive"] is None  # nothing yet: no made-up zeros
    stats.add([_game("1-0", "resignation", {}), _game("1/2-1/2", "max length", {"resign_playout": True}),
               _game("0-1", "checkmate", {"resign_playout": True, "would_resign": True, "false_resign": False}),
               _game("1/2-1/2", "threefold repetition", {"resign_playout": True, "would_resign": True,
                                                          "false_resign": True})])
    summary = stats.summary()
    assert summary["games"] == 4 and summary["decisive"] == 0.5 and summary["max_length"] == 0.25
    assert summary["resigned"] == 0.25 and summary["resign_playouts"] == 3 and summary["would_resign"] == 2
    assert summary["false_resign_rate"] == 0.5 and summary["mean_plies"] == 10
