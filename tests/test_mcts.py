"""Tests for the batched PUCT search (``alphazero.search.mcts``) and terminal detection (``alphazero.board.game``).

python-chess is the rules oracle throughout: mates, stalemates and draws are recognised with its own
calls, never with ``terminal_status``. The fake evaluators below are deterministic functions of the
position (so expectations can be recomputed independently) and record every position they are shown.
"""

from __future__ import annotations

import random
import zlib

import chess
import numpy as np
import pytest

from alphazero.board.game import (
    CHECKMATE,
    FIFTY_MOVES,
    INSUFFICIENT_MATERIAL,
    STALEMATE,
    THREEFOLD_REPETITION,
    terminal_status,
)
from alphazero.config import SearchConfig
from alphazero.nets.evaluator import UniformEvaluator
from alphazero.search.mcts import MCTS, GameTree, choose_move_index

# Mate-in-one positions (the side to move mates).
WHITE_BACK_RANK = "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"  # Ra8#
BLACK_BACK_RANK = "r5k1/8/8/8/8/8/5PPP/6K1 b - - 0 1"  # ...Ra1#
WHITE_QUEEN_MATE = "k7/8/1K6/8/8/8/8/6Q1 w - - 0 1"  # Qg8# (and Kc7, Qg3, Qh2 stalemate)
BLACK_FOOLS_MATE = "rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2"  # ...Qh4#
MATE_IN_ONE = [WHITE_BACK_RANK, BLACK_BACK_RANK, WHITE_QUEEN_MATE, BLACK_FOOLS_MATE]
# Black to move; both legal moves (Kg8, a4) allow Ra8#.
EVERY_MOVE_LOSES = "7k/R7/6K1/p7/8/8/8/8 b - - 0 1"

QUIET_POSITIONS = [
    chess.STARTING_FEN,
    "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
    "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3",
    "8/5pk1/6p1/8/3R4/6P1/5PK1/8 w - - 0 40",
    "r3k2r/pppq1ppp/2n2n2/3pp3/3PP3/2N2N2/PPPQ1PPP/R3K2R w KQkq - 0 8",
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1",
]


# --------------------------------------------------------------------------------------------------
# Helpers


def board(fen: str) -> chess.Board:
    b = chess.Board(fen)
    assert b.is_valid(), fen
    return b


def oracle_terminal_value(b: chess.Board) -> float | None:
    """Value for the side to move if the game is over under the project's rules (python-chess calls only)."""
    if b.is_checkmate():
        return -1.0
    if b.is_stalemate() or b.is_insufficient_material() or b.halfmove_clock >= 100 or b.is_repetition(3):
        return 0.0
    return None


def mating_moves(b: chess.Board) -> set[chess.Move]:
    out = set()
    for move in b.legal_moves:
        b.push(move)
        if b.is_checkmate():
            out.add(move)
        b.pop()
    return out


def _crc(*parts: str) -> int:
    return zlib.crc32("|".join(parts).encode())


def hash_priors(fen: str, ucis: list[str]) -> np.ndarray:
    """A deterministic, clearly non-uniform prior over ``ucis`` depending only on the position."""
    logits = np.array([(_crc(fen, u) % 1000) / 250.0 for u in ucis], dtype=np.float64)
    p = np.exp(logits - logits.max())
    return (p / p.sum()).astype(np.float32)


def hash_value(fen: str) -> np.float32:
    return np.float32(0.9 * ((_crc(fen) % 2001) / 1000.0 - 1.0))


class RecordingEvaluator:
    """Deterministic fake network. Records every board it is asked about and every batch size.

    ``kind`` "hash": priors/values from ``hash_priors`` / ``hash_value``; "uniform": equal priors, value 0.
    Each request carries the full path from the game start, so duplicate leaves inside one batch are caught.
    """

    def __init__(self, kind: str = "hash") -> None:
        self.kind = kind
        self.boards: list[chess.Board] = []
        self.batch_sizes: list[int] = []

    def value_of(self, fen: str) -> float:
        return float(hash_value(fen)) if self.kind == "hash" else 0.0

    def prepare(self, b: chess.Board, moves: list[chess.Move]) -> tuple:
        self.boards.append(b.copy())
        assert len(moves) == len(set(moves)) and set(moves) == set(b.legal_moves), \
            "prepare must get the legal moves of the board it stands on"
        key = (b.fen(), tuple(m.uci() for m in b.move_stack))
        return key, [m.uci() for m in moves]

    def evaluate(self, requests: list[tuple]) -> tuple[list[np.ndarray], np.ndarray]:
        self.batch_sizes.append(len(requests))
        keys = [key for key, _ in requests]
        assert len(set(keys)) == len(keys), "the same leaf was sent twice in one batch"
        if self.kind == "hash":
            priors = [hash_priors(key[0], ucis) for key, ucis in requests]
        else:
            priors = [np.full(len(ucis), 1.0 / len(ucis), dtype=np.float32) for _, ucis in requests]
        values = np.array([self.value_of(key[0]) for key, _ in requests], dtype=np.float32)
        return priors, values


def walk(tree: GameTree):
    """Yield (node, board_at_node, depth, ancestors) for every node reachable in the tree (board is a
    copy; ancestors are the boards from the root down to the parent)."""
    stack = [(tree.root, tree.board.copy(), 0, [])]
    while stack:
        node, b, depth, ancestors = stack.pop()
        yield node, b, depth, ancestors
        if node.priors is None:
            continue
        for move, child in zip(node.moves, node.children):
            if child is not None:
                nb = b.copy()
                nb.push(move)
                stack.append((child, nb, depth + 1, ancestors + [b]))


def repeats_an_ancestor(b: chess.Board, ancestors: list[chess.Board]) -> bool:
    """The position (pieces, side to move, castling and en passant rights) occurred earlier in the tree."""
    key = b._transposition_key()
    return any(a._transposition_key() == key for a in ancestors)


def check_tree_consistency(tree: GameTree, value_of, mate_in_one: bool = True) -> int:
    """Every statistic of the tree agrees with a backup recomputed from the leaves; returns node count.

    For an expanded node: N = 1 + sum N(s, a); W(node) = own evaluation + sum W(s, a); for each child,
    N(s, a) = N(child) and W(s, a) = -W(child) (values flip sign at each ply). A terminal node holds
    the oracle's result once per visit: python-chess's for a finished game, a draw for a position
    that repeats one of its ancestors in the tree, and (``mate_in_one``, below the root) a win for a
    position whose mover can mate. Any virtual loss left behind breaks these equalities.
    """
    count = 0
    for node, b, depth, ancestors in walk(tree):
        count += 1
        assert not node.pending
        expected_terminal = oracle_terminal_value(b)
        if expected_terminal is None and repeats_an_ancestor(b, ancestors):
            expected_terminal = 0.0
        if expected_terminal is None and mate_in_one and depth > 0 and mating_moves(b):
            expected_terminal = 1.0
        if node.priors is None:
            # Only terminal positions are left unexpanded once a search has finished.
            assert node.terminal_value is not None
            assert node.terminal_value == expected_terminal, b.fen()
            assert node.visits >= 1
            assert node.value_sum == pytest.approx(node.visits * expected_terminal)
            continue
        assert expected_terminal is None, f"a finished game was expanded: {b.fen()}"
        assert len(node.moves) == len(set(node.moves)) and set(node.moves) == set(b.legal_moves)
        assert node.visits == 1 + sum(node.child_visits)
        assert node.value_sum == pytest.approx(value_of(b.fen()) + sum(node.child_values), abs=1e-6)
        for index, child in enumerate(node.children):
            if child is None:
                assert node.child_visits[index] == 0 and node.child_values[index] == 0
            else:
                assert node.child_visits[index] == child.visits
                assert node.child_values[index] == pytest.approx(-child.value_sum, abs=1e-6)
    return count


def root_edge_q(tree: GameTree, move: chess.Move) -> float:
    root = tree.root
    i = root.moves.index(move)
    return root.child_values[i] / root.child_visits[i]


# --------------------------------------------------------------------------------------------------
# terminal_status (python-chess as oracle)


def test_terminal_status_checkmate_is_minus_one_for_the_mated_side():
    fools = chess.Board()
    for san in ["f3", "e5", "g4", "Qh4#"]:
        fools.push_san(san)
    assert fools.is_checkmate() and fools.turn == chess.WHITE
    assert terminal_status(fools) == (-1.0, CHECKMATE)
    assert terminal_status(fools, list(fools.legal_moves)) == (-1.0, CHECKMATE)

    mated_black = board("R5k1/5ppp/8/8/8/8/8/6K1 b - - 0 1")
    assert mated_black.is_checkmate()
    assert terminal_status(mated_black) == (-1.0, CHECKMATE)
    # Checkmate wins over the fifty-move rule.
    mated_late = board("R5k1/5ppp/8/8/8/8/8/6K1 b - - 100 80")
    assert terminal_status(mated_late) == (-1.0, CHECKMATE)


def test_terminal_status_draws_are_zero():
    stalemate = board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1")
    assert stalemate.is_stalemate()
    assert terminal_status(stalemate) == (0.0, STALEMATE)

    for fen in ["8/8/8/4k3/8/8/8/4K3 w - - 0 1", "8/8/8/4k3/8/8/8/3BK3 b - - 0 1", "8/8/8/4k3/8/8/8/3NK3 w - - 0 1"]:
        b = board(fen)
        assert b.is_insufficient_material()
        assert terminal_status(b) == (0.0, INSUFFICIENT_MATERIAL)
    assert terminal_status(board("8/8/8/4k3/8/8/8/R3K3 w - - 0 1")) is None

    fifty = board("8/8/8/4k3/8/8/8/R3K3 w - - 100 80")
    assert terminal_status(fifty) == (0.0, FIFTY_MOVES)
    assert terminal_status(board("8/8/8/4k3/8/8/8/R3K3 w - - 99 80")) is None


def test_terminal_status_threefold_repetition():
    b = chess.Board()
    assert terminal_status(b) is None
    for cycle in range(2):
        for ply, san in enumerate(["Nf3", "Nf6", "Ng1", "Ng8"]):
            b.push_san(san)
            if not (cycle == 1 and ply == 3):
                assert terminal_status(b) is None, b.move_stack
    assert b.is_repetition(3)
    assert terminal_status(b) == (0.0, THREEFOLD_REPETITION)
    assert terminal_status(b, list(b.legal_moves)) == (0.0, THREEFOLD_REPETITION)


def test_terminal_status_matches_python_chess_on_random_games():
    rng = random.Random(1234)
    seen = set()
    for _ in range(12):
        b = chess.Board()
        for _ in range(400):
            expected = oracle_terminal_value(b)
            status = terminal_status(b)
            assert terminal_status(b, list(b.legal_moves)) == status
            if expected is None:
                assert status is None, b.fen()
            else:
                assert status is not None and status[0] == expected, b.fen()
                seen.add(status[1])
                break
            b.push(rng.choice(list(b.legal_moves)))
    assert seen  # at least some games ended


# --------------------------------------------------------------------------------------------------
# SearchConfig / choose_move_index


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_simulations": 0},
        {"leaves_per_game": 0},
        {"c_puct": 0.0},
        {"dirichlet_epsilon": 1.5},
        {"dirichlet_alpha": 0.0},
    ],
)
def test_search_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        SearchConfig(**kwargs)


def test_choose_move_index_temperature_zero_is_argmax():
    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = rng.integers(0, 100, size=rng.integers(1, 40))
        assert choose_move_index(counts, 0.0, rng) == int(np.argmax(counts))
    assert choose_move_index(np.array([3, 9, 1, 9]), 0.0, rng) in (1, 3)


def _chi_square(observed: np.ndarray, probabilities: np.ndarray) -> float:
    n = observed.sum()
    mask = probabilities > 0
    expected = n * probabilities[mask]
    return float((((observed[mask] - expected) ** 2) / expected).sum())


def test_choose_move_index_temperature_one_follows_visit_proportions():
    rng = np.random.default_rng(7)
    counts = np.array([10, 30, 0, 60, 5, 45], dtype=np.int64)
    draws = 3000
    observed = np.bincount([choose_move_index(counts, 1.0, rng) for _ in range(draws)], minlength=len(counts))
    assert observed[2] == 0  # never an unvisited move
    probabilities = counts / counts.sum()
    # 5 degrees of freedom: the 99.99% quantile is ~25.7.
    assert _chi_square(observed, probabilities) < 26.0
    np.testing.assert_allclose(observed / draws, probabilities, atol=0.035)


def test_choose_move_index_temperature_half_squares_the_counts():
    rng = np.random.default_rng(11)
    counts = np.array([10, 20, 30], dtype=np.int64)
    draws = 3000
    observed = np.bincount([choose_move_index(counts, 0.5, rng) for _ in range(draws)], minlength=3)
    probabilities = counts.astype(float) ** 2 / (counts.astype(float) ** 2).sum()
    assert _chi_square(observed, probabilities) < 20.0


# --------------------------------------------------------------------------------------------------
# Mate in one, backup signs


@pytest.mark.parametrize("fen", MATE_IN_ONE)
def test_uniform_search_finds_mate_in_one(fen):
    b = board(fen)
    mates = mating_moves(b)
    assert mates
    tree = GameTree(b)
    result = MCTS(UniformEvaluator(), SearchConfig(num_simulations=400)).search([tree])[0]
    after = b.copy()
    after.push(result.move)
    assert after.is_checkmate()
    assert result.move in mates
    # The side to move is winning: the mean search value is clearly positive.
    assert result.root_value > 0.6
    # The mating edge: every visit ended in the opponent's checkmate, so its Q is exactly +1.
    assert root_edge_q(tree, result.move) == pytest.approx(1.0)
    mate_child = tree.root.children[tree.root.moves.index(result.move)]
    assert mate_child.terminal_value == -1.0
    # Search never moved the game's own board.
    assert tree.board.fen() == b.fen() and tree.board.move_stack == b.move_stack


@pytest.mark.parametrize("mate_in_one", [True, False])
def test_every_move_losing_gives_negative_values(mate_in_one):
    b = board(EVERY_MOVE_LOSES)
    tree = GameTree(b)
    result = MCTS(UniformEvaluator(), SearchConfig(num_simulations=400, mate_in_one=mate_in_one)).search([tree])[0]
    assert result.root_value < -0.6
    root = tree.root
    assert len(root.moves) == 2 and all(n > 0 for n in root.child_visits)
    for move in root.moves:
        assert root_edge_q(tree, move) < -0.5
    for move, child in zip(root.moves, root.children):
        assert child is not None
        if mate_in_one:
            # White can mate in one after each move: a proven win, never sent to the network, so
            # every visit of the root's edge scored exactly -1.
            assert child.terminal_value == 1.0 and child.priors is None
            assert root_edge_q(tree, move) == pytest.approx(-1.0)
            continue
        # Without it, White's mating reply is found by search: an edge with Q = +1 for White.
        after = b.copy()
        after.push(move)
        (mate,) = mating_moves(after)
        i = child.moves.index(mate)
        assert child.child_visits[i] > 0
        assert child.child_values[i] / child.child_visits[i] == pytest.approx(1.0)


def test_terminal_leaves_back_up_oracle_results_and_are_never_evaluated():
    b = board(WHITE_QUEEN_MATE)
    evaluator = RecordingEvaluator("uniform")
    tree = GameTree(b)
    # Without mate_in_one, so that the root searches its stalemating and mating moves alike.
    MCTS(evaluator, SearchConfig(num_simulations=400, mate_in_one=False)).search([tree])
    root = tree.root
    stalemates = mates = 0
    for move, child, n, w in zip(root.moves, root.children, root.child_visits, root.child_values):
        after = b.copy()
        after.push(move)
        if after.is_stalemate() and n > 0:
            stalemates += 1
            assert child.terminal_value == 0.0
            assert w == pytest.approx(0.0)  # draws back up as exactly zero
        if after.is_checkmate():
            mates += 1
            assert child.terminal_value == -1.0 and w / n == pytest.approx(1.0)
    assert stalemates >= 1 and mates >= 1
    # No finished position was ever handed to the evaluator.
    assert evaluator.boards
    for seen in evaluator.boards:
        assert oracle_terminal_value(seen) is None, seen.fen()
    check_tree_consistency(tree, evaluator.value_of, mate_in_one=False)


def test_backup_signs_with_a_fixed_value_evaluator():
    """Root worth +0.2, every other position +0.5 for its mover: signs must alternate by ply."""

    root_fen = chess.STARTING_FEN

    class Fixed(RecordingEvaluator):
        def value_of(self, fen):
            return 0.2 if fen == root_fen else 0.5

    evaluator = Fixed("uniform")
    tree = GameTree(chess.Board())
    mcts = MCTS(evaluator, SearchConfig(num_simulations=1))
    result = mcts.search([tree])[0]
    root = tree.root
    (visited,) = np.flatnonzero(np.asarray(root.child_visits))
    assert root.visits == 2
    assert root.child_values[visited] == pytest.approx(-0.5)  # the child is good for the opponent
    assert result.root_value == pytest.approx((0.2 - 0.5) / 2)
    # Many more simulations: every statistic is the alternating-sign sum of leaf values.
    mcts.search([tree], num_simulations=60)
    deep = [d for _, _, d, _ in walk(tree)]
    assert max(deep) >= 2
    check_tree_consistency(tree, evaluator.value_of)


def test_searching_a_finished_game_raises():
    finished = [
        board("R5k1/5ppp/8/8/8/8/8/6K1 b - - 0 1"),  # checkmate
        board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"),  # stalemate
        board("8/8/8/4k3/8/8/8/4K3 w - - 0 1"),  # insufficient material
        board("8/8/8/4k3/8/8/8/R3K3 w - - 100 80"),  # fifty moves
    ]
    repeated = chess.Board()
    for san in ["Nf3", "Nf6", "Ng1", "Ng8"] * 2:
        repeated.push_san(san)
    finished.append(repeated)
    for b in finished:
        assert oracle_terminal_value(b) is not None
        with pytest.raises(ValueError):
            MCTS(UniformEvaluator(), SearchConfig(num_simulations=8)).search([GameTree(b)])
    # One finished game in a batch is reported too.
    with pytest.raises(ValueError):
        MCTS(UniformEvaluator(), SearchConfig(num_simulations=8)).search([GameTree(), GameTree(finished[0])])


# --------------------------------------------------------------------------------------------------
# Result shape: pi, moves, visit counts


@pytest.mark.parametrize("fen", QUIET_POSITIONS + [BLACK_FOOLS_MATE])
def test_result_is_a_distribution_over_the_legal_moves(fen):
    b = board(fen)
    evaluator = RecordingEvaluator("hash")
    tree = GameTree(b, seed=5)
    sims = 57
    result = MCTS(evaluator, SearchConfig(algorithm="puct", num_simulations=sims)).search([tree], add_noise=True, temperature=1.0)[0]
    legal = list(b.legal_moves)
    assert len(result.moves) == len(set(result.moves)) == len(legal)
    assert set(result.moves) == set(legal)
    assert result.move in legal
    assert len(result.pi) == len(result.visit_counts) == len(result.priors) == len(result.moves)
    assert (result.pi >= 0).all()
    assert float(result.pi.sum()) == pytest.approx(1.0, abs=1e-5)
    assert int(result.visit_counts.sum()) == sims
    np.testing.assert_allclose(result.pi, result.visit_counts / sims, atol=1e-6)
    assert result.visit_counts[result.moves.index(result.move)] > 0  # sampled moves were visited
    assert tree.root.visits == sims + 1
    assert -1.0 <= result.root_value <= 1.0
    # The reported priors are the network's, without noise.
    np.testing.assert_allclose(result.priors, hash_priors(b.fen(), [m.uci() for m in result.moves]), rtol=1e-6)
    check_tree_consistency(tree, evaluator.value_of)


def test_temperature_zero_plays_the_most_visited_move_and_num_simulations_override():
    b = board(QUIET_POSITIONS[2])
    tree = GameTree(b, seed=0)
    mcts = MCTS(RecordingEvaluator("hash"), SearchConfig(num_simulations=200))
    result = mcts.search([tree], temperature=0.0, num_simulations=37)[0]
    assert int(result.visit_counts.sum()) == 37
    assert result.visit_counts[result.moves.index(result.move)] == result.visit_counts.max()
    with pytest.raises(ValueError):
        mcts.search([GameTree(b), GameTree(b)], temperature=[1.0])


def test_single_legal_move_root():
    b = board("7k/R7/6K1/8/8/8/8/8 b - - 0 1")
    (only,) = list(b.legal_moves)
    result = MCTS(UniformEvaluator(), SearchConfig(num_simulations=20)).search([GameTree(b)], add_noise=True)[0]
    assert result.move == only
    assert result.moves == [only]
    assert result.pi.tolist() == [1.0]


# --------------------------------------------------------------------------------------------------
# Dirichlet noise and tree reuse


def _assert_noisy_mixture(tree: GameTree, epsilon: float = 0.25) -> None:
    clean = np.asarray(tree.root.priors, dtype=np.float64)
    noisy = np.asarray(tree.root_priors, dtype=np.float64)
    assert noisy.shape == clean.shape
    assert float(noisy.sum()) == pytest.approx(1.0, abs=1e-5)
    assert not np.allclose(noisy, clean, atol=1e-4), "noise was not mixed in"
    noise = (noisy - (1 - epsilon) * clean) / epsilon
    assert (noise >= -1e-5).all()
    assert float(noise.sum()) == pytest.approx(1.0, abs=1e-4)


def _assert_non_root_priors_are_clean(tree: GameTree) -> int:
    expanded = 0
    for node, b, depth, _ in walk(tree):
        if node.priors is None:
            continue
        expected = hash_priors(b.fen(), [m.uci() for m in node.moves])
        np.testing.assert_array_equal(node.priors, expected)  # root included: root.priors stays clean
        expanded += depth > 0
    return expanded


def test_dirichlet_noise_touches_only_the_root():
    b = board(QUIET_POSITIONS[2])
    config = SearchConfig(algorithm="puct", num_simulations=150)
    noisy_tree, clean_tree = GameTree(b, seed=3), GameTree(b, seed=3)
    noisy_result = MCTS(RecordingEvaluator("hash"), config).search([noisy_tree], add_noise=True)[0]
    clean_result = MCTS(RecordingEvaluator("hash"), config).search([clean_tree], add_noise=False)[0]

    expected_root = hash_priors(b.fen(), [m.uci() for m in noisy_tree.root.moves])
    np.testing.assert_array_equal(noisy_tree.root.priors, expected_root)
    np.testing.assert_array_equal(clean_tree.root.priors, expected_root)
    np.testing.assert_array_equal(noisy_result.priors, clean_result.priors)
    np.testing.assert_array_equal(clean_tree.root_priors, expected_root)  # no noise: the clean priors
    _assert_noisy_mixture(noisy_tree)
    assert _assert_non_root_priors_are_clean(noisy_tree) > 20
    assert _assert_non_root_priors_are_clean(clean_tree) > 20
    # Noise changed how the root's visits were spread.
    assert not np.array_equal(noisy_result.visit_counts, clean_result.visit_counts)


def test_noisy_root_priors_drive_root_selection():
    """Uniform priors and zero values: the first simulation picks the argmax of the priors in use."""
    tree = GameTree(chess.Board(), seed=42)
    result = MCTS(UniformEvaluator(), SearchConfig(algorithm="puct", num_simulations=1)).search([tree], add_noise=True)[0]
    _assert_noisy_mixture(tree)
    assert int(np.argmax(result.visit_counts)) == int(np.argmax(tree.root_priors))
    assert int(np.argmax(tree.root_priors)) != 0  # not what the clean (uniform) priors alone would pick


def test_noise_redrawn_and_statistics_kept_after_advance():
    b = board(QUIET_POSITIONS[0])
    evaluator = RecordingEvaluator("hash")
    mcts = MCTS(evaluator, SearchConfig(algorithm="puct", num_simulations=120))
    tree = GameTree(b, seed=9)
    first = mcts.search([tree], add_noise=True, temperature=0.0)[0]
    child = tree.root.children[first.moves.index(first.move)]
    kept_counts = np.array(child.child_visits)
    kept_visits, kept_value_sum = child.visits, child.value_sum
    assert kept_visits > 1

    tree.advance(first.move)
    expected_board = b.copy()
    expected_board.push(first.move)
    assert tree.root is child
    assert tree.board.fen() == expected_board.fen() and tree.board.move_stack == expected_board.move_stack
    np.testing.assert_array_equal(tree.root.child_visits, kept_counts)
    assert (tree.root.visits, tree.root.value_sum) == (kept_visits, kept_value_sum)

    seen_before = len(evaluator.boards)
    second = mcts.search([tree], add_noise=True, temperature=0.0, num_simulations=50)[0]
    assert tree.root is child
    # The subtree's statistics survive: 50 new visits on top of the old ones.
    assert int(second.visit_counts.sum()) == int(kept_counts.sum()) + 50
    assert (second.visit_counts >= kept_counts).all()
    assert tree.root.visits == kept_visits + 50
    # The reused root was not sent to the network again.
    for seen in evaluator.boards[seen_before:]:
        assert len(seen.move_stack) > len(expected_board.move_stack)
    # Fresh noise at the new root; its stored priors are still the network's.
    np.testing.assert_array_equal(tree.root.priors, hash_priors(expected_board.fen(), [m.uci() for m in tree.root.moves]))
    np.testing.assert_array_equal(second.priors, tree.root.priors)
    _assert_noisy_mixture(tree)
    assert _assert_non_root_priors_are_clean(tree) > 10
    check_tree_consistency(tree, evaluator.value_of)


def test_advance_without_reuse_or_to_an_unvisited_move_starts_fresh():
    b = board(QUIET_POSITIONS[0])
    mcts = MCTS(RecordingEvaluator("hash"), SearchConfig(num_simulations=40))

    tree = GameTree(b, seed=1)
    first = mcts.search([tree])[0]
    tree.advance(first.move, reuse=False)
    assert int(mcts.search([tree])[0].visit_counts.sum()) == 40

    tree = GameTree(b, seed=1)
    first = mcts.search([tree])[0]
    unvisited = [m for m, n in zip(first.moves, first.visit_counts) if n == 0]
    assert unvisited
    tree.advance(unvisited[0])
    second = mcts.search([tree])[0]
    assert int(second.visit_counts.sum()) == 40
    after = b.copy()
    after.push(unvisited[0])
    assert set(second.moves) == set(after.legal_moves)


# --------------------------------------------------------------------------------------------------
# Batching over games


def _play(trees: list[GameTree], mcts: MCTS, plies: int, batched: bool) -> list[list[tuple]]:
    history: list[list[tuple]] = [[] for _ in trees]
    for _ in range(plies):
        active = [i for i, t in enumerate(trees) if oracle_terminal_value(t.board) is None]
        if not active:
            break
        if batched:
            results = mcts.search([trees[i] for i in active], add_noise=True, temperature=1.0)
        else:
            results = [mcts.search([trees[i]], add_noise=True, temperature=1.0)[0] for i in active]
        for i, result in zip(active, results):
            history[i].append((result.move, result.visit_counts.copy(), result.root_value, result.pi.copy()))
            trees[i].advance(result.move)
    return history


@pytest.mark.parametrize("leaves_per_game", [1, 4])
def test_batched_search_equals_searching_each_game_alone(leaves_per_game):
    config = SearchConfig(num_simulations=48, leaves_per_game=leaves_per_game)
    boards = [board(fen) for fen in QUIET_POSITIONS]
    batched_eval, alone_eval = RecordingEvaluator("hash"), RecordingEvaluator("hash")
    batched = _play([GameTree(b, seed=i) for i, b in enumerate(boards)], MCTS(batched_eval, config), 3, True)
    alone = _play([GameTree(b, seed=i) for i, b in enumerate(boards)], MCTS(alone_eval, config), 3, False)
    for game_batched, game_alone in zip(batched, alone):
        assert len(game_batched) == len(game_alone) == 3
        for (m1, n1, v1, p1), (m2, n2, v2, p2) in zip(game_batched, game_alone):
            assert m1 == m2
            np.testing.assert_array_equal(n1, n2)
            assert v1 == v2
            np.testing.assert_array_equal(p1, p2)
    # The batched run really evaluated several games' leaves per call.
    assert max(batched_eval.batch_sizes) >= len(boards)
    assert sum(batched_eval.batch_sizes) == sum(alone_eval.batch_sizes)


def test_virtual_loss_batches_several_leaves_per_game_and_still_finds_mates():
    fens = [WHITE_BACK_RANK, BLACK_BACK_RANK, WHITE_QUEEN_MATE]
    evaluator = RecordingEvaluator("uniform")
    sims = 300
    trees = [GameTree(board(fen), seed=i) for i, fen in enumerate(fens)]
    # Without mate_in_one, which would search only the mate (no leaf for the network at all).
    results = MCTS(evaluator, SearchConfig(algorithm="puct", num_simulations=sims, leaves_per_game=8, mate_in_one=False)).search(trees)
    assert max(evaluator.batch_sizes[1:]) > len(trees)  # [0] is the root expansion
    for fen, tree, result in zip(fens, trees, results):
        assert result.move in mating_moves(board(fen))
        assert int(result.visit_counts.sum()) == sims
        assert tree.root.visits == sims + 1
        check_tree_consistency(tree, evaluator.value_of, mate_in_one=False)  # no virtual loss left anywhere
    for seen in evaluator.boards:
        assert oracle_terminal_value(seen) is None


def test_virtual_loss_with_network_like_evaluator_keeps_statistics_exact():
    evaluator = RecordingEvaluator("hash")
    trees = [GameTree(board(fen), seed=i) for i, fen in enumerate(QUIET_POSITIONS[:3])]
    results = MCTS(evaluator, SearchConfig(num_simulations=100, leaves_per_game=8)).search(trees, add_noise=True)
    assert max(evaluator.batch_sizes) > len(trees)
    for tree, result in zip(trees, results):
        assert int(result.visit_counts.sum()) == 100
        check_tree_consistency(tree, evaluator.value_of)


@pytest.mark.parametrize("fen", [EVERY_MOVE_LOSES, "7k/8/6K1/8/8/8/8/R7 w - - 0 1"])
def test_virtual_loss_collisions_on_narrow_trees_are_undone(fen):
    """Few legal moves and 8 leaves per game: selections collide with pending leaves and must be undone."""
    b = board(fen)
    evaluator = RecordingEvaluator("hash")
    tree = GameTree(b, seed=0)
    sims = 120
    config = SearchConfig(num_simulations=sims, leaves_per_game=8, mate_in_one=False)  # mates are found by search
    result = MCTS(evaluator, config).search([tree])[0]
    # With so few moves, 8 distinct leaves cannot always be found: some rounds end early on a collision.
    assert min(evaluator.batch_sizes[1:]) < 8
    assert int(result.visit_counts.sum()) == sims
    assert tree.root.visits == sims + 1
    check_tree_consistency(tree, evaluator.value_of, mate_in_one=False)


SHUFFLE = "k7/p7/P7/8/8/8/8/K7 w - - 0 40"  # blocked pawns: only the kings move, repetitions come fast


def _game_positions(b: chess.Board) -> list[chess.Board]:
    """Every position of the game on ``b`` before its current one."""
    replay = b.root()
    positions = []
    for move in b.move_stack:
        positions.append(replay.copy(stack=False))
        replay.push(move)
    return positions


def test_a_repetition_inside_the_tree_is_a_draw_but_not_one_before_the_root():
    b = board(SHUFFLE)
    for san in ["Ka2", "Kb8", "Ka1", "Ka8"]:
        b.push_san(san)  # back where it started: the root repeats a position of the game
    evaluator = RecordingEvaluator("hash")
    tree = GameTree(b)
    MCTS(evaluator, SearchConfig(num_simulations=400)).search([tree])
    check_tree_consistency(tree, evaluator.value_of)
    history = _game_positions(b)
    in_tree = before_root = 0
    for node, nb, depth, ancestors in walk(tree):
        if repeats_an_ancestor(nb, ancestors):
            in_tree += 1
            assert node.terminal_value == 0.0 and node.priors is None
        elif node.priors is not None and repeats_an_ancestor(nb, history):
            before_root += 1  # repeats only a position of the game before the root: searched on
    assert in_tree > 0 and before_root > 0

    off = GameTree(b)
    MCTS(RecordingEvaluator("hash"), SearchConfig(num_simulations=400, twofold_draw=False)).search([off])
    assert all(node.terminal_value is None or oracle_terminal_value(nb) is not None for node, nb, _, _ in walk(off))


def test_a_reused_root_that_was_a_repetition_draw_is_searched_again():
    b = board(SHUFFLE)
    tree = GameTree(b)
    mcts = MCTS(RecordingEvaluator("hash"), SearchConfig(num_simulations=400))
    mcts.search([tree])
    # Play the moves to a node the tree marked drawn by repetition.
    path = next(nb.move_stack[len(b.move_stack):] for node, nb, _, ancestors in walk(tree)
                if node.terminal_value == 0.0 and repeats_an_ancestor(nb, ancestors))
    for move in path:
        tree.advance(move)
    assert tree.root.terminal_value == 0.0
    result = mcts.search([tree], num_simulations=20)[0]
    assert tree.root.terminal_value is None and tree.root.priors is not None
    assert int(result.visit_counts.sum()) == 20 and tree.root.visits == 21



class WonButBlind:
    """A network that knows the position is won but not how: every mating move gets a tiny prior,
    every other move an equal share, every position the value +0.95 (as a net a queen up sees it)."""

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> tuple[list[chess.Move], list[chess.Move]]:
        return moves, mating_moves(board)

    def evaluate(self, requests: list) -> tuple[list[np.ndarray], np.ndarray]:
        priors = []
        for moves, mates in requests:
            p = np.array([0.001 if move in mates else 1.0 for move in moves], dtype=np.float64)
            priors.append((p / p.sum()).astype(np.float32))
        return priors, np.full(len(requests), 0.95, dtype=np.float32)


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_mate_in_one_is_played_however_small_its_prior(algorithm):
    b = board("6k1/5ppp/8/8/8/8/1Q6/R5K1 w - - 0 1")  # a queen and a rook up; Ra8# and Qb8#
    mates = mating_moves(b)
    blind = MCTS(WonButBlind(), SearchConfig(num_simulations=200, algorithm=algorithm, mate_in_one=False))
    assert blind.search([GameTree(b)])[0].move not in mates  # the failure mate_in_one removes
    found = MCTS(WonButBlind(), SearchConfig(num_simulations=200, algorithm=algorithm)).search([GameTree(b)])[0]
    assert found.move in mates
    # The mate is the only move searched: the whole policy target, and the root value tends to +1.
    index = found.moves.index(found.move)
    assert found.visit_counts[index] == found.visit_counts.sum() == 200
    assert found.pi[index] > 0.99 and found.root_value > 0.99
