"""Tests for self-play (``alphazero.search.selfplay``): results, value targets, PGN, openings, temperature.

python-chess is the rules oracle: every game is replayed from its PGN and the replay decides who won,
which positions were recorded and what their planes must be.
"""

from __future__ import annotations

import io

import chess
import chess.pgn
import numpy as np
import pytest
import torch

from alphazero.board import encoding
from alphazero.config import NetworkConfig, SearchConfig, SelfPlayConfig
from alphazero.learn.replay import read_shard, write_shard
from alphazero.nets.evaluator import NetworkEvaluator, UniformEvaluator
from alphazero.nets.network import PolicyValueNet
from alphazero.search.selfplay import MAX_LENGTH, SelfPlayer

torch.set_num_threads(1)

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)

WHITE_MATES_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8#
BLACK_MATES_IN_ONE = "r5k1/5ppp/8/8/8/8/5PPP/6K1 b - - 0 1"  # ...Ra1#
# Black's only move is ...c3, then Rd8# (among others): a loser's position, then a winner's.
BLACK_FORCED_THEN_MATED = "k7/P7/1K6/8/2p5/8/8/3R4 b - - 0 1"
# White is in check; both legal moves (Kxh4, Nxh4) leave insufficient material.
EVERY_MOVE_DRAWS = "8/8/8/8/7r/5k1K/6N1/8 w - - 0 1"

# Deterministic, mate-finding search for the composed positions: no noise, no FPU penalty.
SHARP = SearchConfig(num_simulations=64, fpu_reduction=0.0, dirichlet_epsilon=0.0)


def _player(search=SHARP, fen: str | None = None, evaluator=None, seed: int = 0, **selfplay) -> SelfPlayer:
    config = SelfPlayConfig(**{"games_per_worker": 1, "max_plies": 200, "temperature_plies": 0, "random_opening_plies": 0,
                               **selfplay})
    return SelfPlayer(evaluator or UniformEvaluator(), search, config, seed=seed,
                      start_fen_fn=(lambda rng: fen) if fen else None)


def _replay(pgn: str) -> tuple[chess.pgn.Game, list[chess.Board], chess.Board]:
    """Parse a PGN: (game, board before every move, final board)."""
    game = chess.pgn.read_game(io.StringIO(pgn))
    assert game is not None and not game.errors, getattr(game, "errors", None)
    board = game.board()
    before = []
    for move in game.mainline_moves():
        assert board.is_legal(move)
        before.append(board.copy())
        board.push(move)
    return game, before, board


def _winner(board: chess.Board) -> chess.Color | None:
    return (not board.turn) if board.is_checkmate() else None


def _check_value_targets(record, before: list[chess.Board], final: chess.Board) -> None:
    """z[t] is +1 for the winner's positions, -1 for the loser's, 0 when nobody won."""
    recorded = before[record.plies - record.num_positions:]
    winner = _winner(final)
    for t, board in enumerate(recorded):
        expected = 0 if winner is None else (1 if board.turn == winner else -1)
        assert record.z[t] == expected, (t, board.fen())


# -- results and value targets --------------------------------------------------------------------------------


@pytest.mark.parametrize("fen, result", [(WHITE_MATES_IN_ONE, "1-0"), (BLACK_MATES_IN_ONE, "0-1")])
def test_mate_in_one_is_played_and_scored_for_the_mover(fen, result):
    record = _player(fen=fen).play(1)[0]
    game, before, final = _replay(record.pgn)
    assert final.is_checkmate()
    assert record.result == result == game.headers["Result"]
    assert record.termination == "checkmate" == game.headers["Termination"]
    assert record.plies == 1 and record.num_positions == 1
    assert record.z.tolist() == [1]  # the mover at the only recorded position won
    assert game.headers["FEN"] == fen


def test_loser_positions_get_minus_one():
    record = _player(fen=BLACK_FORCED_THEN_MATED, max_plies=20).play(1)[0]
    game, before, final = _replay(record.pgn)
    assert final.is_checkmate() and final.turn == chess.BLACK
    assert record.result == "1-0" and record.termination == "checkmate"
    assert record.plies == 2
    assert record.z.tolist() == [-1, 1]  # Black (lost) to move, then White (won) to move
    _check_value_targets(record, before, final)


def test_mate_on_the_last_allowed_ply_counts_as_a_win():
    record = _player(fen=WHITE_MATES_IN_ONE, max_plies=1).play(1)[0]
    assert record.result == "1-0" and record.termination == "checkmate" and record.z.tolist() == [1]


def test_drawn_game_gives_zero():
    record = _player(fen=EVERY_MOVE_DRAWS).play(1)[0]
    game, _, final = _replay(record.pgn)
    assert final.is_insufficient_material()
    assert record.result == "1/2-1/2" == game.headers["Result"]
    assert record.termination == "insufficient material"
    assert record.z.tolist() == [0]


def test_max_plies_is_adjudicated_a_draw():
    player = _player(search=SearchConfig(num_simulations=4), games_per_worker=2, max_plies=6, temperature_plies=6)
    records = player.play(2)
    assert len(records) == 2
    for record in records:
        game, before, final = _replay(record.pgn)
        assert record.result == "1/2-1/2" == game.headers["Result"]
        assert record.termination == "max length" == game.headers["Termination"]
        assert record.plies == 6 == len(before) == record.num_positions
        assert not final.is_game_over()
        assert (record.z == 0).all()


# -- realistic games: PGN, recorded positions, value targets -----------------------------------------------------


@pytest.fixture(scope="module")
def network_games():
    torch.manual_seed(0)
    net = PolicyValueNet(TINY)
    player = _player(search=SearchConfig(num_simulations=8), evaluator=NetworkEvaluator(net), seed=4,
                     games_per_worker=4, max_plies=40, temperature_plies=40)
    trees = {}
    original = player.mcts.search

    def remember_trees(batch, **kwargs):
        for tree in batch:
            trees[id(tree)] = tree
        return original(batch, **kwargs)

    player.mcts.search = remember_trees
    records = player.play(4)
    return records, list(trees.values())


def test_pgn_replays_to_the_final_position(network_games):
    records, trees = network_games
    assert len(records) >= 4
    for record in records:
        game, before, final = _replay(record.pgn)
        assert len(before) == record.plies
        moves = list(game.mainline_moves())
        played = [tree for tree in trees if list(tree.board.move_stack) == moves]
        assert len(played) == 1
        assert played[0].board.fen() == final.fen()
        assert game.headers["Result"] == record.result
        if record.termination == "max length":
            assert record.plies == 40
        else:
            assert final.is_game_over(claim_draw=True)


def test_recorded_planes_are_the_replayed_positions(network_games):
    records, _ = network_games
    for record in records:
        _, before, _ = _replay(record.pgn)
        assert record.num_positions == record.plies
        np.testing.assert_array_equal(encoding.unpack_planes(record.planes), encoding.encode_boards(before))


@pytest.fixture(scope="module")
def endgame_games():
    """Games from small endgames: checkmates, several kinds of draw and length-limited games."""
    fens = ["k7/8/1K6/8/8/8/8/6Q1 w - - 0 1", BLACK_MATES_IN_ONE, WHITE_MATES_IN_ONE, EVERY_MOVE_DRAWS,
            BLACK_FORCED_THEN_MATED, "4k3/8/4K3/8/8/8/8/3Q4 b - - 0 1"]
    config = SelfPlayConfig(games_per_worker=8, max_plies=30, temperature_plies=30, random_opening_plies=0)
    player = SelfPlayer(UniformEvaluator(), SearchConfig(num_simulations=16), config, seed=3,
                        start_fen_fn=lambda rng: fens[int(rng.integers(len(fens)))])
    return player.play(24)


def test_results_terminations_and_value_targets_agree_with_python_chess(endgame_games):
    kinds = set()
    for record in endgame_games:
        game, before, final = _replay(record.pgn)
        assert game.headers["Result"] == record.result
        assert game.headers["Termination"] == record.termination
        winner = _winner(final)
        expected_result = "1/2-1/2" if winner is None else ("1-0" if winner == chess.WHITE else "0-1")
        assert record.result == expected_result
        oracle = {
            "checkmate": final.is_checkmate(),
            "stalemate": final.is_stalemate(),
            "insufficient material": final.is_insufficient_material(),
            "threefold repetition": final.is_repetition(3),
            "fifty moves": final.halfmove_clock >= 100,
            # not over by any rule self-play applies (a repetition that is only claimable is no end)
            "max length": record.plies == 30 and not (final.is_game_over() or final.is_repetition(3)
                                                      or final.halfmove_clock >= 100),
        }
        assert oracle.get(record.termination), (record.termination, record.pgn)
        np.testing.assert_array_equal(encoding.unpack_planes(record.planes), encoding.encode_boards(before))
        _check_value_targets(record, before, final)
        kinds.add((record.result, record.termination, record.num_positions > 1))
    # The sample really contains decisive games with positions of both sides, and real draws.
    assert any(result != "1/2-1/2" and longer for result, _, longer in kinds), kinds
    assert any(result == "1/2-1/2" and termination != "max length" for result, termination, _ in kinds), kinds


def test_policy_targets_are_legal_moves(network_games):
    records, _ = network_games
    for record in records:
        _, before, _ = _replay(record.pgn)
        for t, board in enumerate(before):
            actions = record.policy_actions[record.policy_offsets[t]:record.policy_offsets[t + 1]]
            counts = record.policy_counts[record.policy_offsets[t]:record.policy_offsets[t + 1]]
            assert len(actions) > 0 and (counts > 0).all()
            legal = encoding.legal_action_mask(board)
            assert legal[actions.astype(int)].all()
            assert len(set(actions.tolist())) == len(actions)


def test_network_version_is_recorded_in_games_and_pgn():
    player = _player(search=SearchConfig(num_simulations=2), max_plies=2, temperature_plies=2)
    player.set_network_version(5)
    player.play(1)  # the game already in flight keeps the version it started with
    record = player.play(1)[0]
    assert record.network_version == 5
    game, _, _ = _replay(record.pgn)
    assert game.headers["White"] == game.headers["Black"] == "v5"


# -- openings and temperature ---------------------------------------------------------------------------------


def test_random_opening_plies_are_played_but_not_recorded():
    player = _player(search=SearchConfig(num_simulations=4), games_per_worker=3, max_plies=10,
                     temperature_plies=10, random_opening_plies=4, seed=2)
    records = player.play(3)
    openings = set()
    for record in records:
        game, before, final = _replay(record.pgn)
        assert record.plies == len(before) == 10
        assert record.num_positions == 10 - 4
        np.testing.assert_array_equal(encoding.unpack_planes(record.planes), encoding.encode_boards(before[4:]))
        _check_value_targets(record, before, final)
        openings.add(tuple(m.uci() for m in list(game.mainline_moves())[:4]))
    assert len(openings) > 1  # the openings are random, not one fixed line


def test_random_opening_from_a_given_start_position():
    start = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    player = _player(search=SearchConfig(num_simulations=4), fen=start, max_plies=6, temperature_plies=6,
                     random_opening_plies=2)
    record = player.play(1)[0]
    game, before, _ = _replay(record.pgn)
    assert game.headers["FEN"] == start
    assert before[0].fen() == start
    assert record.num_positions == record.plies - 2
    np.testing.assert_array_equal(encoding.unpack_planes(record.planes), encoding.encode_boards(before[2:]))


def _visit_counts_of_played_moves(record, moves, before):
    """For each recorded position: (index, visit count of the move played there, highest visit count)."""
    opening = record.plies - record.num_positions
    pairs = []
    for t in range(record.num_positions):
        board, played = before[opening + t], moves[opening + t]
        lo, hi = record.policy_offsets[t], record.policy_offsets[t + 1]
        actions = record.policy_actions[lo:hi].astype(int).tolist()
        counts = record.policy_counts[lo:hi]
        action = encoding.move_to_action(board, played)
        pairs.append((t, int(counts[actions.index(action)]) if action in actions else 0, int(counts.max())))
    return pairs


def _play_for_temperature(temperature_plies: int):
    player = _player(search=SearchConfig(algorithm="puct", num_simulations=12), games_per_worker=4, max_plies=13,
                     temperature_plies=temperature_plies, random_opening_plies=1, seed=9)
    games = []
    for record in player.play(4):
        game, before, _ = _replay(record.pgn)
        games.append((record, list(game.mainline_moves()), before))
    return games


def test_after_temperature_plies_the_most_visited_move_is_played():
    checked = 0
    for record, moves, before in _play_for_temperature(temperature_plies=4):
        for t, played_count, best_count in _visit_counts_of_played_moves(record, moves, before):
            if t >= 4:
                assert played_count == best_count, (t, played_count, best_count)
                checked += 1
    assert checked >= 4 * 8  # 12 recorded plies per game, the last 8 greedy


def test_during_temperature_plies_moves_are_sampled():
    # Control for the test above: at temperature 1 the played move is often not the most visited.
    not_best = 0
    for record, moves, before in _play_for_temperature(temperature_plies=100):
        for _, played_count, best_count in _visit_counts_of_played_moves(record, moves, before):
            assert played_count > 0  # a sampled move was visited
            not_best += played_count < best_count
    assert not_best > 0


# ---------------------------------------------------------------- playout cap randomisation, resignation


def test_fast_search_moves_are_played_but_not_recorded() -> None:
    player = _player(search=SearchConfig(num_simulations=24), full_search_fraction=0.25, fast_simulations=4,
                     max_plies=60)
    budgets: list[int] = []
    noises: list[bool] = []
    search = player.mcts.search

    def spy(trees, add_noise=False, temperature=0.0, num_simulations=None):
        budgets.extend(num_simulations)
        noises.extend(add_noise)
        return search(trees, add_noise=add_noise, temperature=temperature, num_simulations=num_simulations)

    player.mcts.search = spy
    games = player.play(1)
    game = games[0]
    _, before, _ = _replay(game.pgn)
    assert len(budgets) == len(before)  # one search per move played
    full = [i for i, b in enumerate(budgets) if b == 24]
    assert set(budgets) <= {24, 4} and 0 < len(full) < len(budgets)
    assert noises == [b == 24 for b in budgets]  # no root noise on fast searches
    # Exactly the fully searched positions are training positions, in order.
    assert game.num_positions == len(full)
    expected = encoding.packed_from_features([encoding.board_features(before[i]) for i in full])
    assert np.array_equal(game.planes, expected)
    assert len(game.z) == len(full)


class _MaterialValue(UniformEvaluator):
    """Uniform priors; the value is the material balance for the side to move, squashed to (-1, 1)."""

    def prepare(self, board, moves):
        values = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}
        score = sum(v * (len(board.pieces(p, board.turn)) - len(board.pieces(p, not board.turn))) for p, v in values.items())
        return len(moves), float(np.tanh(score / 5))

    def evaluate(self, requests):
        priors, _ = super().evaluate([n for n, _ in requests])
        return priors, np.array([v for _, v in requests], dtype=np.float32)


QUEEN_UP = "4k3/8/8/8/8/8/3Q4/4K3 w - - 0 1"  # White is a queen up: only Black should ever resign


def test_resignation_comes_from_the_losing_side_never_the_winning_one() -> None:
    for seed in range(3):
        player = _player(search=SearchConfig(algorithm="puct", num_simulations=16), fen=QUEEN_UP, evaluator=_MaterialValue(), seed=seed,
                         resign_threshold=-0.8, resign_moves=3, resign_playout_fraction=0.0, max_plies=120)
        game = player.play(1)[0]
        _, before, final = _replay(game.pgn)
        assert game.termination == "resignation" and game.result == "1-0"
        assert final.turn == chess.BLACK  # Black resigned at its move...
        assert len(before) >= 5  # ...after three hopeless searches of its own
        assert game.z[0] == 1 and set(game.z.tolist()) == {1, -1}  # White's positions won, Black's lost


def test_games_played_out_under_resignation_measure_false_resignations() -> None:
    player = _player(search=SearchConfig(num_simulations=16), fen=QUEEN_UP, evaluator=_MaterialValue(),
                     resign_threshold=-0.8, resign_moves=3, resign_playout_fraction=1.0, max_plies=40)
    games = player.play(3)
    assert all(game.termination != "resignation" and game.extra["resign_playout"] for game in games)
    measured = [game for game in games if game.extra.get("would_resign")]
    assert measured  # Black's values sank below the threshold (unless it took a hanging queen first)
    for game in measured:
        # Black would have resigned: wrong exactly when Black did not lose a game played out to its end; a
        # game stopped at the length limit has no verdict (unfinished), and is never a false resignation.
        capped = game.termination == MAX_LENGTH
        assert game.extra["unfinished"] == capped
        assert game.extra["false_resign"] == (not capped and game.result != "1-0")
    # Stopped 8 plies in, just after Black's third hopeless search: judged unfinished, never false.
    short = _player(search=SearchConfig(num_simulations=16), fen=QUEEN_UP, evaluator=_MaterialValue(),
                    resign_threshold=-0.8, resign_moves=3, resign_playout_fraction=1.0, max_plies=8).play(2)
    cut = [game for game in short if game.extra.get("would_resign")]
    assert cut and all(game.termination == MAX_LENGTH for game in cut)
    assert all(game.extra["unfinished"] and not game.extra["false_resign"] for game in cut)
    off = _player(fen=QUEEN_UP, max_plies=4).play(1)[0]
    assert off.extra == {}  # resignation off: nothing to measure


def test_games_in_flight_survive_a_restart_through_the_file(tmp_path) -> None:
    from alphazero.learn.replay import read_inflight, write_inflight

    config = dict(games_per_worker=3, max_plies=60, temperature_plies=10, full_search_fraction=0.5,
                  fast_simulations=2)
    search = SearchConfig(num_simulations=6)
    first = _player(search=search, seed=4, **config)
    for _ in range(7):
        first.step()
    snapshot = first.snapshot()
    write_inflight(tmp_path / "inflight.npz", [snapshot, []])
    slots = read_inflight(tmp_path / "inflight.npz")
    assert len(slots) == 2 and slots[1] == [] and len(slots[0]) == 3

    second = _player(search=search, seed=99, **config)
    second.restore(slots[0])
    for before, after in zip(first.games, second.games):
        assert after.tree.board.move_stack == before.tree.board.move_stack
        assert after.features == before.features and after.movers == before.movers
        assert all(np.array_equal(a, b) for a, b in zip(after.actions, before.actions))
        assert all(np.array_equal(a, b) for a, b in zip(after.counts, before.counts))
    prefixes = {tuple(m.uci() for m in g.tree.board.move_stack): g for g in first.games}
    checked = 0
    for game in second.play(3):
        moves = tuple(m.uci() for m in _moves(game.pgn))
        for prefix, begun in prefixes.items():
            if moves[: len(prefix)] == prefix and len(begun.features):
                # Positions recorded before the restart are in the finished game, targets and all.
                count = len(begun.features)
                assert np.array_equal(game.planes[:count], encoding.packed_from_features(begun.features))
                assert np.array_equal(game.policy_actions[: game.policy_offsets[count]], np.concatenate(begun.actions))
                checked += 1
    assert checked  # games begun by the first player were finished by the second


def _moves(pgn: str) -> list[chess.Move]:
    game = chess.pgn.read_game(io.StringIO(pgn))
    return list(game.mainline_moves())


@pytest.mark.parametrize("algorithm,selfplay", [
    ("puct", {}),
    ("puct", {"full_search_fraction": 0.5, "fast_simulations": 4, "resign_threshold": -0.05, "resign_moves": 1,
              "resign_playout_fraction": 0.5}),
    ("gumbel", {}),
    ("gumbel", {"full_search_fraction": 0.5, "fast_simulations": 4, "resign_threshold": -0.05, "resign_moves": 1,
                "resign_playout_fraction": 0.5}),
])
def test_compiled_and_python_searches_play_the_same_games(algorithm: str, selfplay: dict) -> None:
    """``search.implementation`` changes the speed of self-play, not its games: the same seed gives the same
    records (moves, targets, planes, values) with the compiled search as with the Python one, PUCT or Gumbel."""
    torch.manual_seed(3)
    net = PolicyValueNet(TINY)
    records = {}
    for engine in ("python", "compiled"):
        search = SearchConfig(num_simulations=12, implementation=engine, algorithm=algorithm)
        config = SelfPlayConfig(**{"games_per_worker": 3, "max_plies": 40, "temperature_plies": 6,
                                   "random_opening_plies": 2, **selfplay})
        player = SelfPlayer(NetworkEvaluator(net), search, config, seed=11)
        assert type(player.mcts).__name__ == ("CompiledMCTS" if engine == "compiled" else "MCTS")
        records[engine] = player.play(min_games=4)
    assert len(records["python"]) == len(records["compiled"]) >= 4
    for a, b in zip(records["python"], records["compiled"]):
        assert a.pgn == b.pgn and a.result == b.result and a.termination == b.termination
        for name in ("planes", "policy_offsets", "policy_actions", "policy_counts", "z"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert np.allclose(a.root_values.astype(np.float32), b.root_values.astype(np.float32), atol=1e-3)


def test_a_game_without_a_fully_searched_move_is_recorded_with_no_position(tmp_path) -> None:
    # A vanishing full-search share: no move is ever searched fully, so no position is recorded.
    player = _player(search=SearchConfig(num_simulations=16), full_search_fraction=1e-9, fast_simulations=4,
                     games_per_worker=2, max_plies=12)
    games = player.play(2)
    assert [g.num_positions for g in games] == [0, 0]
    assert all(g.plies == 12 and g.termination == MAX_LENGTH for g in games)
    path = tmp_path / "shard.npz"
    write_shard(path, games + _player(max_plies=6).play(1))  # beside a game that has positions
    shard = read_shard(path)
    assert shard.num_positions == 6 and len(shard.pgns) == 3
