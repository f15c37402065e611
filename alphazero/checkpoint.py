"""The run directory: what a resume needs, written atomically and read back safely.

Layout of ``RUN/``::

    config.yaml          the resolved config of the run
    state.json           run state: generation, best network, counters, arena history
    learner.pt           learner state: network, optimizer, step, random states
    networks/gen-NNNN.pt every generation's candidate network (gen-0000 is the initial best)
    replay/shard-*.npz   self-play games (``alphazero.learn.replay``)
    replay/inflight.npz  self-play games not yet finished, per actor slot: a resume continues them
    arena/gen-NNNN.jsonl one line per finished arena game of generation NNNN, appended as it ends
    arena/gen-NNNN.inflight.json  the moves of its unfinished games, rewritten after every arena call
    arena/gen-NNNN.pgn   the games of a decided arena
    metrics.jsonl        one line per learner call: losses, learning rate, samples/s
    events.jsonl         driver events: arena results, promotions, restarted workers
    tensorboard/         live curves for TensorBoard (``alphazero.learn.curves``)
    .train.lock          held by the one driver of this run (``alphazero.fileio.DirectoryLock``)

Every file is replaced by temp file + rename, so a kill at any moment leaves the previous version;
JSON-lines files are appended and fsynced line by line, a torn last line is skipped on read.
Torch files are read with ``weights_only=True``; JSON and YAML are plain data.

An arena in flight is part of the run: ``state.json`` names it (``pending_arena``: candidate, best,
the openings and the colour of each game) and its finished games are in ``arena/gen-NNNN.jsonl``,
so a resumed run plays only the games that are missing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from alphazero.config import ConfigError, RunConfig, config_from_dict, config_to_dict, saved_config
from alphazero.errors import InputError, RunStateError
from alphazero.fileio import DirectoryLock, append_jsonl, atomic_write_text, read_jsonl, read_text

__all__ = ["ArenaRecord", "DirectoryLock", "PendingArena", "RunDirectory", "RunState", "append_jsonl",
           "atomic_write_text", "read_jsonl", "resume_conflicts"]

RUN_STATE_FORMAT_VERSION = 2  # 2 added pending_arena; version 1 files are read as having none
ARENA_GAMES_FORMAT_VERSION = 1


@dataclass
class ArenaRecord:
    generation: int
    candidate: str
    best: str
    wins: int
    draws: int
    losses: int
    score: float
    elo: float
    elo_low: float
    elo_high: float
    promoted: bool
    learner_step: int
    time: float = field(default_factory=time.time)


@dataclass
class PendingArena:
    """An arena that has started and not yet been decided.

    ``openings`` are ``[name, fen, [uci moves]]``; game ``i`` plays opening ``i // 2`` with the
    candidate as White when ``i`` is even (``alphazero.judge.arena.match_schedule``).
    """

    generation: int
    candidate: str  # network file name under networks/
    best: str
    best_generation: int
    learner_step: int
    openings: list[list[Any]]
    started: float = field(default_factory=time.time)

    @property
    def num_games(self) -> int:
        return 2 * len(self.openings)


@dataclass
class RunState:
    """Counters and history of a run; ``generation`` counts arena decisions made."""

    generation: int = 0
    best_generation: int = 0
    network_version: int = 0  # bumps at each promotion; self-play games are tagged with it
    games: int = 0
    positions: int = 0
    learner_step: int = 0
    samples_trained: int = 0
    arenas: list[ArenaRecord] = field(default_factory=list)
    elapsed_s: float = 0.0
    pending_arena: PendingArena | None = None
    candidate_step: int = 0  # the learner step of the last candidate (arena or, with no gating, promoted)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["format_version"] = RUN_STATE_FORMAT_VERSION
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str, source: str) -> "RunState":
        try:
            data = json.loads(text)
            version = data.pop("format_version")
            if version not in (1, RUN_STATE_FORMAT_VERSION):
                raise InputError(f"{source}: run state format_version {version}, expected {RUN_STATE_FORMAT_VERSION}")
            data["arenas"] = [ArenaRecord(**record) for record in data.get("arenas", [])]
            pending = data.get("pending_arena")
            data["pending_arena"] = PendingArena(**pending) if pending is not None else None
            return cls(**data)
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
            raise InputError(f"{source}: corrupt run state ({type(error).__name__}: {error})") from None


class RunDirectory:
    """Paths and safe reads/writes of one run directory."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    config_path = property(lambda self: self.path / "config.yaml")
    state_path = property(lambda self: self.path / "state.json")
    learner_path = property(lambda self: self.path / "learner.pt")
    networks_dir = property(lambda self: self.path / "networks")
    replay_dir = property(lambda self: self.path / "replay")
    metrics_path = property(lambda self: self.path / "metrics.jsonl")
    events_path = property(lambda self: self.path / "events.jsonl")
    inflight_path = property(lambda self: self.path / "replay" / "inflight.npz")
    tensorboard_dir = property(lambda self: self.path / "tensorboard")

    def network_path(self, generation: int) -> Path:
        return self.networks_dir / f"gen-{generation:04d}.pt"

    def arena_games_path(self, generation: int) -> Path:
        return self.path / "arena" / f"gen-{generation:04d}.jsonl"

    def arena_inflight_path(self, generation: int) -> Path:
        return self.path / "arena" / f"gen-{generation:04d}.inflight.json"

    def arena_pgn_path(self, generation: int) -> Path:
        return self.path / "arena" / f"gen-{generation:04d}.pgn"

    def lock(self) -> DirectoryLock:
        """Take the driver's lock of this run (``LockedError`` if another driver holds it)."""
        return DirectoryLock(self.path, "train").acquire()

    def read_arena_games(self, generation: int) -> dict[int, dict[str, Any]]:
        """Finished games of generation ``generation``'s arena by game index (the first line wins)."""
        path = self.arena_games_path(generation)
        games: dict[int, dict[str, Any]] = {}
        for record in read_jsonl(path):
            if record.get("format_version") != ARENA_GAMES_FORMAT_VERSION:
                raise InputError(f"{path}: arena game with format_version {record.get('format_version')!r}, "
                                 f"expected {ARENA_GAMES_FORMAT_VERSION}")
            games.setdefault(int(record["index"]), record)
        return games

    def read_arena_inflight(self, generation: int) -> dict[int, list[str]]:
        """Moves of the arena's unfinished games by index (none if the file is missing or unreadable:
        those games then start again from their openings)."""
        try:
            data = json.loads(self.arena_inflight_path(generation).read_text())
            return {int(index): list(moves) for index, moves in data["games"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def write_arena_inflight(self, generation: int, games: dict[int, list[str]]) -> None:
        atomic_write_text(self.arena_inflight_path(generation), json.dumps({"format_version": 1, "games": games}))

    def append_arena_game(self, generation: int, record: dict[str, Any]) -> None:
        append_jsonl(self.arena_games_path(generation), {"format_version": ARENA_GAMES_FORMAT_VERSION, **record})

    def exists(self) -> bool:
        """True once a run has been created here (``state.json`` is the last file a new run writes)."""
        return self.state_path.exists()

    def write_config(self, config: RunConfig) -> None:
        atomic_write_text(self.config_path, yaml.safe_dump(config_to_dict(config), sort_keys=False))

    def read_config(self) -> RunConfig:
        if not self.config_path.is_file():
            raise RunStateError(f"{self.config_path}: missing; is {self.path} a run directory?")
        try:
            data = yaml.safe_load(read_text(self.config_path, "run's config"))
        except yaml.YAMLError as error:
            raise InputError(f"{self.config_path}: corrupt YAML: {error}") from None
        try:
            return config_from_dict(saved_config(data) if isinstance(data, dict) else data or {})
        except ConfigError as error:
            raise ConfigError(f"{self.config_path}: {error}") from None

    def write_state(self, state: RunState) -> None:
        atomic_write_text(self.state_path, state.to_json())

    def read_state(self) -> RunState:
        if not self.state_path.is_file():
            raise RunStateError(f"{self.state_path}: missing; is {self.path} a run directory?")
        return RunState.from_json(read_text(self.state_path, "run state"), str(self.state_path))

    def log_event(self, kind: str, **fields: Any) -> None:
        append_jsonl(self.events_path, {"time": time.time(), "event": kind, **fields})


def config_changes(saved: RunConfig, requested: RunConfig) -> list[str]:
    """Each setting ``requested`` changes from ``saved``, as ``section.key: old -> new`` in the configs' order.

    A resume runs with the config it is given (``--config`` and ``--set``), not the run's own ``config.yaml``;
    these are the lines that tell the user so.
    """
    def flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, dict) and value:
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out
    old, new = flat(config_to_dict(saved)), flat(config_to_dict(requested))
    return [f"{key}: {old.get(key)!r} -> {new.get(key)!r}"
            for key in list(old) + [key for key in new if key not in old] if old.get(key) != new.get(key)]


def resume_conflicts(saved: RunConfig, requested: RunConfig) -> list[str]:
    """Reasons ``requested`` cannot continue a run made with ``saved`` (empty when it can).

    The network's shape, the seed and the optimizer (its saved state) define the run; everything
    else (workers, budgets, schedules) may change on resume.
    """
    reasons = []
    saved_net, new_net = dataclasses.asdict(saved.network), dataclasses.asdict(requested.network)
    for key in saved_net:
        if saved_net[key] != new_net[key]:
            reasons.append(f"network.{key} is {new_net[key]!r} but the run was made with {saved_net[key]!r} (the saved weights have that shape)")
    if saved.seed != requested.seed:
        reasons.append(f"seed is {requested.seed} but the run was made with seed {saved.seed}")
    if saved.train.optimizer != requested.train.optimizer:
        reasons.append(f"train.optimizer is {requested.train.optimizer!r} but the run was made with "
                       f"{saved.train.optimizer!r} (the saved optimizer state is of that kind)")
    return reasons
