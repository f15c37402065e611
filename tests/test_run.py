"""A training run's decisions (``alphazero.learn.run``), without a cluster: what a resume checks and
recounts, how saved games in flight are dealt, when the learner trains, when an arena is due, when
the run stops, and the self-play statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from alphazero.checkpoint import ArenaRecord, PendingArena, RunDirectory, RunState
from alphazero.config import load_config
from alphazero.errors import ConfigError, InputError
from alphazero.learn.replay import next_shard_path, write_inflight, write_shard
from alphazero.learn.run import (
    GameStats,
    arena_due,
    deal_inflight,
    final_arena_due,
    finished,
    first_arena_step,
    may_train,
    read_for_resume,
    run_progress,
    stop_reason,
)
from alphazero.learn.train import LEARNER_FORMAT_VERSION, Learner
from alphazero.nets.network import PolicyValueNet, atomic_torch_save, save_network
from alphazero.search.records import GameRecord

SMOKE = Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml"


def _game(result: str, termination: str, extra: dict, positions: int = 0) -> GameRecord:
    return GameRecord(planes=np.zeros((positions, 122), np.uint8), policy_offsets=np.arange(positions + 1, dtype=np.int64),
                      policy_actions=np.zeros(positions, np.uint16), policy_counts=np.ones(positions, np.uint16),
                      z=np.zeros(positions, np.int8), root_values=np.zeros(positions, np.float16), result=result,
                      termination=termination, network_version=0, pgn="", plies=10, extra=extra)


def test_game_statistics_count_value_targets_and_false_resignations() -> None:
    stats = GameStats()
    assert stats.summary()["decisive"] is None  # nothing yet: no made-up zeros
    stats.add([_game("1-0", "resignation", {}), _game("1/2-1/2", "max length", {"resign_playout": True}),
               _game("0-1", "checkmate", {"resign_playout": True, "would_resign": True, "false_resign": False}),
               _game("1/2-1/2", "threefold repetition", {"resign_playout": True, "would_resign": True,
                                                          "false_resign": True}),
               # Stopped at the length limit: no verdict, so not in the false resignation rate's denominator.
               _game("1/2-1/2", "max length", {"resign_playout": True, "would_resign": True, "unfinished": True,
                                                "false_resign": False})])
    summary = stats.summary()
    assert summary["games"] == 5 and summary["decisive"] == 0.4 and summary["max_length"] == 0.4
    assert summary["resigned"] == 0.2 and summary["resign_playouts"] == 4 and summary["would_resign"] == 3
    assert summary["resign_unfinished"] == 1
    assert summary["false_resign_rate"] == 0.5 and summary["mean_plies"] == 10


def test_the_learner_trains_with_enough_positions_and_within_the_reuse_bound() -> None:
    config = load_config(None, ["train.min_positions=100", "train.window_positions=1000", "train.batch_size=10",
                                "train.steps_per_call=5", "train.max_sample_reuse=2"])
    assert not may_train(config, RunState(positions=99))  # too few positions yet
    assert may_train(config, RunState(positions=100))
    # The next call's 50 samples must fit in 2 x positions: 150 + 50 <= 200, 151 + 50 > 200.
    assert may_train(config, RunState(positions=100, samples_trained=150))
    assert not may_train(config, RunState(positions=100, samples_trained=151))


def _arena(generation: int, step: int) -> ArenaRecord:
    return ArenaRecord(generation, f"gen-{generation:04d}.pt", "gen-0000.pt", 1, 2, 1, 0.5, 0.0, -1.0, 1.0, False, step)


def test_an_arena_is_due_every_steps_per_generation_one_at_a_time() -> None:
    config = load_config(None, ["arena.steps_per_generation=100"])
    assert first_arena_step(config, RunState(learner_step=250)) == 200
    assert first_arena_step(config, RunState(learner_step=250, arenas=[_arena(2, 230)])) == 230  # a later arena counts
    assert first_arena_step(config, RunState(learner_step=250, candidate_step=240)) == 240  # promoted without games
    pending = PendingArena(3, "gen-0003.pt", "gen-0000.pt", 0, 240, [])
    assert first_arena_step(config, RunState(learner_step=260, pending_arena=pending)) == 240
    assert not arena_due(config, RunState(learner_step=299), 200)
    assert arena_due(config, RunState(learner_step=300), 200)
    assert not arena_due(config, RunState(learner_step=300, pending_arena=pending), 200)  # one arena at a time


def test_the_run_stops_at_max_generations_or_max_minutes_over_all_its_resumes() -> None:
    config = load_config(None, ["max_generations=3", "max_minutes=1.5"])
    assert stop_reason(config, RunState(generation=2, elapsed_s=89.9)) is None
    assert stop_reason(config, RunState(generation=3)) == "reached max_generations=3"
    assert stop_reason(config, RunState(generation=2, elapsed_s=90.0)) == "reached max_minutes=1.5"
    assert stop_reason(load_config(None, ["max_generations=0", "max_minutes=0"]), RunState(generation=99, elapsed_s=1e9)) is None


def test_a_last_arena_is_due_at_max_minutes_for_weights_newer_than_the_last_candidate() -> None:
    config = load_config(None, ["max_generations=0", "max_minutes=1", "arena.final=true"])
    pending = PendingArena(4, "gen-0004.pt", "gen-0002.pt", 2, 300, [])
    assert final_arena_due(config, RunState(learner_step=350, elapsed_s=60.0), 300)
    assert not final_arena_due(config, RunState(learner_step=350, elapsed_s=59.9), 300)  # not yet over
    assert not final_arena_due(config, RunState(learner_step=300, elapsed_s=60.0), 300)  # no newer weights
    assert not final_arena_due(config, RunState(learner_step=350, elapsed_s=60.0, pending_arena=pending), 300)
    assert not final_arena_due(load_config(None, ["max_generations=0", "max_minutes=1"]),
                               RunState(learner_step=350, elapsed_s=60.0), 300)  # arena.final off
    capped = load_config(None, ["max_generations=3", "max_minutes=1", "arena.final=true"])
    assert final_arena_due(capped, RunState(generation=2, learner_step=350, elapsed_s=60.0), 300)
    assert not final_arena_due(capped, RunState(generation=3, learner_step=350, elapsed_s=60.0), 300)  # no room left
    with pytest.raises(ConfigError, match="arena.final .* needs max_minutes > 0"):
        load_config(None, ["max_minutes=0", "arena.final=true"])


def test_a_run_is_finished_at_its_end_with_no_arena_pending_or_due() -> None:
    """What a resume reports without starting anything: the end is reached and no arena is left to play."""
    config = load_config(None, ["max_generations=3", "max_minutes=1", "arena.steps_per_generation=100"])
    pending = PendingArena(3, "gen-0003.pt", "gen-0002.pt", 2, 300, [])
    assert finished(config, RunState(generation=2, elapsed_s=30.0)) is None  # work left
    assert finished(config, RunState(generation=3, learner_step=350)) == "reached max_generations=3"
    assert finished(config, RunState(generation=2, elapsed_s=60.0, learner_step=350)) == "reached max_minutes=1.0"
    assert finished(config, RunState(generation=2, elapsed_s=60.0, pending_arena=pending)) is None  # finish the arena
    final = load_config(None, ["max_generations=0", "max_minutes=1", "arena.final=true", "arena.steps_per_generation=100"])
    assert finished(final, RunState(elapsed_s=60.0, learner_step=350, candidate_step=300)) is None  # newer weights: a last arena
    assert finished(final, RunState(elapsed_s=60.0, learner_step=300, candidate_step=300)) == "reached max_minutes=1.0"


def test_run_progress_is_the_share_of_max_minutes_gone_over_all_its_resumes() -> None:
    config = load_config(None, ["max_minutes=2", "train.lr_anneal_fraction=0.25"])
    assert run_progress(config, RunState(elapsed_s=0.0)) == 0.0
    assert run_progress(config, RunState(elapsed_s=90.0)) == pytest.approx(0.75)
    assert run_progress(config, RunState(elapsed_s=500.0)) == 1.0  # a last call after the deadline
    assert run_progress(load_config(None, ["max_minutes=0"]), RunState(elapsed_s=90.0)) is None
    with pytest.raises(ConfigError, match="needs max_minutes > 0"):
        load_config(None, ["max_minutes=0", "train.lr_anneal_fraction=0.25"])


def test_games_in_flight_are_dealt_to_however_many_slots_the_resumed_run_has() -> None:
    saved = [[{"id": 0}, {"id": 1}, {"id": 2}], [], [{"id": 3}]]
    two = deal_inflight(saved, 2)
    assert [[g["id"] for g in slot] for slot in two] == [[0, 2], [1, 3]]
    assert [[g["id"] for g in slot] for slot in deal_inflight(saved, 5)] == [[0], [1], [2], [3], []]
    assert deal_inflight([], 2) == [[], []]


def _stopped_run(tmp_path: Path) -> tuple[RunDirectory, object]:
    """A run directory as a stopped run leaves it: config, state, generation 0, learner state, two shards."""
    config = load_config(SMOKE)
    run = RunDirectory(tmp_path / "run")
    run.write_config(config)
    save_network(PolicyValueNet(config.network), run.network_path(0))
    learner = Learner(config.network, config.train)
    learner.step, learner.samples_trained = 9, 576  # saved after state.json was: the learner's file wins
    atomic_torch_save(learner.state_dict(), run.learner_path)
    write_shard(next_shard_path(run.replay_dir), [_game("1-0", "checkmate", {}, 3), _game("0-1", "checkmate", {}, 4)])
    write_shard(next_shard_path(run.replay_dir), [_game("1/2-1/2", "max length", {}, 5)])
    run.write_state(RunState(games=1, positions=2, learner_step=7))  # counters behind the shards: a kill
    return run, config


def test_a_resume_recounts_games_and_positions_from_the_shards_and_reads_the_learners_step(tmp_path) -> None:
    run, config = _stopped_run(tmp_path)
    state = read_for_resume(run, config)
    assert (state.games, state.positions, state.learner_step, state.samples_trained) == (3, 12, 9, 576)


def _files(run: RunDirectory) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in run.path.rglob("*") if path.is_file()}


@pytest.mark.parametrize("damage, error, named", [
    ("learner_header", InputError, "learner.pt: not a learner state file"),
    ("learner_version", InputError, f"learner.pt: learner format_version 99, expected {LEARNER_FORMAT_VERSION}"),
    ("inflight", InputError, "delete it to resume without the games it holds"),
    ("shard", InputError, "shard-00000001.npz"),
    ("config", ConfigError, "network.channels is 32"),
])
def test_a_resume_names_what_stops_it_and_writes_nothing(tmp_path, damage, error, named) -> None:
    run, config = _stopped_run(tmp_path)
    if damage == "learner_header":
        torch.save({"format": "something else"}, run.learner_path)
    elif damage == "learner_version":
        state = torch.load(run.learner_path, weights_only=True)
        torch.save({**state, "format_version": 99}, run.learner_path)
    elif damage == "inflight":
        write_inflight(run.inflight_path, [[]])
        run.inflight_path.write_bytes(run.inflight_path.read_bytes()[:40])
    elif damage == "shard":
        path = run.replay_dir / "shard-00000001.npz"
        path.write_bytes(path.read_bytes()[:64])
    else:
        config = load_config(SMOKE, ["network.channels=32"])
    before = _files(run)
    with pytest.raises(error, match=named):
        read_for_resume(run, config)
    assert _files(run) == before
