"""The compiled board against python-chess: perft counts, move sets, keys, make/unmake, draw rules, FEN."""

import random

import chess
import chess.polyglot
import numpy as np
import pytest

from alphazero.board import kernel as K
from alphazero.board.position import Position, move_from_chess, move_to_chess

# The Chess Programming Wiki's perft positions with their published leaf counts.
PERFT = [
    (chess.STARTING_FEN, [20, 400, 8902, 197281]),
    ("r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", [48, 2039, 97862, 4085603]),
    ("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", [14, 191, 2812, 43238, 674624]),
    ("r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1", [6, 264, 9467, 422333]),
    ("r2q1rk1/pP1p2pp/Q4n2/bbp1p3/Np6/1B3NBn/pPPP1PPP/R3K2R b KQ - 0 1", [6, 264, 9467, 422333]),  # 4, mirrored
    ("rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8", [44, 1486, 62379, 2103487]),
    ("r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10", [46, 2079, 89890, 3894594]),
]


@pytest.mark.parametrize("fen,counts", PERFT, ids=["start", "kiwipete", "pos3", "pos4", "pos4-mirrored", "pos5", "pos6"])
def test_perft_counts(fen, counts):
    position = Position.from_fen(fen)
    for depth, expected in enumerate(counts, start=1):
        assert position.perft(depth) == expected, f"depth {depth}"
    # Every leaf made and unmade too: the paths a search takes; the position is left as it was.
    assert position.perft(3, bulk=False) == counts[2]
    assert position.fen() == chess.Board(fen).fen()


def _snapshot(position):
    ply = int(position.st[K.ST_PLY])
    return (position.bb.copy(), position.sq.copy(), position.st.copy(), position.keys[:ply + 1].copy(),
            position.undo[:ply].copy())


def _assert_same(before, after, what):
    for name, a, b in zip(("bb", "sq", "st", "keys", "undo"), before, after):
        assert np.array_equal(a, b), f"{what}: {name} differs"


def _random_games(seed, positions):
    """Yield (board, position) in lockstep along random games until ``positions`` were seen, the
    final position of each game (mate, stalemate, bare kings, ...) included."""
    rng = random.Random(seed)
    seen = 0
    while seen < positions:
        board = chess.Board()
        position = Position.from_board(board)
        while seen < positions:
            yield board, position
            seen += 1
            if board.is_game_over():
                break
            move = rng.choice(list(board.legal_moves))
            board.push(move)
            position.push(move_from_chess(move))


def test_random_positions_match_python_chess():
    """Move sets, keys, make/unmake and FEN round trips on 2,500 positions of random games."""
    kinds = {"castling": 0, "en passant": 0, "promotion": 0, "check": 0}
    for board, position in _random_games(seed=1, positions=2500):
        expected = sorted(move.uci() for move in board.legal_moves)
        moves = position.legal_moves()
        assert sorted(move_to_chess(m).uci() for m in moves) == expected, board.fen()
        assert position.key == chess.polyglot.zobrist_hash(board), board.fen()
        assert position.key == int(K.compute_key(position.bb, position.st))
        assert position.fen() == board.fen()
        assert Position.from_fen(board.fen()).fen() == board.fen()
        assert position.in_check() == board.is_check()
        kinds["check"] += board.is_check()
        before = _snapshot(position)
        for move in moves:
            chess_move = move_to_chess(move)
            kinds["castling"] += board.is_castling(chess_move)
            kinds["en passant"] += board.is_en_passant(chess_move)
            kinds["promotion"] += chess_move.promotion is not None
            position.push(move)
            # The incremental key equals the key from scratch, and Polyglot's, after every move.
            assert position.key == int(K.compute_key(position.bb, position.st)), f"{board.fen()} {chess_move}"
            position.pop()
            _assert_same(before, _snapshot(position), f"{board.fen()} {chess_move}")
    assert all(count > 0 for count in kinds.values()), kinds


def test_null_move_restores_everything():
    position = Position.from_fen("rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3")
    assert position.st[K.ST_EP] == chess.F6
    before = _snapshot(position)
    K.make_null(position.st, position.keys, position.undo)
    assert position.st[K.ST_SIDE] == K.BLACK and position.st[K.ST_EP] == K.NO_SQUARE
    assert position.key == int(K.compute_key(position.bb, position.st))
    position.pop()
    _assert_same(before, _snapshot(position), "null move")


def test_draw_rules_match_python_chess_on_random_games():
    """Repetition, fifty moves and insufficient material, position by position; random games run
    long enough to reach bare endings and repeated positions."""
    seen = {"repetition": 0, "insufficient": 0, "fifty": 0}
    for board, position in _random_games(seed=2, positions=3000):
        assert (position.repetitions() >= 2) == board.is_repetition(3), board.fen()
        assert position.is_insufficient_material() == board.is_insufficient_material(), board.fen()
        assert position.is_fifty_moves() == board.is_fifty_moves(), board.fen()
        seen["repetition"] += board.is_repetition(2)
        seen["insufficient"] += board.is_insufficient_material()
        seen["fifty"] += board.halfmove_clock >= 100
    assert all(count > 0 for count in seen.values()), seen


def test_threefold_repetition_and_history_replay():
    board = chess.Board()
    position = Position.from_board(board)
    for uci in ["g1f3", "g8f6", "f3g1", "f6g8"] * 2:
        board.push_uci(uci)
        position.push_chess(chess.Move.from_uci(uci))
        assert (position.repetitions() >= 2) == board.is_repetition(3)
    assert board.is_repetition(3) and position.repetitions() == 2
    # A position made from the board replays its reversible moves, so it sees the same.
    assert Position.from_board(board).repetitions() == 2
    board.push_uci("e2e4")  # a pawn move: nothing before it can repeat
    assert Position.from_board(board).repetitions() == 0
    board.push(chess.Move.null())  # a null move in the stack is replayed as one
    assert Position.from_board(board).fen() == board.fen()


def test_fifty_move_rule():
    board = chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 99 80")
    position = Position.from_board(board)
    assert not position.is_fifty_moves()
    board.push_uci("d3d1")
    position.push_chess(chess.Move.from_uci("d3d1"))
    assert position.is_fifty_moves() and board.is_fifty_moves()
    # Checkmate on the hundredth half-move takes precedence.
    mated = chess.Board("R5k1/8/6K1/8/8/8/8/8 b - - 100 80")
    assert Position.from_board(mated).is_fifty_moves() == mated.is_fifty_moves() is False


@pytest.mark.parametrize("fen", [
    "8/8/4k3/8/8/4K3/8/8 w - - 0 1",  # bare kings
    "8/8/4k3/8/8/3NK3/8/8 w - - 0 1",  # a knight
    "8/8/4k3/8/8/3BK3/8/8 w - - 0 1",  # a bishop
    "8/8/3bk3/8/8/3BK3/8/8 w - - 0 1",  # bishops on opposite colours: a mate exists
    "8/8/2b1k3/8/8/3BK3/8/8 w - - 0 1",  # bishops on the same colour
    "8/8/4k3/8/8/2NNK3/8/8 w - - 0 1",  # two knights
    "8/8/3nk3/8/8/3NK3/8/8 w - - 0 1",  # knight against knight: selfmate possible
    "8/8/3qk3/8/8/3NK3/8/8 w - - 0 1",  # knight against queen
    "8/8/4k3/8/8/3PK3/8/8 w - - 0 1",  # a pawn
    "8/8/4k3/8/8/3RK3/8/8 w - - 0 1",  # a rook
])
def test_insufficient_material_matches_python_chess(fen):
    board = chess.Board(fen)
    assert Position.from_board(board).is_insufficient_material() == board.is_insufficient_material()


def test_moves_convert_both_ways():
    for uci in ["e2e4", "e1g1", "e8c8", "a7a8q", "b2a1n", "h7h8r", "c2c1b"]:
        move = chess.Move.from_uci(uci)
        assert move_to_chess(move_from_chess(move)) == move
    assert move_from_chess(chess.Move.from_uci("a7a8q")) == 48 | 56 << 6 | K.QUEEN << 12
    assert move_to_chess(K.NO_MOVE) == chess.Move.null()


@pytest.mark.parametrize("fen,reason", [
    ("not a fen", "illegal FEN"),
    ("8/8/8/8/8/8/8/8 w - - 0 1", "empty"),
    ("8/8/4k3/8/8/8/8/8 w - - 0 1", "White has no king"),
    ("4k3/8/8/8/8/8/8/P3K3 w - - 0 1", "first or last rank"),
    ("4k3/8/8/8/8/8/8/r3K3 b - - 0 1", "not to move is in check"),
    ("4k3/8/8/8/8/8/8/4K3 w K - 0 1", "castling rights"),
    ("4k3/8/8/8/8/8/8/4K3 w - e6 0 1", "en-passant"),
])
def test_illegal_fen_is_one_clear_error(fen, reason):
    with pytest.raises(ValueError, match="illegal FEN") as error:
        Position.from_fen(fen)
    assert reason in str(error.value) and "\n" not in str(error.value)


def test_push_chess_refuses_an_illegal_move():
    position = Position.from_fen(chess.STARTING_FEN)
    with pytest.raises(ValueError, match="illegal move e2e5"):
        position.push_chess(chess.Move.from_uci("e2e5"))
