"""The compiled search (``alphazero.search.compiled``) and its board pieces, against their oracles.

The Python search (``alphazero.search.mcts``) is the oracle of the compiled one: with the same
deterministic evaluator and the same seeds both must return the same moves, visit counts, priors, root
values and chosen moves, move after move, with noise, temperature, virtual loss and tree reuse; PUCT
and Gumbel (whose improved-policy targets must be equal too).
``movegen`` and ``encoding`` are the oracles of the move order and of the planes, python-chess behind
them. The first run compiles (about a minute, once per checkout: numba caches the machine code).
"""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest

from alphazero.board import encoding
from alphazero.board.encode_kernel import encode_position, position_actions
from alphazero.board.game import terminal_status
from alphazero.board.move_order import legal_moves_in_order
from alphazero.board.movegen import legal_moves
from alphazero.board.position import Position, move_to_chess
from alphazero.config import SearchConfig
from alphazero.nets.evaluator import UniformEvaluator, masked_softmax
from alphazero.search.compiled import tree as C
from alphazero.search.compiled.batch import CompiledMCTS, UniformPlaneEvaluator
from alphazero.search.compiled.expansion import softmax_over
from alphazero.search.compiled.root import choose_moves
from alphazero.search.compiled.tree import CompiledGameTree
from alphazero.search.factory import build_search
from alphazero.search.mcts import MCTS, GameTree, choose_move_index
from tests.test_encoding import SPECIAL_FENS as ENCODING_SPECIAL_FENS

SPECIAL_FENS = [
    *ENCODING_SPECIAL_FENS,  # promotions, capture-promotions, both castles and en passant for each side
    "8/8/8/KPp4r/8/8/8/6k1 w - c6 0 1",  # en passant that would expose the king along the rank
    "8/8/3k4/8/1pP5/8/8/4K2Q b - c3 0 1",  # en passant
    "4k3/8/8/2KPp2r/8/8/8/8 w - e6 0 1",  # en passant that would open the rank to the king
    "8/8/8/3k4/4Pp2/8/8/4K3 b - e3 0 1",  # en passant out of check by the pawn just pushed
    "r3k2r/8/8/8/8/8/8/R3K1r1 w Qkq - 0 1",  # in check: no castling
    "r3k2r/8/8/8/8/5q2/8/R3K2R w KQkq - 0 1",  # castling through attacked squares
    "4k3/8/8/8/8/8/3q4/4K3 w - - 0 1",  # check by a queen next to the king
    "4k3/4r3/8/8/8/8/4B3/4K3 w - - 0 1",  # a pinned bishop
    "4k3/8/8/8/b7/8/2P5/4K3 w - - 0 1",  # a pawn pinned on the diagonal cannot push
    "4k3/8/8/8/1b6/8/3P4/4K3 w - - 0 1",  # a pinned pawn, its pinner out of reach
    "4k3/8/8/8/8/2b5/3P4/4K3 w - - 0 1",  # pinned pawn captures its pinner
    "3rk3/8/8/8/8/8/3P4/3K4 w - - 0 1",  # pawn pinned on the file still pushes
    "k7/3P4/8/8/8/8/8/4K2R w K - 0 1",  # promotion and castling
    "k7/8/1K6/8/8/8/8/6Q1 w - - 0 1",  # mate in one beside stalemates
    "7k/R7/6K1/p7/8/8/8/8 b - - 0 1",  # every move loses
]


def random_boards(count: int, seed: int) -> list[chess.Board]:
    """Positions along random games (with their move stacks), both colours to move, endings included."""
    rng = random.Random(seed)
    boards: list[chess.Board] = []
    while len(boards) < count:
        board = chess.Board()
        while not board.is_game_over() and len(boards) < count:
            board.push(rng.choice(list(board.legal_moves)))
            if rng.random() < 0.25:
                boards.append(board.copy())
    return boards


# --------------------------------------------------------------------------------------------------
# Moves, encoding, actions


def test_moves_in_movegen_order_planes_and_actions_match_the_python_oracles() -> None:
    boards = random_boards(1500, seed=11) + [chess.Board(fen) for fen in SPECIAL_FENS]
    for board in boards:
        position = Position.from_board(board)
        moves = legal_moves_in_order(position)
        expected = legal_moves(board)
        assert [move_to_chess(m) for m in moves] == expected, board.fen()
        assert set(expected) == set(board.legal_moves)
        planes = encode_position(position)
        reference = encoding.encode_board(board)
        for plane in range(encoding.NUM_PLANES):
            assert np.array_equal(planes[plane], reference[plane]), f"plane {plane} of {board.fen()}"
        assert np.array_equal(position_actions(position, moves), encoding.moves_to_actions(board, expected))


# Checks of every kind, and mates: discovered and double checks, a castling rook, en passant that uncovers
# a slider, promotions to each piece, a king that steps aside for its own rook.
CHECK_FENS = [
    "4k3/8/8/8/8/8/4B3/4R1K1 w - - 0 1",  # the bishop uncovers the rook
    "k7/8/8/8/8/8/1B6/KN6 w - - 0 1",  # the knight uncovers the bishop on the long diagonal
    "5k2/8/8/8/8/8/8/4K2R w K - 0 1",  # O-O checks along the f-file
    "k7/8/8/KPp4r/8/8/8/8 w - c6 0 1",  # en passant
    "1k6/8/8/1pP5/8/8/8/1R2K3 w - b6 0 1",  # en passant uncovers the rook on the b-file
    "3r1r2/4P1k1/8/8/8/8/8/4K3 w - - 0 1",  # promotions and under-promotions that check
    "7k/8/8/8/8/8/8/K5R1 w - - 0 1",  # a rook lift
    "6k1/5ppp/8/8/8/8/8/KR6 w - - 0 1",  # back-rank mate
    "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4",  # scholar's mate
]


def test_mating_move_plays_only_possible_checks_and_finds_the_first_mate() -> None:
    from alphazero.board.kernel import MAX_MOVES, bishop_attacks, rook_attacks
    from alphazero.board.move_order import ordered_moves
    from alphazero.search.compiled.expansion import mating_move, may_give_check
    from tests.test_mcts import MATE_IN_ONE

    boards = random_boards(600, seed=23) + [chess.Board(fen) for fen in SPECIAL_FENS + CHECK_FENS + MATE_IN_ONE]
    buffer = np.zeros(MAX_MOVES, np.int32)
    checks = candidates = total = mates = 0
    for board in boards:
        if board.is_game_over():
            continue
        position = Position.from_board(board)
        count = ordered_moves(position.bb, position.sq, position.st, buffer)
        moves = [move_to_chess(int(m)) for m in buffer[:count]]
        king = board.king(not board.turn)
        occupied = position.bb[12] | position.bb[13]
        diagonal, straight = np.uint64(bishop_attacks(king, occupied)), np.uint64(rook_attacks(king, occupied))
        first_mate = -1
        for index, move in enumerate(moves):
            may = may_give_check(position.sq, position.st, buffer[index], int(board.turn == chess.BLACK), king,
                                 diagonal, straight)
            assert may or not board.gives_check(move), f"{move} checks in {board.fen()}"
            checks += board.gives_check(move)
            candidates += bool(may)
            if first_mate < 0 and board.gives_check(move):
                board.push(move)
                first_mate = index if board.is_checkmate() else -1
                board.pop()
        total += count
        mates += first_mate >= 0
        assert mating_move(position.bb, position.sq, position.st, position.keys, position.undo, buffer, count) \
            == first_mate, board.fen()
        assert position.fen() == board.fen()  # the arrays are left as they were
    assert checks > 300 and mates >= 5
    assert candidates < 0.2 * total  # most moves are passed over unplayed


def test_encoding_of_special_planes() -> None:
    # Legal en passant only: a pinned capturer gives 0, as has_legal_en_passant() says.
    for fen in ["8/8/8/KPp4r/8/8/8/6k1 w - c6 0 1", "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3"]:
        board = chess.Board(fen)
        plane = encode_position(Position.from_board(board))[16]
        assert (plane == (1 + board.ep_square if board.has_legal_en_passant() else 0)).all()
    black = chess.Board("rnbqkbnr/pppp1ppp/8/8/3PpP2/8/PPP1P1PP/RNBQKBNR b KQkq f3 0 3")
    planes = encode_position(Position.from_board(black))
    assert (planes[12] == 0).all() and (planes[16] == 1 + (chess.F3 ^ 56)).all()
    assert planes[0, 4, 4] == 1 and planes[6, 4, 3] == planes[6, 4, 5] == 1  # e4 (Black), d4 and f4 (White), mirrored
    late = chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 300")
    assert (encode_position(Position.from_board(late))[23] == 255).all()


def test_numpy_exact_softmax_and_move_choice() -> None:
    rng = np.random.default_rng(3)
    edges_i = np.zeros((1, 300, C.EDGE_I), np.int32)
    edges_f = np.zeros((1, 300, C.EDGE_F), np.float64)
    scratch = np.zeros(300)
    for _ in range(300):
        count = int(rng.integers(1, 219))
        actions = rng.choice(encoding.NUM_ACTIONS, size=count, replace=False)
        logits = (rng.standard_normal(encoding.NUM_ACTIONS) * rng.choice([0.0, 0.1, 3.0, 30.0])).astype(np.float32)
        edges_i[0, :count, C.EI_ACTION] = actions
        softmax_over(logits, edges_i, edges_f, 0, 0, count, scratch)
        expected = masked_softmax(logits[None], [actions])[0]
        assert np.array_equal(edges_f[0, :count, C.EF_PRIOR].astype(np.float32), expected)
    for trial in range(2000):
        count = int(rng.integers(1, 60))
        counts = rng.integers(0, 30, count) * (rng.random(count) < 0.6)
        counts[rng.integers(count)] += 1
        temperature = [0.0, 1.0, 0.5, 0.3, 2.0][trial % 5]
        seed = int(rng.integers(2**32))
        expected = choose_move_index(counts, temperature, np.random.default_rng(seed))
        uniform = np.random.default_rng(seed).random() if temperature > 0 else 0.0
        chosen = np.zeros(1, np.int64)
        choose_moves(counts.astype(np.int64), np.array([0, count]), np.array([temperature]), np.array([uniform]),
                     chosen)
        assert chosen[0] == expected


# --------------------------------------------------------------------------------------------------
# Search against the Python search


class HashNetwork:
    """A fixed fake network behind the plane seam: logits a deterministic function of the planes, value
    the material balance. Each row is computed alone, so a batch's composition changes nothing."""

    def __init__(self, value_scale: float = 5.0) -> None:
        rng = np.random.default_rng(7)
        self.features = rng.standard_normal((24 * 64, 6))
        self.heads = (rng.standard_normal((6, encoding.NUM_ACTIONS)) * 2.0)
        self.value_scale = value_scale
        self.calls: list[int] = []

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append(len(planes))
        logits = np.zeros((len(planes), encoding.NUM_ACTIONS), np.float32)
        values = np.zeros(len(planes), np.float32)
        for i, plane in enumerate(np.asarray(planes)):
            hidden = np.tanh(plane.reshape(-1).astype(np.float64) @ self.features / 8.0)
            logits[i] = (hidden @ self.heads).astype(np.float32)
            values[i] = np.float32(np.tanh((float(plane[13, 0, 0]) - float(plane[14, 0, 0])) / self.value_scale))
        return logits, values


class PythonSeam:
    """The same network behind the Python search's seam (what ``NetworkEvaluator`` does around it)."""

    def __init__(self, network: HashNetwork) -> None:
        self.network = network

    def prepare(self, board: chess.Board, moves: list[chess.Move]) -> tuple[np.ndarray, np.ndarray]:
        return encoding.encode_board(board), encoding.moves_to_actions(board, moves)

    def evaluate(self, requests: list) -> tuple[list[np.ndarray], np.ndarray]:
        logits, values = self.network.forward(np.stack([planes for planes, _ in requests]))
        return masked_softmax(logits, [actions for _, actions in requests]), values


def repeated_history_board() -> chess.Board:
    """Black to move in an opening where ...Nc6 repeats the position for the third time in the game."""
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    for san in ["Ng1", "Nb8", "Nf3", "Nc6", "Ng1", "Nb8", "Nf3"]:
        board.push_san(san)
    return board


ORACLE_POSITIONS = [
    chess.Board(),
    chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3"),
    chess.Board("r3k2r/pppq1ppp/2n2n2/3pp3/3PP3/2N2N2/PPPQ1PPP/R3K2R w KQkq - 0 8"),
    chess.Board("8/5pk1/6p1/8/3R4/6P1/5PK1/8 w - - 0 40"),
    chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"),  # mate in one
    chess.Board("k7/8/1K6/8/8/8/8/6Q1 w - - 0 1"),  # mate in one beside stalemates
    chess.Board("8/8/4k3/8/8/3B4/4K3/3n4 w - - 98 80"),  # fifty moves within the tree; captures to bare kings
    chess.Board("4k3/1P6/8/8/8/8/6p1/4K3 w - - 0 1"),  # promotions both ways
    chess.Board("rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3"),  # en passant
    repeated_history_board(),  # threefold repetition over the game's history
]


def run_both(config: SearchConfig, boards: list[chess.Board], plies: int, kind: str, noise: bool = True,
             temperature: float = 1.0, simulations: int | None = None) -> int:
    """Play ``plies`` moves in every game with both searches; assert equal results; return searches compared."""
    if kind == "uniform":
        python, compiled = MCTS(UniformEvaluator(), config), CompiledMCTS(UniformPlaneEvaluator(), config)
    else:
        network = HashNetwork()
        python, compiled = MCTS(PythonSeam(network), config), CompiledMCTS(network, config)
    python_trees = [GameTree(board, seed=i) for i, board in enumerate(boards)]
    compiled_trees = [CompiledGameTree(board, seed=i) for i, board in enumerate(boards)]
    compared = 0
    for ply in range(plies):
        live = [i for i, tree in enumerate(python_trees) if terminal_status(tree.board) is None]
        if not live:
            break
        budgets = [simulations or config.num_simulations + (i % 3) for i in live]
        expected = python.search([python_trees[i] for i in live], add_noise=noise, temperature=temperature,
                                 num_simulations=budgets)
        got = compiled.search([compiled_trees[i] for i in live], add_noise=noise, temperature=temperature,
                              num_simulations=budgets)
        for i, a, b in zip(live, expected, got):
            where = f"{kind} game {i} ply {ply} {python_trees[i].board.fen()}"
            assert b.moves == a.moves, where
            assert np.array_equal(b.visit_counts, a.visit_counts), where
            assert np.array_equal(b.pi, a.pi) and np.array_equal(b.target_counts, a.target_counts), where
            assert np.array_equal(b.priors, a.priors), where
            assert b.root_value == a.root_value, where
            assert b.move == a.move, where
            if a.visit_counts.sum() > 0 and noise and len(a.moves) > 1:
                assert np.array_equal(compiled_trees[i].root_priors, python_trees[i].root_priors), where
            compared += 1
            python_trees[i].advance(a.move, reuse=config.reuse_tree)
            compiled_trees[i].advance(b.move, reuse=config.reuse_tree)
    return compared


@pytest.mark.parametrize("kind", ["uniform", "network"])
def test_same_results_as_the_python_search(kind: str) -> None:
    config = SearchConfig(num_simulations=48)
    assert run_both(config, ORACLE_POSITIONS, 6, kind) > 40


@pytest.mark.parametrize("config", [
    SearchConfig(num_simulations=40, leaves_per_game=3),
    SearchConfig(num_simulations=32, reuse_tree=False, twofold_draw=False, c_puct_base=0.0, fpu_reduction=0.0),
    SearchConfig(num_simulations=32, dirichlet_epsilon=0.0, virtual_loss=3.0, leaves_per_game=2),
], ids=["virtual-loss", "no-reuse-no-twofold", "no-noise"])
def test_same_results_as_the_python_search_other_settings(config: SearchConfig) -> None:
    assert run_both(config, ORACLE_POSITIONS[:6] + ORACLE_POSITIONS[-2:], 4, "network") > 20
    assert run_both(config, ORACLE_POSITIONS[:4], 3, "uniform", noise=False, temperature=0.0) > 8


def test_uniform_middlegames_reach_repetitions_inside_the_tree_as_python_does() -> None:
    # Uniform priors and a zero value push the search down narrow lines that shuffle into repetitions.
    boards = [chess.Board("r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10"),
              chess.Board("8/5pk1/6p1/8/3R4/6P1/5PK1/8 w - - 0 40")]
    assert run_both(SearchConfig(num_simulations=64), boards, 6, "uniform") == 12


GUMBEL = dict(algorithm="gumbel")


@pytest.mark.parametrize("kind", ["uniform", "network"])
def test_gumbel_same_results_as_the_python_search(kind: str) -> None:
    # Gumbel draws, halving schedules for three budgets, searched roots dropped at the next move, mates:
    # the same visits, move, improved policy pi' (and its stored counts) and root value, to the bit.
    assert run_both(SearchConfig(num_simulations=48, **GUMBEL), ORACLE_POSITIONS, 6, kind) > 40


@pytest.mark.parametrize("config", [
    SearchConfig(num_simulations=40, leaves_per_game=3, **GUMBEL),
    SearchConfig(num_simulations=24, gumbel_considered=4, gumbel_c_scale=1.0, reuse_tree=False, twofold_draw=False,
                 mate_in_one=False, virtual_loss=3.0, leaves_per_game=2, **GUMBEL),
    SearchConfig(num_simulations=8, gumbel_considered=64, **GUMBEL),
], ids=["virtual-loss", "few-considered-no-reuse-no-twofold-no-mate", "all-considered"])
def test_gumbel_same_results_as_the_python_search_other_settings(config: SearchConfig) -> None:
    assert run_both(config, ORACLE_POSITIONS[:6] + ORACLE_POSITIONS[-2:], 4, "network") > 20
    assert run_both(config, ORACLE_POSITIONS[:4], 3, "uniform", noise=False, temperature=0.0) > 8


# --------------------------------------------------------------------------------------------------
# Search on its own


def tree_statistics_are_exact(search: CompiledMCTS, tree: CompiledGameTree) -> int:
    """Every node of the tree (reached from the root by child pointers; kept nodes no search tried are not
    in it) is expanded or terminal, an expanded one has N = 1 + sum N(s, a) and W(s, a) = -W(child): no node
    waits for the network and no virtual loss is left behind. Returns the number of nodes."""
    f = search.forest
    g = tree.slot
    reached = [0]
    for node in reached:
        if f.nodes_i[g, node, C.NI_STATE] == C.EXPANDED:
            start, count = f.nodes_i[g, node, C.NI_EDGE_START], f.nodes_i[g, node, C.NI_NUM_EDGES]
            reached += [int(child) for child in f.edges_i[g, start:start + count, C.EI_CHILD] if child >= 0]
    nodes = len(reached)
    for node in reached:
        state = f.nodes_i[g, node, C.NI_STATE]
        assert state in (C.EXPANDED, C.TERMINAL)
        if state == C.TERMINAL:
            assert f.nodes_f[g, node, C.NF_VALUE_SUM] == pytest.approx(
                f.nodes_i[g, node, C.NI_VISITS] * f.nodes_f[g, node, C.NF_TERMINAL])
            continue
        start, count = f.nodes_i[g, node, C.NI_EDGE_START], f.nodes_i[g, node, C.NI_NUM_EDGES]
        visits = f.edges_i[g, start:start + count, C.EI_VISITS]
        assert f.nodes_i[g, node, C.NI_VISITS] == 1 + visits.sum()
        for k in range(count):
            child = f.edges_i[g, start + k, C.EI_CHILD]
            if child < 0:
                assert visits[k] == 0 and f.edges_f[g, start + k, C.EF_VALUE] == 0
            else:
                assert f.nodes_i[g, child, C.NI_PARENT] == node
                assert visits[k] == f.nodes_i[g, child, C.NI_VISITS]
                assert f.edges_f[g, start + k, C.EF_VALUE] == pytest.approx(-f.nodes_f[g, child, C.NF_VALUE_SUM])
    return nodes


@pytest.mark.parametrize("fen", [
    "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1",
    "r5k1/8/8/8/8/8/5PPP/6K1 b - - 0 1",
    "k7/8/1K6/8/8/8/8/6Q1 w - - 0 1",
    "rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2",
])
@pytest.mark.parametrize("mate_in_one", [True, False])
def test_uniform_search_finds_mate_in_one(fen: str, mate_in_one: bool) -> None:
    search = CompiledMCTS(UniformPlaneEvaluator(), SearchConfig(algorithm="puct", num_simulations=400, mate_in_one=mate_in_one))
    tree = CompiledGameTree(chess.Board(fen), seed=0)
    result = search.search([tree])[0]
    board = chess.Board(fen)
    board.push(result.move)
    assert board.is_checkmate()
    assert result.root_value > 0.5
    if mate_in_one:  # the root searched its mate only: the whole policy target, and no other node
        assert result.visit_counts.max() == result.visit_counts.sum() == 400
        assert tree_statistics_are_exact(search, tree) == 2
    else:  # found by search among the other moves
        assert result.visit_counts.max() < 400
        assert tree_statistics_are_exact(search, tree) > 10


@pytest.mark.parametrize("fen", ["6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "k7/8/1K6/8/8/8/8/6Q1 w - - 0 1"])
def test_gumbel_finds_mate_in_one_and_starts_each_search_from_a_fresh_root(fen: str) -> None:
    config = SearchConfig(num_simulations=64, gumbel_considered=64, mate_in_one=False, **GUMBEL)
    search = CompiledMCTS(UniformPlaneEvaluator(), config)
    tree = CompiledGameTree(chess.Board(fen), seed=0)
    result = search.search([tree])[0]  # without Gumbel noise: the best move, not an exploring one
    board = chess.Board(fen)
    board.push(result.move)
    assert board.is_checkmate() and result.moves[int(np.argmax(result.pi))] == result.move
    assert result.pi.sum() == pytest.approx(1.0) and result.target_counts.sum() == pytest.approx(60_000, abs=20)
    assert tree_statistics_are_exact(search, tree) > 10
    # Sequential halving assumes a root without visits: the subtree kept by advance is searched afresh.
    tree = CompiledGameTree(ORACLE_POSITIONS[2], seed=0)
    first = search.search([tree])[0]
    tree.advance(first.move)
    second = search.search([tree], num_simulations=10)[0]
    assert second.visit_counts.sum() == 10 and tree_statistics_are_exact(search, tree) <= 11


@pytest.mark.parametrize("leaves_per_game", [1, 3])
def test_gumbel_reuses_the_kept_subtrees_evaluations_and_searches_the_same(leaves_per_game: int) -> None:
    # Statistics start afresh at every Gumbel search, but with reuse_tree the subtree of the move played
    # keeps its network evaluations: the same search, simulation for simulation (virtual losses included),
    # with fewer positions sent to the network.
    runs = {}
    for reuse in (True, False):
        network = HashNetwork()
        config = SearchConfig(num_simulations=32, leaves_per_game=leaves_per_game, reuse_tree=reuse, **GUMBEL)
        search = CompiledMCTS(network, config)
        trees = [CompiledGameTree(board, seed=i) for i, board in enumerate(ORACLE_POSITIONS)]
        log = []
        for _ in range(8):
            live = [tree for tree in trees if terminal_status(tree.board) is None]
            for tree, result in zip(live, search.search(live, add_noise=True, temperature=1.0)):
                log.append((result.move, result.visit_counts.tolist(), result.pi.tobytes(), result.root_value))
                assert tree_statistics_are_exact(search, tree) > 0
                tree.advance(result.move, reuse=reuse)
        runs[reuse] = log, sum(network.calls)
    (kept, kept_positions), (fresh, fresh_positions) = runs[True], runs[False]
    assert len(kept) >= 60 and kept == fresh
    assert kept_positions < 0.92 * fresh_positions  # 0.87 when written: a 32-simulation Gumbel tree is shallow


def test_terminal_positions_are_scored_and_finished_games_refused() -> None:
    search = CompiledMCTS(UniformPlaneEvaluator(), SearchConfig(num_simulations=400))
    losing = search.search([CompiledGameTree(chess.Board("7k/R7/6K1/p7/8/8/8/8 b - - 0 1"), seed=0)])[0]
    assert losing.root_value < -0.6 and (losing.visit_counts > 0).all()  # both moves allow Ra8#
    # The capture that leaves bare kings is a draw, worth more than facing a rook (material value).
    bare = CompiledGameTree(chess.Board("8/8/4k3/8/8/3r4/4K3/8 w - - 0 1"), seed=0)
    material = CompiledMCTS(HashNetwork(), SearchConfig(num_simulations=400))
    assert material.search([bare])[0].move == chess.Move.from_uci("e2d3")
    for fen in ["7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",  # stalemate
                "R5k1/5ppp/8/8/8/8/8/6K1 b - - 0 1",  # checkmate
                "8/8/4k3/8/8/4K3/8/8 w - - 0 1",  # insufficient material
                "8/8/4k3/8/8/3RK3/8/8 w - - 100 90"]:  # fifty moves
        with pytest.raises(ValueError, match="finished game"):
            search.search([CompiledGameTree(chess.Board(fen), seed=0)])
    # Threefold over the game's history: the repeating move is a draw, so a side that is losing takes it.
    board = repeated_history_board()
    tree = CompiledGameTree(board, seed=0)
    search.search([tree])
    assert tree_statistics_are_exact(search, tree) > 5
    repeat = chess.Move.from_uci("b8c6")
    f, g = search.forest, tree.slot
    start = f.nodes_i[g, 0, C.NI_EDGE_START]
    index = [move_to_chess(m) for m in f.edges_i[g, start:start + f.nodes_i[g, 0, C.NI_NUM_EDGES], C.EI_MOVE]]
    child = f.edges_i[g, start + index.index(repeat), C.EI_CHILD]
    assert child >= 0 and f.nodes_i[g, child, C.NI_STATE] == C.TERMINAL and f.nodes_f[g, child, C.NF_TERMINAL] == 0.0


def test_games_batched_together_search_as_each_alone() -> None:
    config = SearchConfig(num_simulations=40, leaves_per_game=2)
    network = HashNetwork()
    boards = [board.copy() for board in ORACLE_POSITIONS[:6]]
    together = CompiledMCTS(network, config)
    trees = [CompiledGameTree(board, seed=i) for i, board in enumerate(boards)]
    batch = together.search(trees, add_noise=True, temperature=1.0)
    assert max(network.calls) > 1 and len(network.calls) < 6 * 40  # one network call per round for all games
    for i, board in enumerate(boards):
        alone = CompiledMCTS(network, config).search([CompiledGameTree(board, seed=i)], add_noise=True,
                                                     temperature=1.0)[0]
        assert np.array_equal(alone.visit_counts, batch[i].visit_counts) and alone.move == batch[i].move
    for tree in trees:
        tree_statistics_are_exact(together, tree)


def test_slots_are_reused_and_a_board_changed_outside_advance_is_reloaded() -> None:
    search = CompiledMCTS(UniformPlaneEvaluator(), SearchConfig(num_simulations=16))
    trees = [CompiledGameTree(seed=i) for i in range(20)]
    search.search(trees)
    slots = search.forest.num_slots
    del trees
    trees = [CompiledGameTree(seed=i) for i in range(20)]
    search.search(trees)
    assert search.forest.num_slots == slots  # the collected trees gave their slots back
    tree = trees[0]
    tree.board.push_san("e4")  # behind the tree's back: the next search starts from the new position
    result = search.search([tree])[0]
    assert set(result.moves) == set(tree.board.legal_moves)
    tree.advance(result.move)
    assert set(search.search([tree])[0].moves) == set(tree.board.legal_moves)
    assert tree.principal_variation()[:1] and all(isinstance(m, chess.Move) for m in tree.principal_variation())
    with pytest.raises(ValueError, match="twice"):
        search.search([tree, tree])
    with pytest.raises(ValueError, match="one CompiledMCTS"):
        CompiledMCTS(UniformPlaneEvaluator()).search([tree])


def test_trees_grow_past_their_first_capacity_and_reuse_keeps_statistics() -> None:
    search = CompiledMCTS(HashNetwork(), SearchConfig(algorithm="puct", num_simulations=300))
    tree = CompiledGameTree(chess.Board(ORACLE_POSITIONS[2].fen()), seed=0)
    first = search.search([tree], temperature=0.0)[0]
    assert search.forest.num_nodes >= 300 and tree_statistics_are_exact(search, tree) > 250
    kept = int(first.visit_counts[first.moves.index(first.move)])
    tree.advance(first.move)
    second = search.search([tree], num_simulations=10, temperature=0.0)[0]
    assert second.visit_counts.sum() == kept - 1 + 10  # the child's visits, less its own evaluation
    tree_statistics_are_exact(search, tree)


class FailingNetwork(HashNetwork):
    """Raises on one chosen call, as a network that runs out of memory might."""

    def __init__(self, fail_on: int) -> None:
        super().__init__()
        self.fail_on = fail_on

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(self.calls) == self.fail_on:
            self.calls.append(-1)
            raise MemoryError("out of memory")
        return super().forward(planes)


def test_a_failed_network_call_leaves_trees_that_search_again_and_large_rounds_are_chunked() -> None:
    network = FailingNetwork(fail_on=3)
    search = CompiledMCTS(network, SearchConfig(num_simulations=24))
    trees = [CompiledGameTree(board, seed=i) for i, board in enumerate(ORACLE_POSITIONS[:4])]
    with pytest.raises(MemoryError):
        search.search(trees)
    results = search.search(trees)  # the interrupted trees start afresh: nothing waits forever
    assert all(r.visit_counts.sum() == 24 for r in results)
    for tree in trees:
        tree_statistics_are_exact(search, tree)
    # A round larger than the evaluator's max_batch goes through it in chunks, with the same result.
    chunked_network = HashNetwork()
    chunked_network.max_batch = 3
    config = SearchConfig(num_simulations=24, leaves_per_game=2)
    boards = ORACLE_POSITIONS[:5]
    chunked = CompiledMCTS(chunked_network, config).search([CompiledGameTree(b, seed=1) for b in boards])
    whole = CompiledMCTS(HashNetwork(), config).search([CompiledGameTree(b, seed=1) for b in boards])
    assert max(chunked_network.calls) == 3
    assert all(np.array_equal(a.visit_counts, b.visit_counts) for a, b in zip(chunked, whole))


def test_build_search_picks_the_compiled_search_where_it_applies() -> None:
    search, new_tree = build_search(HashNetwork(), SearchConfig())
    assert isinstance(search, CompiledMCTS) and new_tree is CompiledGameTree
    search, new_tree = build_search(HashNetwork(), SearchConfig(algorithm="gumbel"))
    assert isinstance(search, CompiledMCTS) and new_tree is CompiledGameTree
    for algorithm in ("puct", "gumbel"):
        search, new_tree = build_search(UniformEvaluator(), SearchConfig(algorithm=algorithm))  # no forward(): Python
        assert isinstance(search, MCTS) and new_tree is GameTree
        search, new_tree = build_search(HashNetwork(), SearchConfig(algorithm=algorithm, implementation="python"))
        assert isinstance(search, MCTS)
    with pytest.raises(ValueError, match="implementation"):
        build_search(HashNetwork(), SearchConfig(), implementation="fast")
