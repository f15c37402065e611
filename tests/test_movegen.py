"""The search's move generator against python-chess, the rules oracle: the same set of legal moves."""

from __future__ import annotations

import random

import chess
import pytest

from alphazero.board.movegen import legal_moves, mating_move_index

# Positions chosen for what goes wrong in move generators (most from the perft suites).
TRICKY = [
    chess.STARTING_FEN,
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",  # "kiwipete"
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",  # promotions, pins, castling
    "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
    "8/8/8/8/k1pP3R/8/8/4K3 b - d3 0 1",  # en passant would expose the king along the rank
    "8/8/8/2k5/2pP4/8/B7/4K3 b - d3 0 1",  # en passant is the only way out of check? (bishop check)
    "8/8/8/8/k2Pp2Q/8/8/3K4 b - d3 0 1",  # the pawn that could capture en passant is pinned
    "4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1",  # both castles
    "4k3/8/8/8/8/8/5r2/R3K2R w KQ - 0 1",  # castling kingside through an attacked square
    "4k3/8/8/8/8/8/8/R3K2r w Q - 0 1",  # in check: no castling
    "r3k2r/8/8/8/8/8/8/1R2K1R1 b kq - 0 1",  # queenside b8 attacked: castling is still legal
    "4k3/8/8/8/4r3/8/3B4/4K2b w - - 0 1",  # double check: only the king moves
    "8/P1k5/8/8/8/8/5Kp1/8 w - - 0 1",  # promotions for both colours
    "1r2k3/P7/8/8/8/8/8/4K3 w - - 0 1",  # promotion by capture and by push
    "4k3/8/8/8/8/8/4q3/4K3 w - - 0 1",  # the king must capture
    "7k/8/8/8/8/8/8/K6R b - - 0 1",  # a pinned-looking piece that is not a piece of ours
    "3k4/8/8/3r4/8/8/3B4/3K4 w - - 0 1",  # bishop pinned on a file cannot move
    "3k4/8/8/8/7b/8/5P2/4K3 w - - 0 1",  # pawn pinned on a diagonal may capture only the pinner
    "4k3/8/8/8/8/6b1/5P2/4K3 w - - 0 1",  # pinned pawn can capture the pinner
]


def _same(board: chess.Board) -> None:
    ours = legal_moves(board)
    assert len(ours) == len(set(ours)), f"duplicate moves in {board.fen()}"
    assert set(ours) == set(board.legal_moves), (
        board.fen(), sorted(move.uci() for move in set(ours) ^ set(board.legal_moves)))


@pytest.mark.parametrize("fen", TRICKY)
def test_tricky_positions(fen: str) -> None:
    _same(chess.Board(fen))


def test_random_games_with_checks_and_captures() -> None:
    rng = random.Random(7)
    positions = 0
    for game in range(150):
        board = chess.Board(TRICKY[game % len(TRICKY)])
        for _ in range(200):
            _same(board)
            positions += 1
            moves = list(board.legal_moves)
            if not moves:
                break
            # Half the plies prefer checks and captures, to reach pins, evasions and promotions often.
            forcing = [m for m in moves if board.is_capture(m) or board.gives_check(m)] if rng.random() < 0.5 else []
            board.push(rng.choice(forcing or moves))
    assert positions > 10_000


def test_boards_it_does_not_handle_go_to_python_chess() -> None:
    no_king = chess.Board("8/8/8/8/8/8/8/R3K3 w - - 0 1")
    assert set(legal_moves(no_king)) == set(no_king.legal_moves)
    chess960 = chess.Board("bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9", chess960=True)
    assert set(legal_moves(chess960)) == set(chess960.legal_moves)


def _first_mate(board: chess.Board, moves: list[chess.Move]) -> int | None:
    for index, move in enumerate(moves):
        board.push(move)
        mate = board.is_checkmate()
        board.pop()
        if mate:
            return index
    return None


def _random_placement(rng: random.Random) -> chess.Board:
    """Two kings and one to five pieces, most of them for the side to move: positions rich in mates."""
    board = chess.Board(None)
    squares = rng.sample(range(64), 7)
    board.set_piece_at(squares[0], chess.Piece(chess.KING, chess.WHITE))
    board.set_piece_at(squares[1], chess.Piece(chess.KING, chess.BLACK))
    strong = rng.choice([chess.WHITE, chess.BLACK])
    for square in squares[2:2 + rng.randint(1, 5)]:
        piece = rng.choice([chess.QUEEN, chess.ROOK, chess.ROOK, chess.BISHOP, chess.KNIGHT, chess.PAWN, chess.PAWN])
        if piece != chess.PAWN or chess.square_rank(square) not in (0, 7):
            board.set_piece_at(square, chess.Piece(piece, strong if rng.random() < 0.8 else not strong))
    board.turn = strong
    return board


def test_mating_move_index_is_the_first_mate_by_brute_force() -> None:
    """The check filter never drops a mate: equal to playing every move, on random placements (rich in
    mates) and along random games with forcing moves (pins, discoveries, castling, en passant)."""
    rng = random.Random(11)
    positions = mates = promotions = 0
    while positions < 4_000:
        board = _random_placement(rng)
        if not board.is_valid() or board.is_game_over():
            continue
        moves = legal_moves(board)
        expected = _first_mate(board, moves)
        assert mating_move_index(board, moves) == expected, board.fen()
        positions += 1
        if expected is not None:
            mates += 1
            promotions += moves[expected].promotion is not None
    assert mates > 80 and promotions > 0
    for game in range(40):
        board = chess.Board(TRICKY[game % len(TRICKY)])
        for _ in range(120):
            moves = legal_moves(board)
            if not moves:
                break
            assert mating_move_index(board, moves) == _first_mate(board, moves), board.fen()
            positions += 1
            forcing = [m for m in moves if board.is_capture(m) or board.gives_check(m)] if rng.random() < 0.6 else []
            board.push(rng.choice(forcing or moves))
    assert positions > 7_000


@pytest.mark.parametrize("fen, mates", [
    ("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", {"a1a8"}),  # back rank
    ("6rk/6pp/8/6N1/8/8/8/6K1 w - - 0 1", {"g5f7"}),  # smothered
    ("6rk/6p1/8/7N/8/8/8/K6R w - - 0 1", {"h5f6", "h5f4", "h5g3"}),  # discovered (and double) checks
    ("8/8/8/8/8/8/5Q2/k3K2R w K - 0 1", {"e1g1"}),  # castling: the rook mates
    ("4k3/4P3/4K3/8/8/8/8/7B w - - 0 1", {"h1c6"}),  # the pawn guards the flight squares
    ("k7/2K5/8/8/8/8/8/1R6 w - - 0 1", {"b1a1"}),
    ("7k/8/8/8/8/8/6PP/R3K3 w Q - 0 1", set()),  # castling, no check
    ("3k4/3P4/3K4/8/8/8/8/8 w - - 0 1", set()),  # stalemating is not mating
    ("8/8/8/8/k1pP4/8/1K6/1R6 b - d3 0 1", set()),  # en passant, no mate
    ("4k3/8/4K3/8/8/8/8/3Q3B w - - 0 1", set()),  # checks the king escapes or takes
])
def test_mating_move_index_on_hand_made_positions(fen: str, mates: set[str]) -> None:
    board = chess.Board(fen)
    moves = legal_moves(board)
    index = mating_move_index(board, moves)
    assert index == _first_mate(board, moves)
    assert ({moves[index].uci()} <= mates) if index is not None else not mates
