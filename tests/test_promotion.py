"""The training arena's decisions (``alphazero.judge.promotion``), without a cluster: the openings of a
generation, the games a continued arena still has to play, the saved game lines, the score from the
candidate's side, the promotion at the threshold, and what a promotion changes in the run state."""

from __future__ import annotations

import json

import pytest

from alphazero.checkpoint import RunDirectory, RunState
from alphazero.config import load_config
from alphazero.judge.arena import play_match
from alphazero.judge.players import GreedyPlayer, RandomPlayer
from alphazero.judge.promotion import (
    arena_game_line,
    arena_openings,
    decide_arena,
    missing_games,
    pending_arena,
    pending_openings,
    record_arena,
)


def _pending(tmp_path, games: int = 4, **state_fields):
    config = load_config(None, [f"arena.games={games}", "arena.random_opening_plies=2", "seed=3"])
    state = RunState(**state_fields)
    return config, state, pending_arena(RunDirectory(tmp_path), state, config)


def _line(index: int, result: str, a_is_white: bool, termination: str = "checkmate", pid: int = 1) -> dict:
    return {"index": index, "result": result, "termination": termination, "plies": 30, "a_is_white": a_is_white,
            "white": "w", "black": "b", "opening": "o", "pgn": f'[Round "{index + 1}"]\n\n1. e4 *', "pid": pid}


def test_the_next_arena_is_the_next_generation_against_the_best_with_its_seeded_openings(tmp_path) -> None:
    config, state, pending = _pending(tmp_path, games=6, generation=4, best_generation=2, learner_step=700)
    assert (pending.generation, pending.candidate, pending.best) == (5, "gen-0005.pt", "gen-0002.pt")
    assert (pending.best_generation, pending.learner_step, pending.num_games) == (2, 700, 6)
    assert pending_openings(pending) == arena_openings(config, 5)  # the stored openings are the generation's own
    assert arena_openings(config, 5) != arena_openings(config, 6)
    json.dumps(pending.openings)  # stored in state.json as plain data


def test_a_continued_arena_plays_only_its_missing_games_with_their_openings_and_colours(tmp_path) -> None:
    _, _, pending = _pending(tmp_path, games=6)
    openings = pending_openings(pending)
    assert [entry[0] for entry in missing_games(pending, set())] == list(range(6))
    left = missing_games(pending, {0, 3, 4})
    assert [(index, a_white) for index, _, a_white in left] == [(1, False), (2, True), (5, False)]
    assert all(opening == openings[index // 2] for index, opening, _ in left)
    assert missing_games(pending, set(range(6))) == []


def test_the_score_is_the_candidates_whatever_colour_it_played(tmp_path) -> None:
    _, _, pending = _pending(tmp_path, learner_step=40)
    # Candidate (A) wins as White and as Black, draws once, loses once as White.
    lines = [_line(0, "1-0", True), _line(1, "0-1", False), _line(2, "1/2-1/2", True, "max length", pid=2),
             _line(3, "0-1", True)]
    decision = decide_arena(pending, lines, threshold=0.55)
    record = decision.record
    assert (record.wins, record.draws, record.losses) == (2, 1, 1) and record.score == 0.625
    assert record.promoted and decision.promoted and record.elo > 0 and record.elo_low < record.elo < record.elo_high
    assert (record.generation, record.candidate, record.best, record.learner_step) == (1, "gen-0001.pt", "gen-0000.pt", 40)
    assert decision.terminations == {"checkmate": 3, "max length": 1}
    assert decision.processes == 2  # played by two drivers (a stop in between)
    assert decision.pgn.count("[Round ") == 4 and decision.pgn.endswith("\n")


@pytest.mark.parametrize("score_lines, threshold, promoted", [
    (["1-0", "1-0", "1-0", "1-0"], 0.5, True),  # White won every game: two wins, two losses; exactly the threshold
    (["1-0", "1-0", "1-0", "1-0"], 0.55, False),
    (["0-1", "1-0", "0-1", "1-0"], 0.01, False),  # four losses: score 0
    (["1-0", "0-1", "1-0", "0-1"], 1.0, True),  # four wins
])
def test_promotion_at_a_score_of_at_least_the_threshold(tmp_path, score_lines, threshold, promoted) -> None:
    _, _, pending = _pending(tmp_path)
    # The candidate (A) plays White in the even games.
    lines = [_line(i, result, i % 2 == 0) for i, result in enumerate(score_lines)]
    record = decide_arena(pending, lines, threshold).record
    assert record.promoted is promoted
    assert all(abs(value) < 1e5 for value in (record.elo, record.elo_low, record.elo_high))  # finite in state.json


def test_the_decision_counts_what_the_in_process_match_counts(tmp_path) -> None:
    """Games played by ``play_match`` and saved as lines score as the match itself scored them."""
    _, _, pending = _pending(tmp_path, games=6)
    outcome = play_match(GreedyPlayer(seed=1), RandomPlayer(seed=2), pending_openings(pending), max_plies=80)
    lines = [json.loads(json.dumps(arena_game_line(game, pid=7)))
             for game in sorted(outcome.games, key=lambda g: g.index)]
    assert {line["pid"] for line in lines} == {7}
    record = decide_arena(pending, lines, threshold=0.55).record
    assert (record.wins, record.draws, record.losses) == (outcome.wins, outcome.draws, outcome.losses)
    assert record.score == outcome.score and record.promoted == (outcome.score >= 0.55)


def test_a_promotion_makes_the_candidate_the_best_under_a_new_network_version(tmp_path) -> None:
    _, state, pending = _pending(tmp_path, generation=1, best_generation=0, network_version=3)
    state.pending_arena = pending
    kept = decide_arena(pending, [_line(i, "1/2-1/2", i % 2 == 0) for i in range(4)], threshold=0.55).record
    record_arena(state, kept)
    assert (state.generation, state.best_generation, state.network_version, state.pending_arena) == (2, 0, 3, None)
    state.pending_arena = pending = pending_arena(RunDirectory(tmp_path), state, load_config(None, ["arena.games=4"]))
    wins = [_line(i, "1-0" if i % 2 == 0 else "0-1", i % 2 == 0) for i in range(3)] + [_line(3, "1-0", False)]
    won = decide_arena(pending, wins, 0.55).record  # 3 wins, 1 loss
    record_arena(state, won)
    assert (state.generation, state.best_generation, state.network_version, state.pending_arena) == (3, 3, 4, None)
    assert [a.promoted for a in state.arenas] == [False, True]
