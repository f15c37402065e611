"""Board and move encoding: 24 input planes, their packed storage form, and the 4672-action policy.

Owns the exact layout of what the network sees and what the replay store keeps. Knows nothing about
torch, the search or Ray. Standard chess only (no Chess960 castling rights).

Planes (``uint8``, shape ``[24, 8, 8]``), always in the frame of the side to move: when Black is to
move every square is mirrored vertically (``chess.square_mirror``), so rank 0 is the mover's back rank.
``plane[p, rank, file]`` is square ``rank * 8 + file`` of that oriented frame.

====== ==========================================================================================
plane  content
====== ==========================================================================================
0-5    side to move's pawns, knights, bishops, rooks, queens, king (1 where present)
6-11   opponent's pawns, knights, bishops, rooks, queens, king
12     turn: all 1 when White is to move, all 0 when Black is
13     material of the side to move (P=1, N=3, B=3, R=5, Q=9, K=0), constant plane
14     material of the opponent, constant plane
15     material difference (side to move minus opponent) + 128, constant plane
16     en passant: 1 + oriented index of the en-passant square when a legal en-passant capture
       exists (``board.has_legal_en_passant()``), else 0; constant plane
17     1 on every square attacked by the side to move (as ``board.is_attacked_by``)
18     1 on every square attacked by the opponent
19-22  castling rights: mover kingside, mover queenside, opponent kingside, opponent queenside
23     ``min(board.ply(), 255)``, constant plane
====== ==========================================================================================

All values are clamped to 0..255. The network never sees the raw integers: ``PLANE_OFFSET`` and
``PLANE_SCALE`` give the fixed affine map ``x_float = (x_uint8 - offset) * scale`` per plane
(material / 39, difference (d - 128) / 39, en passant / 64, ply / 255; bit planes unchanged).

Packed storage (``PACKED_SIZE`` = 122 bytes per position): the 14 bit planes (0-11, 17, 18) as 8 bytes
each, little-endian square order (byte k holds oriented rank k, bit f holds file f), followed by one
byte for each of the 10 constant planes (12-16, 19-23). ``unpack_planes(pack_planes(x)) == x`` exactly.

Policy (4672 = 73 x 64 actions), AlphaZero's 8x8x73 layout in the same oriented frame:
``action = plane * 64 + from_square`` where ``from_square`` is oriented (``rank * 8 + file``), so the
flattened ``[73, 8, 8]`` output of a convolutional policy head is the action vector as it stands.

- planes 0-55: queen-like moves, ``plane = direction * 7 + (distance - 1)``, directions in order
  N, NE, E, SE, S, SW, W, NW (N = towards the opponent). Queen promotions and castling (the king
  moving two files) are plain queen-like moves.
- planes 56-63: knight moves, deltas (rank, file) in order (+2,+1), (+1,+2), (-1,+2), (-2,+1),
  (-2,-1), (-1,-2), (+1,-2), (+2,-1).
- planes 64-72: underpromotions, ``plane = 64 + 3 * piece + (file_delta + 1)`` with piece 0, 1, 2 =
  knight, bishop, rook and file_delta -1, 0, +1.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import chess
import numpy as np

from alphazero.board.movegen import attacks_through

NUM_PLANES = 24
NUM_ACTIONS = 4672
BIT_PLANES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 17, 18)
CONSTANT_PLANES = (12, 13, 14, 15, 16, 19, 20, 21, 22, 23)
PACKED_SIZE = len(BIT_PLANES) * 8 + len(CONSTANT_PLANES)  # 122 bytes
ENCODING_VERSION = 1

_MATERIAL_CAP = 39.0
PLANE_OFFSET = np.zeros(NUM_PLANES, dtype=np.float32)
PLANE_OFFSET[15] = 128.0
PLANE_SCALE = np.ones(NUM_PLANES, dtype=np.float32)
PLANE_SCALE[[13, 14, 15]] = 1.0 / _MATERIAL_CAP
PLANE_SCALE[16] = 1.0 / 64.0
PLANE_SCALE[23] = 1.0 / 255.0


# Feature rows: 14 bitboards (absolute, flipped in numpy), 10 constant-plane values, 1 flip flag.
_NUM_BITBOARDS = len(BIT_PLANES)
_ROW_LEN = _NUM_BITBOARDS + len(CONSTANT_PLANES) + 1


def board_features(board: chess.Board) -> list[int]:
    """One position as a flat list of ints: the cheap per-board part of encoding.

    Python-side work only (bitboards in absolute orientation, the constant-plane values and a flip
    flag); ``planes_from_features`` / ``packed_from_features`` turn many rows into arrays at once.
    Search calls this at each leaf so a batch of leaves is encoded with one numpy pass.
    """
    us = board.turn
    them = not us
    mine = board.occupied_co[us]
    theirs = board.occupied_co[them]
    pawns, knights, bishops = board.pawns, board.knights, board.bishops
    rooks, queens, kings = board.rooks, board.queens, board.kings
    material_us = (
        (pawns & mine).bit_count()
        + 3 * ((knights | bishops) & mine).bit_count()
        + 5 * (rooks & mine).bit_count()
        + 9 * (queens & mine).bit_count()
    )
    material_them = (
        (pawns & theirs).bit_count()
        + 3 * ((knights | bishops) & theirs).bit_count()
        + 5 * (rooks & theirs).bit_count()
        + 9 * (queens & theirs).bit_count()
    )
    flip = 56 if us == chess.BLACK else 0
    ep_square = board.ep_square
    en_passant = 0
    if ep_square is not None and board.has_legal_en_passant():
        en_passant = 1 + (ep_square ^ flip)
    rights = board.clean_castling_rights()
    if us == chess.WHITE:
        castling = (
            1 if rights & chess.BB_H1 else 0,
            1 if rights & chess.BB_A1 else 0,
            1 if rights & chess.BB_H8 else 0,
            1 if rights & chess.BB_A8 else 0,
        )
    else:
        castling = (
            1 if rights & chess.BB_H8 else 0,
            1 if rights & chess.BB_A8 else 0,
            1 if rights & chess.BB_H1 else 0,
            1 if rights & chess.BB_A1 else 0,
        )
    return [
        pawns & mine, knights & mine, bishops & mine, rooks & mine, queens & mine, kings & mine,
        pawns & theirs, knights & theirs, bishops & theirs, rooks & theirs, queens & theirs,
        kings & theirs,
        attacks_through(board, us, board.occupied), attacks_through(board, them, board.occupied),
        1 if us == chess.WHITE else 0,
        min(material_us, 255), min(material_them, 255),
        max(0, min(material_us - material_them + 128, 255)),
        en_passant,
        *castling,
        min(board.ply(), 255),
        1 if flip else 0,
    ]


def packed_from_features(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Feature rows from ``board_features`` -> packed positions ``uint8 [B, PACKED_SIZE]``."""
    table = np.array(rows, dtype=np.uint64).reshape(-1, _ROW_LEN)  # [B, 25]
    bitboards = table[:, :_NUM_BITBOARDS].astype("<u8")  # [B, 14]
    flipped = table[:, -1].astype(bool)
    if flipped.any():
        # A vertical mirror of a bitboard is the reversal of its eight rank bytes.
        bitboards[flipped] = bitboards[flipped].byteswap()
    packed = np.empty((table.shape[0], PACKED_SIZE), dtype=np.uint8)
    packed[:, : _NUM_BITBOARDS * 8] = bitboards.view(np.uint8)
    packed[:, _NUM_BITBOARDS * 8 :] = table[:, _NUM_BITBOARDS:-1]
    return packed


def unpack_planes(packed: np.ndarray) -> np.ndarray:
    """Packed positions ``uint8 [B, PACKED_SIZE]`` (or ``[PACKED_SIZE]``) -> planes ``uint8 [B, 24, 8, 8]``."""
    packed = np.asarray(packed, dtype=np.uint8)
    single = packed.ndim == 1
    packed = packed.reshape(-1, PACKED_SIZE)
    batch = packed.shape[0]
    planes = np.empty((batch, NUM_PLANES, 8, 8), dtype=np.uint8)
    bits = np.unpackbits(packed[:, : _NUM_BITBOARDS * 8], axis=1, bitorder="little")
    planes[:, BIT_PLANES] = bits.reshape(batch, _NUM_BITBOARDS, 8, 8)
    planes[:, CONSTANT_PLANES] = packed[:, _NUM_BITBOARDS * 8 :, None, None]
    return planes[0] if single else planes


def pack_planes(planes: np.ndarray) -> np.ndarray:
    """Planes ``uint8 [B, 24, 8, 8]`` (or ``[24, 8, 8]``) -> packed ``uint8 [B, PACKED_SIZE]``.

    Exact inverse of ``unpack_planes`` for planes made by this module (bit planes hold 0/1, the
    constant planes are constant); anything else raises ``ValueError`` rather than lose data.
    """
    planes = np.asarray(planes, dtype=np.uint8)
    single = planes.ndim == 3
    planes = planes.reshape(-1, NUM_PLANES, 8, 8)
    bit_part = planes[:, BIT_PLANES]
    const_part = planes[:, CONSTANT_PLANES]
    if bit_part.max(initial=0) > 1 or (const_part != const_part[:, :, :1, :1]).any():
        raise ValueError("planes are not in the encoder's form (bit planes must be 0/1, scalar planes constant)")
    batch = planes.shape[0]
    packed = np.empty((batch, PACKED_SIZE), dtype=np.uint8)
    packed[:, : _NUM_BITBOARDS * 8] = np.packbits(bit_part.reshape(batch, -1), axis=1, bitorder="little")
    packed[:, _NUM_BITBOARDS * 8 :] = const_part[:, :, 0, 0]
    return packed[0] if single else packed


def planes_from_features(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Feature rows from ``board_features`` -> planes ``uint8 [B, 24, 8, 8]``."""
    return unpack_planes(packed_from_features(rows))


def encode_board(board: chess.Board) -> np.ndarray:
    """One position -> planes ``uint8 [24, 8, 8]`` in the side-to-move frame (table in module docs)."""
    return planes_from_features([board_features(board)])[0]


def encode_boards(boards: Iterable[chess.Board]) -> np.ndarray:
    """Many positions -> planes ``uint8 [B, 24, 8, 8]``; one numpy pass for the whole batch."""
    rows = [board_features(board) for board in boards]
    if not rows:
        return np.zeros((0, NUM_PLANES, 8, 8), dtype=np.uint8)
    return planes_from_features(rows)


def encode_packed(boards: Iterable[chess.Board]) -> np.ndarray:
    """Many positions -> packed storage form ``uint8 [B, PACKED_SIZE]``."""
    rows = [board_features(board) for board in boards]
    if not rows:
        return np.zeros((0, PACKED_SIZE), dtype=np.uint8)
    return packed_from_features(rows)


# ---------------------------------------------------------------------------------------------
# Moves <-> actions

_DIRECTIONS = ((1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1))
_KNIGHT_DELTAS = ((2, 1), (1, 2), (-1, 2), (-2, 1), (-2, -1), (-1, -2), (1, -2), (2, -1))
_UNDERPROMOTIONS = (chess.KNIGHT, chess.BISHOP, chess.ROOK)


def _build_tables() -> tuple[list[int], list[tuple[int, int]]]:
    """``from_to[from*64+to]`` -> action (or -1), and ``targets[action]`` -> (to_square, promotion)."""
    from_to = [-1] * (64 * 64)
    targets: list[tuple[int, int]] = [(-1, 0)] * NUM_ACTIONS
    for square in range(64):
        rank, file = divmod(square, 8)
        for direction, (dr, df) in enumerate(_DIRECTIONS):
            for distance in range(1, 8):
                r, f = rank + dr * distance, file + df * distance
                if 0 <= r < 8 and 0 <= f < 8:
                    action = (direction * 7 + distance - 1) * 64 + square
                    from_to[square * 64 + r * 8 + f] = action
                    targets[action] = (r * 8 + f, 0)
        for index, (dr, df) in enumerate(_KNIGHT_DELTAS):
            r, f = rank + dr, file + df
            if 0 <= r < 8 and 0 <= f < 8:
                action = (56 + index) * 64 + square
                from_to[square * 64 + r * 8 + f] = action
                targets[action] = (r * 8 + f, 0)
        if rank == 6:
            for piece_index, piece in enumerate(_UNDERPROMOTIONS):
                for df in (-1, 0, 1):
                    if 0 <= file + df < 8:
                        action = (64 + 3 * piece_index + df + 1) * 64 + square
                        targets[action] = (56 + file + df, piece)
    return from_to, targets


# [from * 64 + to] in the oriented frame -> action of the queen-like or knight move, -1 where none (list of int).
FROM_TO_ACTION, _ACTION_TARGET = _build_tables()


def move_to_action(board: chess.Board, move: chess.Move) -> int:
    """A move of the side to move in ``board`` -> its action index in ``[0, 4672)``.

    Does not check legality (search calls this on moves it generated); raises ``ValueError`` for a
    move no action describes (a null move, an impossible geometry).
    """
    flip = 56 if board.turn == chess.BLACK else 0
    start, end = move.from_square ^ flip, move.to_square ^ flip
    promotion = move.promotion
    if promotion is not None and promotion != chess.QUEEN:
        df = (end & 7) - (start & 7)
        if start >> 3 != 6 or end >> 3 != 7 or not -1 <= df <= 1 or promotion not in _UNDERPROMOTIONS:
            raise ValueError(f"move {move.uci()} has no action: not an underpromotion geometry")
        return (64 + 3 * (promotion - chess.KNIGHT) + df + 1) * 64 + start
    action = FROM_TO_ACTION[start * 64 + end]
    if action < 0:
        raise ValueError(f"move {move.uci()} has no action (not a queen-like or knight move)")
    return action


def moves_to_actions(board: chess.Board, moves: Sequence[chess.Move]) -> np.ndarray:
    """Moves of the side to move -> action indices ``int64 [len(moves)]`` (the search's hot path)."""
    flip = 56 if board.turn == chess.BLACK else 0
    table = FROM_TO_ACTION
    actions = []
    for move in moves:
        promotion = move.promotion
        if promotion is None or promotion == chess.QUEEN:
            actions.append(table[(move.from_square ^ flip) * 64 + (move.to_square ^ flip)])
        else:
            actions.append(move_to_action(board, move))
    return np.array(actions, dtype=np.int64)


def action_to_move(board: chess.Board, action: int) -> chess.Move:
    """An action index -> the legal ``chess.Move`` it names in ``board``.

    Raises ``ValueError`` naming the action when it is out of range, names no square on the board,
    or is not a legal move in this position.
    """
    if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
        raise ValueError(f"action {action!r} is not an integer")
    action = int(action)
    if not 0 <= action < NUM_ACTIONS:
        raise ValueError(f"action {action} is out of range [0, {NUM_ACTIONS})")
    target, promotion = _ACTION_TARGET[action]
    if target < 0:
        raise ValueError(f"action {action} leaves the board and names no move")
    flip = 56 if board.turn == chess.BLACK else 0
    start = (action % 64) ^ flip
    end = target ^ flip
    piece: int | None = int(promotion)
    if promotion == 0:
        piece = None
        if board.pawns & board.occupied_co[board.turn] & chess.BB_SQUARES[start] and (target >> 3) == 7:
            piece = chess.QUEEN
    move = chess.Move(start, end, piece)
    if not board.is_legal(move):
        raise ValueError(f"action {action} ({move.uci()}) is not a legal move in {board.fen()}")
    return move


def legal_action_mask(board: chess.Board) -> np.ndarray:
    """``bool [4672]``: True at the action of every legal move in ``board``."""
    mask = np.zeros(NUM_ACTIONS, dtype=bool)
    mask[moves_to_actions(board, list(board.legal_moves))] = True
    return mask


def board_from_fen(fen: str) -> chess.Board:
    """Parse and validate a FEN; raises ``ValueError`` naming the FEN and what is wrong with it."""
    try:
        board = chess.Board(fen)
    except ValueError as error:
        raise ValueError(f"illegal FEN {fen!r}: {error}") from None
    status = board.status()
    if status != chess.STATUS_VALID:
        problems = [(flag.name or str(flag)).lower() for flag in chess.Status if flag and status & flag]
        raise ValueError(f"illegal FEN {fen!r}: {', '.join(problems) or 'invalid position'}")
    return board
