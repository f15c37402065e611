"""The training arena: a generation's candidate against the best network, from its openings to the promotion.

Owns what an arena of a training run is, as the run directory keeps it: its openings
(``arena_openings``, seeded by generation), the ``PendingArena`` that names it while it is played
(``pending_arena``), the games still missing when a stopped or failed arena goes on
(``missing_games``), the line saved for each finished game (``arena_game_line``, appended to
``arena/gen-NNNN.jsonl`` as the game ends), and the decision (``decide_arena``): the saved games
scored from the candidate's side with ``GameResult.score_a`` (``MatchOutcome``, as ``alphazero
arena`` scores a match), promoted when the score is at least ``arena.threshold``; ``record_arena``
writes the decision into the ``RunState`` (a promotion makes the candidate the best network and bumps
the network version the self-play actors play with).

Knows nothing of Ray, actors or processes: ``workers.driver`` plays the games with an actor and
applies these decisions; the same functions score an arena whoever played it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Collection, Sequence

from alphazero.checkpoint import ArenaRecord, PendingArena, RunDirectory, RunState
from alphazero.config import RunConfig
from alphazero.judge.arena import (
    GameResult,
    MatchOutcome,
    Opening,
    ScheduledGame,
    book_openings,
    match_schedule,
    random_openings,
)
from alphazero.judge.elo import match_result


def arena_openings(config: RunConfig, generation: int) -> list[Opening]:
    """The openings of generation ``generation``'s arena (half as many as games: each is a pair)."""
    arena = config.arena
    pairs = arena.games // 2
    seed = config.seed * 100_003 + generation
    if arena.opening_book:
        return book_openings(arena.opening_book, pairs, plies=max(arena.random_opening_plies, 1), seed=seed)
    return random_openings(pairs, arena.random_opening_plies, seed=seed)


def pending_arena(run: RunDirectory, state: RunState, config: RunConfig) -> PendingArena:
    """The next arena of the run in ``state``: generation ``state.generation + 1``'s candidate (its
    network file under ``run``) against the best network, with that generation's openings."""
    generation = state.generation + 1
    openings = arena_openings(config, generation)
    return PendingArena(
        generation=generation, candidate=run.network_path(generation).name,
        best=run.network_path(state.best_generation).name, best_generation=state.best_generation,
        learner_step=state.learner_step, openings=[[o.name, o.fen, list(o.moves)] for o in openings])


def pending_openings(pending: PendingArena) -> list[Opening]:
    return [Opening(name, fen, tuple(moves)) for name, fen, moves in pending.openings]


def missing_games(pending: PendingArena, finished: Collection[int]) -> list[ScheduledGame]:
    """The pending arena's games whose index is not in ``finished``, in schedule order (all of them
    for a new arena; what a stop or a dead worker left for a continued one)."""
    return [entry for entry in match_schedule(pending_openings(pending)) if entry[0] not in finished]


def arena_game_line(game: GameResult, **extra: Any) -> dict[str, Any]:
    """The saved line of a finished arena game (``RunDirectory.append_arena_game``); ``extra`` adds
    fields such as the ``pid`` of the process that saved it."""
    return {"index": game.index, "result": game.result, "termination": game.termination, "plies": game.plies,
            "a_is_white": game.a_is_white, "white": game.white, "black": game.black, "opening": game.opening.name,
            "pgn": game.pgn, **extra}


def game_from_line(line: dict[str, Any], openings: Sequence[Opening]) -> GameResult:
    """A saved arena line back as the ``GameResult`` it was made from (opening ``index // 2``)."""
    index = int(line["index"])
    return GameResult(index, openings[index // 2], line.get("white", ""), line.get("black", ""), line["result"],
                      line["termination"], int(line.get("plies", 0)), line["pgn"], bool(line["a_is_white"]))


def _finite(value: float) -> float:
    return float(value) if math.isfinite(value) else (1e4 if value > 0 else -1e4)


@dataclass(frozen=True)
class ArenaDecision:
    """A decided arena: its record for ``state.json``, the PGN of its games, how they ended, and how
    many processes saved them (more than one when the arena went on across a stop)."""

    record: ArenaRecord
    pgn: str
    terminations: dict[str, int]
    processes: int

    @property
    def promoted(self) -> bool:
        return self.record.promoted


def decide_arena(pending: PendingArena, lines: Sequence[dict[str, Any]], threshold: float) -> ArenaDecision:
    """Score the pending arena from its saved game ``lines`` (every game, in index order): the candidate
    (player A) is promoted when its score is at least ``threshold``."""
    openings = pending_openings(pending)
    outcome = MatchOutcome(pending.candidate, pending.best, [game_from_line(line, openings) for line in lines])
    stats = match_result(outcome.wins, outcome.draws, outcome.losses)
    record = ArenaRecord(
        generation=pending.generation, candidate=pending.candidate, best=pending.best,
        wins=outcome.wins, draws=outcome.draws, losses=outcome.losses, score=stats.score, elo=_finite(stats.elo),
        elo_low=_finite(stats.elo_low), elo_high=_finite(stats.elo_high), promoted=stats.score >= threshold,
        learner_step=pending.learner_step)
    return ArenaDecision(record, "\n\n".join(line["pgn"] for line in lines) + "\n", outcome.terminations(),
                         len({line.get("pid") for line in lines}))


def record_arena(state: RunState, record: ArenaRecord) -> None:
    """Write a decided arena into ``state``: one more generation, no arena pending, and on a promotion
    the candidate as the best network under the next network version."""
    state.arenas.append(record)
    state.generation = record.generation
    state.pending_arena = None
    if record.promoted:
        promote(state, record.generation)


def promote(state: RunState, generation: int) -> None:
    """Generation ``generation``'s network becomes the best, under the next network version (self-play
    games are tagged with it)."""
    state.best_generation = generation
    state.network_version += 1
