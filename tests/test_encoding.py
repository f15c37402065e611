"""The encoder plane by plane, packing, and the 4672-action move encoding, with python-chess as oracle."""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest

from alphazero.board import encoding
from alphazero.board.encoding import (
    NUM_ACTIONS,
    PACKED_SIZE,
    action_to_move,
    board_from_fen,
    encode_board,
    encode_boards,
    encode_packed,
    legal_action_mask,
    move_to_action,
    moves_to_actions,
    pack_planes,
    unpack_planes,
)

VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


def oriented(board: chess.Board, square: int) -> tuple[int, int]:
    """(rank, file) of ``square`` in the side-to-move frame."""
    if board.turn == chess.BLACK:
        square = chess.square_mirror(square)
    return chess.square_rank(square), chess.square_file(square)


def expected_planes(board: chess.Board) -> np.ndarray:
    """An independent, slow reimplementation of the plane table from python-chess calls."""
    planes = np.zeros((24, 8, 8), dtype=np.int64)
    us, them = board.turn, not board.turn
    for square, piece in board.piece_map().items():
        offset = 0 if piece.color == us else 6
        rank, file = oriented(board, square)
        planes[offset + piece.piece_type - 1, rank, file] = 1
    planes[12] = 1 if board.turn == chess.WHITE else 0
    material = {color: sum(VALUES[p.piece_type] for p in board.piece_map().values() if p.color == color)
                for color in (chess.WHITE, chess.BLACK)}
    planes[13] = material[us]
    planes[14] = material[them]
    planes[15] = material[us] - material[them] + 128
    if board.ep_square is not None and board.has_legal_en_passant():
        rank, file = oriented(board, board.ep_square)
        planes[16] = 1 + rank * 8 + file
    for square in chess.SQUARES:
        rank, file = oriented(board, square)
        planes[17, rank, file] = board.is_attacked_by(us, square)
        planes[18, rank, file] = board.is_attacked_by(them, square)
    planes[19] = board.has_kingside_castling_rights(us)
    planes[20] = board.has_queenside_castling_rights(us)
    planes[21] = board.has_kingside_castling_rights(them)
    planes[22] = board.has_queenside_castling_rights(them)
    planes[23] = min(board.ply(), 255)
    return np.clip(planes, 0, 255).astype(np.uint8)


def random_positions(count: int, seed: int) -> list[chess.Board]:
    rng = random.Random(seed)
    boards: list[chess.Board] = []
    while len(boards) < count:
        board = chess.Board()
        for _ in range(rng.randint(1, 160)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
            if rng.random() < 0.3:
                boards.append(board.copy())
    return boards[:count]


SPECIAL_FENS = [
    "4k3/1P6/8/8/8/8/6p1/4K3 w - - 0 1",  # promotions both ways
    "r1n1k3/1P6/8/8/8/8/8/4K3 w - - 0 1",  # capture-promotions to both sides
    "4k3/8/8/8/8/8/1p6/R1N1K3 b - - 0 1",  # Black capture-promotions
    "r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1",  # both castles, White
    "r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R b KQkq - 0 1",  # both castles, Black
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # White en passant
    "rnbqkbnr/pppp1ppp/8/8/3PpP2/8/PPP1P1PP/RNBQKBNR b KQkq f3 0 3",  # Black en passant
]


def test_start_position_every_plane() -> None:
    board = chess.Board()
    planes = encode_board(board)
    assert planes.shape == (24, 8, 8) and planes.dtype == np.uint8
    assert (planes[0] == np.array([[0] * 8, [1] * 8] + [[0] * 8] * 6)).all()  # pawns on rank 1
    assert planes[5, 0, 4] == 1 and planes[5].sum() == 1  # king on e1
    assert planes[6, 6].sum() == 8 and planes[6].sum() == 8  # opponent pawns on rank 6
    assert planes[11, 7, 4] == 1  # opponent king on e8
    assert (planes[12] == 1).all()
    assert (planes[13] == 39).all() and (planes[14] == 39).all() and (planes[15] == 128).all()
    assert (planes[16] == 0).all()
    assert (planes[19:23] == 1).all()
    assert (planes[23] == 0).all()
    assert (planes == expected_planes(board)).all()  # attack planes included
    assert planes[17, 2].sum() == 8 and planes[17, 3].sum() == 0  # rank 3 covered, rank 4 not


def test_black_to_move_is_mirrored() -> None:
    board = chess.Board()
    board.push_san("e4")
    planes = encode_board(board)
    assert planes[0, 1].sum() == 8  # Black's pawns on the mover's rank 1
    rank, file = oriented(board, chess.E4)
    assert (rank, file) == (4, 4) and planes[6, 4, 4] == 1  # White's e-pawn, mirrored e4 -> e5
    assert planes[6, 6, 4] == 0
    assert planes[5, 0, 4] == 1  # Black king e8 -> mover's e1
    assert (planes[12] == 0).all() and (planes[23] == 1).all()
    assert (planes == expected_planes(board)).all()


@pytest.mark.parametrize("fen, flags", [
    ("r3k2r/8/8/8/8/8/8/R3K2R w Kq - 0 1", (1, 0, 0, 1)),
    ("r3k2r/8/8/8/8/8/8/R3K2R b Kq - 0 1", (0, 1, 1, 0)),
    ("r3k2r/8/8/8/8/8/8/R3K2R w Qk - 0 1", (0, 1, 1, 0)),
    ("r3k2r/8/8/8/8/8/8/R3K2R b - - 0 1", (0, 0, 0, 0)),
])
def test_partial_castling_rights(fen: str, flags: tuple[int, ...]) -> None:
    planes = encode_board(chess.Board(fen))
    assert tuple(int(planes[p, 0, 0]) for p in range(19, 23)) == flags
    for p in range(19, 23):
        assert (planes[p] == planes[p, 0, 0]).all()


def test_legal_en_passant_for_both_colours() -> None:
    white = chess.Board(SPECIAL_FENS[5])  # White e5 pawn can take f5 en passant (f6)
    assert white.has_legal_en_passant()
    assert (encode_board(white)[16] == 1 + chess.F6).all()
    black = chess.Board(SPECIAL_FENS[6])  # Black e4 pawn can take f4 en passant (f3)
    assert black.has_legal_en_passant()
    assert (encode_board(black)[16] == 1 + chess.square_mirror(chess.F3)).all()  # f3 -> oriented f6


def test_pseudo_only_en_passant_is_zero() -> None:
    # ep square set by a double push, but the only capturer is pinned against its king.
    board = chess.Board("8/8/8/K2pP2r/8/8/8/7k w - d6 0 1")
    assert board.ep_square == chess.D6 and not board.has_legal_en_passant()
    assert (encode_board(board)[16] == 0).all()
    # ep square set, no pawn that could capture at all
    nobody = chess.Board("4k3/8/8/3p4/8/8/8/4K3 w - d6 0 1")
    assert (encode_board(nobody)[16] == 0).all()


def test_material_imbalance_and_promotions() -> None:
    board = chess.Board("4k3/1P6/8/8/8/8/8/R3K3 b - - 0 40")  # Black to move: 0 vs rook + pawn
    planes = encode_board(board)
    assert (planes[13] == 0).all() and (planes[14] == 6).all() and (planes[15] == 122).all()
    queen_vs_rook = chess.Board("q3k3/8/8/8/8/8/8/R3K3 w - - 0 1")
    planes = encode_board(queen_vs_rook)
    assert (planes[13] == 5).all() and (planes[14] == 9).all() and (planes[15] == 124).all()
    for fen in SPECIAL_FENS[:3]:
        board = chess.Board(fen)
        assert (encode_board(board) == expected_planes(board)).all()


def test_ply_is_clamped_at_255() -> None:
    planes = encode_board(chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 300"))
    assert (planes[23] == 255).all()


def test_random_positions_match_the_oracle_and_batch_equals_single() -> None:
    boards = random_positions(300, seed=1)
    batch = encode_boards(boards)
    assert batch.shape == (300, 24, 8, 8)
    for board, planes in zip(boards, batch):
        assert (planes == expected_planes(board)).all(), board.fen()
        assert (planes == encode_board(board)).all()


def test_scaled_planes_are_small() -> None:
    planes = encode_boards(random_positions(200, seed=2) + [chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 300")])
    scaled = (planes.astype(np.float32) - encoding.PLANE_OFFSET[None, :, None, None]) * encoding.PLANE_SCALE[None, :, None, None]
    assert np.abs(scaled).max() <= 4.0


def test_packed_round_trip_is_exact_and_small() -> None:
    boards = random_positions(1000, seed=3) + [chess.Board(f) for f in SPECIAL_FENS]
    planes = encode_boards(boards)
    packed = encode_packed(boards)
    assert packed.shape == (len(boards), PACKED_SIZE) and PACKED_SIZE <= 128 and packed.dtype == np.uint8
    assert (pack_planes(planes) == packed).all()
    assert (unpack_planes(packed) == planes).all()
    assert (unpack_planes(packed[0]) == planes[0]).all()


def test_pack_rejects_planes_not_in_encoder_form() -> None:
    planes = encode_board(chess.Board())
    bad = planes.copy()
    bad[0, 3, 3] = 2
    with pytest.raises(ValueError):
        pack_planes(bad)
    uneven = planes.copy()
    uneven[13, 0, 0] = 7
    with pytest.raises(ValueError):
        pack_planes(uneven)


def _all_test_positions() -> list[chess.Board]:
    return random_positions(1000, seed=4) + [chess.Board(f) for f in SPECIAL_FENS]


def test_every_legal_move_round_trips_and_actions_are_distinct() -> None:
    boards = _all_test_positions()
    seen_kinds = set()
    for board in boards:
        moves = list(board.legal_moves)
        actions = [move_to_action(board, move) for move in moves]
        assert len(set(actions)) == len(actions), board.fen()
        assert all(0 <= a < NUM_ACTIONS for a in actions)
        assert (moves_to_actions(board, moves) == np.array(actions)).all()
        for move, action in zip(moves, actions):
            assert action_to_move(board, action) == move
            if move.promotion and move.promotion != chess.QUEEN:
                assert 64 * 64 <= action < 73 * 64
                seen_kinds.add("underpromotion")
            elif move.promotion == chess.QUEEN:
                assert action < 56 * 64
                seen_kinds.add("queen promotion")
            if board.is_castling(move):
                seen_kinds.add(("castle", board.turn, board.is_kingside_castling(move)))
            if board.is_en_passant(move):
                seen_kinds.add(("ep", board.turn))
        mask = legal_action_mask(board)
        assert mask.sum() == len(moves) and mask[actions].all()
    for kind in ["underpromotion", "queen promotion", ("ep", chess.WHITE), ("ep", chess.BLACK)] + [
            ("castle", color, side) for color in (chess.WHITE, chess.BLACK) for side in (True, False)]:
        assert kind in seen_kinds, kind


def test_colour_flipped_mirror_gives_same_actions_and_planes() -> None:
    for board in _all_test_positions()[::5]:
        mirror = board.mirror()
        for move in board.legal_moves:
            flipped = chess.Move(chess.square_mirror(move.from_square), chess.square_mirror(move.to_square), move.promotion)
            assert flipped in mirror.legal_moves
            assert move_to_action(board, move) == move_to_action(mirror, flipped)
        a, b = encode_board(board), encode_board(mirror)
        same = [p for p in range(24) if p not in (12, 23)]
        assert (a[same] == b[same]).all(), board.fen()
        assert (a[12] != b[12]).all()  # the turn plane is absolute
        # mirror() keeps the fullmove number and flips the turn, so ply differs by exactly one
        assert abs(int(a[23, 0, 0]) - int(b[23, 0, 0])) == 1 or int(a[23, 0, 0]) == int(b[23, 0, 0]) == 255


def test_bad_actions_and_fens_are_clear_errors() -> None:
    board = chess.Board()
    for bad in (-1, NUM_ACTIONS, 10**6):
        with pytest.raises(ValueError, match=str(bad)):
            action_to_move(board, bad)
    with pytest.raises(ValueError):
        action_to_move(board, "12")
    illegal = [a for a in range(NUM_ACTIONS) if not legal_action_mask(board)[a]][100]
    with pytest.raises(ValueError, match=f"action {illegal}"):
        action_to_move(board, illegal)
    for fen in ("not a fen", "8/8/8/8/8/8/8/8 w - - 0 1", "4k3/8/8/8/8/8/4R3/4K3 b - - 0 1 extra",
                "4k3/8/8/8/8/8/8/r3K2R b K - 0 1", "pppppppp/pppppppp/8/8/8/8/8/4K2k w - - 0 1"):
        with pytest.raises(ValueError, match="illegal FEN"):
            board_from_fen(fen)
    assert board_from_fen(chess.STARTING_FEN) == chess.Board()
