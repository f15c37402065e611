"""A training run's decisions between arenas: what a resume checks, when to train, when to stop.

Owns the rules the driver loop applies, each a plain function of the config and the ``RunState``:

- ``read_for_resume``: everything a resume depends on is read and checked before anything starts
  (config conflicts, run state, the best and the pending candidate networks, the arena's saved games,
  the self-play games in flight, the learner's file header), so a damaged file fails with its name
  and nothing is written until all of them have been read; the game and position counters are
  recounted from the replay shards and the learner's step read from its own file (the truth after a kill);
- ``deal_inflight``: the saved self-play games in flight, dealt round-robin to this run's actor slots
  (their number may have changed);
- ``may_train``: the learner takes another call only with enough positions and while the samples
  trained stay within ``train.max_sample_reuse`` x the positions generated;
- ``first_arena_step`` and ``arena_due``: a candidate every ``arena.steps_per_generation`` learner
  steps, one arena at a time;
- ``stop_reason``: ``max_generations`` arenas decided or ``max_minutes`` of run time (over all resumes);
  ``finished``: a run with nothing left to do (its end reached, no arena pending or due), which a resume
  reports without starting anything;
- ``GameStats``: how the self-play games since the last arena ended (what the value head learns from).

The arena's own decision is ``alphazero.judge.promotion``. Knows nothing of Ray, actors or clocks:
``workers.driver`` applies these rules to actors and measures the time.
"""

from __future__ import annotations

from typing import Sequence

from alphazero.board.game import MAX_LENGTH, RESIGNATION
from alphazero.checkpoint import RunDirectory, RunState, resume_conflicts
from alphazero.config import RunConfig
from alphazero.errors import ConfigError, InputError
from alphazero.learn.replay import read_inflight, read_shard, shard_paths
from alphazero.learn.train import check_learner_state
from alphazero.nets.network import net_from_payload, safe_torch_load
from alphazero.search.records import GameRecord


def read_for_resume(run: RunDirectory, config: RunConfig) -> RunState:
    """The state ``run`` goes on from with ``config``, once every file a resume reads has been checked.

    Raises a ``UserError`` naming the file (or the config keys) that stop the resume; reads only.
    """
    conflicts = resume_conflicts(run.read_config(), config)
    if conflicts:
        raise ConfigError("cannot resume with this config: " + "; ".join(conflicts))
    state = run.read_state()
    best = run.network_path(state.best_generation)
    net_from_payload(safe_torch_load(best), str(best))
    if state.pending_arena is not None:
        candidate = run.networks_dir / state.pending_arena.candidate
        net_from_payload(safe_torch_load(candidate), str(candidate))
        run.read_arena_games(state.pending_arena.generation)
    try:
        read_inflight(run.inflight_path)
    except ValueError as error:
        raise InputError(f"{error}; delete it to resume without the games it holds") from None
    learner = safe_torch_load(run.learner_path)
    check_learner_state(learner, str(run.learner_path))
    state.games, state.positions = replay_totals(run)
    # The learner saves its own file after each call, so it may be ahead of state.json after a kill.
    state.learner_step, state.samples_trained = int(learner["step"]), int(learner["samples_trained"])
    return state


def replay_totals(run: RunDirectory) -> tuple[int, int]:
    """Games and positions in the run's replay shards (reads every shard: a damaged one is named)."""
    games = positions = 0
    for path in shard_paths(run.replay_dir):
        shard = read_shard(path)
        games += shard.num_games
        positions += shard.num_positions
    return games, positions


def deal_inflight(saved: Sequence[Sequence[dict]], num_slots: int) -> list[list[dict]]:
    """The games in flight saved per slot (``alphazero.learn.replay.read_inflight``), dealt round-robin
    to ``num_slots`` slots, so none is lost when a resume runs fewer self-play actors than before."""
    games = [game for slot in saved for game in slot]
    slots: list[list[dict]] = [[] for _ in range(num_slots)]
    for number, game in enumerate(games):
        slots[number % num_slots].append(game)
    return slots


def may_train(config: RunConfig, state: RunState) -> bool:
    """Whether the learner may take its next ``train.steps_per_call`` steps: the window holds at least
    ``train.min_positions`` and the samples trained stay <= ``max_sample_reuse`` x positions generated."""
    train = config.train
    enough = min(state.positions, train.window_positions) >= train.min_positions
    return enough and state.samples_trained + train.steps_per_call * train.batch_size <= train.max_sample_reuse * state.positions


def first_arena_step(config: RunConfig, state: RunState) -> int:
    """The learner step the next arena counts from when a run (re)starts: the pending arena's step, else
    the last multiple of ``arena.steps_per_generation`` reached (or the last candidate's step, if later)."""
    if state.pending_arena is not None:
        return state.pending_arena.learner_step
    step = state.learner_step - (state.learner_step % config.arena.steps_per_generation)
    step = max(step, state.candidate_step)
    if state.arenas:  # a state.json written before candidate_step existed
        step = max(step, state.arenas[-1].learner_step)
    return step


def arena_due(config: RunConfig, state: RunState, last_arena_step: int) -> bool:
    """A new candidate is due: no arena pending and ``arena.steps_per_generation`` steps since the last."""
    return state.pending_arena is None and state.learner_step - last_arena_step >= config.arena.steps_per_generation


def run_progress(config: RunConfig, state: RunState) -> float | None:
    """The share of the run's wall time gone (``state.elapsed_s`` over ``max_minutes``, at most 1), which the
    learner anneals its learning rate by; None for a run with no time limit."""
    if not config.max_minutes:
        return None
    return min(state.elapsed_s / (config.max_minutes * 60), 1.0)


def time_up(config: RunConfig, state: RunState) -> bool:
    """``max_minutes`` of run time (``state.elapsed_s``, over all its resumes) are gone."""
    return bool(config.max_minutes) and state.elapsed_s >= config.max_minutes * 60


def final_arena_due(config: RunConfig, state: RunState, last_arena_step: int) -> bool:
    """The run's last arena is due (``arena.final``): ``max_minutes`` is up, no arena is pending, the learner
    trained since the last candidate, and ``max_generations`` leaves room for one more generation."""
    room = not config.max_generations or state.generation < config.max_generations
    return (config.arena.final and time_up(config, state) and room and state.pending_arena is None
            and state.learner_step > last_arena_step)


def stop_reason(config: RunConfig, state: RunState) -> str | None:
    """Why the run stops now (``max_generations`` decided, ``max_minutes`` of ``state.elapsed_s``), else None."""
    if config.max_generations and state.generation >= config.max_generations:
        return f"reached max_generations={config.max_generations}"
    if time_up(config, state):
        return f"reached max_minutes={config.max_minutes}"
    return None


def finished(config: RunConfig, state: RunState) -> str | None:
    """Why a run has nothing left to do: ``stop_reason`` holds, no arena is pending and no final arena is
    due (``arena.final``); None while it has work."""
    reason = stop_reason(config, state)
    if reason is None or state.pending_arena is not None or final_arena_due(config, state, first_arena_step(config, state)):
        return None
    return reason


class GameStats:
    """How self-play games ended since the last arena: what the value head learns from, and resignation."""

    def __init__(self) -> None:
        self.games = self.decisive = self.max_length = self.resigned = self.plies = 0
        self.playouts = self.would_resign = self.false_resign = self.resign_unfinished = 0

    def add(self, games: Sequence[GameRecord]) -> None:
        for game in games:
            self.games += 1
            self.plies += game.plies
            self.decisive += game.result != "1/2-1/2"
            self.max_length += game.termination == MAX_LENGTH
            self.resigned += game.termination == RESIGNATION
            self.playouts += bool(game.extra.get("resign_playout"))
            self.would_resign += bool(game.extra.get("would_resign"))
            self.false_resign += bool(game.extra.get("false_resign"))
            self.resign_unfinished += bool(game.extra.get("unfinished"))

    def summary(self) -> dict[str, float | int | None]:
        """Shares of the games (None before the first game: no made-up zeros), mean length, resignation counts."""
        share = (lambda count: round(count / self.games, 4)) if self.games else (lambda count: None)
        return {
            "games": self.games, "decisive": share(self.decisive), "max_length": share(self.max_length),
            "resigned": share(self.resigned), "mean_plies": round(self.plies / self.games, 1) if self.games else None,
            "resign_playouts": self.playouts, "would_resign": self.would_resign,
            "resign_unfinished": self.resign_unfinished,  # of those: stopped at the length limit, no verdict
            "false_resign_rate": round(self.false_resign / judged, 4) if (judged := self.would_resign - self.resign_unfinished) else None,
        }
