"""The Python edge of the compiled board: ``Position`` from and to python-chess, moves as ints.

Owns conversion only; every rule lives in ``alphazero.board.kernel`` (its docstring has the array
layout). This layer is slow (microseconds to milliseconds per call) and meant for the boundaries:
set up a position once, search it in compiled code, turn the answer back into a ``chess.Move``.

A position made from a ``chess.Board`` replays the board's last moves since the last capture or
pawn move, so the kernel sees the same repetitions python-chess does.
"""

from __future__ import annotations

import chess
import numpy as np

from alphazero.board import kernel as K

# Board statuses the kernel can hold although python-chess flags them: impossible or too many checkers
# (the rules still work there; python-chess's perft positions include such checks).
_TOLERATED = chess.STATUS_TOO_MANY_CHECKERS | chess.STATUS_IMPOSSIBLE_CHECK
_STATUS_TEXT = [
    (chess.STATUS_EMPTY, "the board is empty"),
    (chess.STATUS_NO_WHITE_KING, "White has no king"),
    (chess.STATUS_NO_BLACK_KING, "Black has no king"),
    (chess.STATUS_TOO_MANY_KINGS, "a side has more than one king"),
    (chess.STATUS_TOO_MANY_WHITE_PAWNS, "White has more than 8 pawns"),
    (chess.STATUS_TOO_MANY_BLACK_PAWNS, "Black has more than 8 pawns"),
    (chess.STATUS_PAWNS_ON_BACKRANK, "a pawn stands on the first or last rank"),
    (chess.STATUS_TOO_MANY_WHITE_PIECES, "White has more than 16 pieces"),
    (chess.STATUS_TOO_MANY_BLACK_PIECES, "Black has more than 16 pieces"),
    (chess.STATUS_BAD_CASTLING_RIGHTS, "castling rights without the king and rook on their squares"),
    (chess.STATUS_INVALID_EP_SQUARE, "the en-passant square does not follow a double pawn push"),
    (chess.STATUS_OPPOSITE_CHECK, "the side not to move is in check"),
    (chess.STATUS_RACE_CHECK, "race check"),
    (chess.STATUS_RACE_OVER, "race over"),
    (chess.STATUS_RACE_MATERIAL, "race material"),
]
# Each castling right of the kernel and the rook square python-chess keeps it by.
CASTLING_ROOKS = [(K.CASTLE_WK, chess.BB_H1), (K.CASTLE_WQ, chess.BB_A1), (K.CASTLE_BK, chess.BB_H8),
                   (K.CASTLE_BQ, chess.BB_A8)]
# Moves kept free at the end of ``keys``/``undo`` for a search to make.
SEARCH_RESERVE = 256


def move_from_chess(move: chess.Move) -> int:
    """A ``chess.Move`` as the kernel's int (``from | to << 6 | promotion << 12``)."""
    promotion = move.promotion - 1 if move.promotion else 0
    return move.from_square | move.to_square << 6 | promotion << 12


def move_to_chess(move: int) -> chess.Move:
    """The kernel's int as a ``chess.Move`` (``NO_MOVE`` becomes ``chess.Move.null()``)."""
    move = int(move)
    if move == K.NO_MOVE:
        return chess.Move.null()
    promotion = move >> 12
    return chess.Move(move & 63, (move >> 6) & 63, promotion + 1 if promotion else None)


def why_unsupported(board: chess.Board) -> str | None:
    """Why the kernel cannot hold ``board`` (Chess960, an illegal setup), in words; None if it can."""
    if board.chess960:
        return "Chess960 castling is not supported by the compiled board"
    status = board.status() & ~_TOLERATED
    if status:
        return "; ".join(text for flag, text in _STATUS_TEXT if status & flag) or "not a legal position"
    return None


def castling_bits(board: chess.Board) -> int:
    """The kernel's ``ST_CASTLING`` bits for the board's (clean) castling rights."""
    rights = board.clean_castling_rights()
    return sum(bit for bit, rook in CASTLING_ROOKS if rights & rook)


def replayed_start(board: chess.Board) -> tuple[chess.Board, list[chess.Move]]:
    """Where a kernel position of ``board`` starts, and the moves it replays from there (oldest first).

    The moves are the board's last ones since the last capture or pawn move (at most what the kernel's
    history holds besides ``SEARCH_RESERVE``), so the kernel sees the repetitions python-chess does; a
    null move in the stack stays a null move. Without such moves the start is ``board`` itself (read only).
    """
    replay = min(board.halfmove_clock, len(board.move_stack), K.HISTORY - SEARCH_RESERVE)
    if not replay:
        return board, []
    start = board.copy(stack=replay)
    moves = [start.pop() for _ in range(replay)][::-1]
    return start, moves


class Position:
    """A position in the kernel's arrays (``bb``, ``sq``, ``st``, ``keys``, ``undo``)."""

    __slots__ = ("bb", "sq", "st", "keys", "undo", "_scratch")

    def __init__(self) -> None:
        self.bb = np.zeros(14, np.uint64)  # [14] piece and colour bitboards
        self.sq = np.full(64, K.EMPTY, np.int8)  # [64] mailbox
        self.st = np.zeros(K.ST_SIZE, np.int64)  # [6] side, castling, ep, clocks, ply
        self.keys = np.zeros(K.HISTORY, np.uint64)  # [H] key after each move
        self.undo = np.zeros((K.HISTORY, K.U_SIZE), np.int32)  # [H, 5] undo records
        self._scratch = np.zeros(K.MAX_MOVES, np.int32)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_fen(cls, fen: str) -> Position:
        """Parse a FEN; an illegal one raises ``ValueError`` naming what is wrong."""
        try:
            board = chess.Board(fen)
        except ValueError as error:
            raise ValueError(f"illegal FEN {fen!r}: {error}") from None
        reason = why_unsupported(board)
        if reason:
            raise ValueError(f"illegal FEN {fen!r}: {reason}")
        return cls._from_plain(board)

    @classmethod
    def from_board(cls, board: chess.Board) -> Position:
        """The board's position, with its reversible recent moves replayed for repetitions."""
        reason = why_unsupported(board)
        if reason:
            raise ValueError(f"position {board.fen()!r}: {reason}")
        start, moves = replayed_start(board)
        position = cls._from_plain(start)
        for move in moves:
            if move:
                position.push(move_from_chess(move))
            else:  # python-chess allows null moves in a game's stack
                K.make_null(position.st, position.keys, position.undo)
        position.st[K.ST_HALFMOVE] = board.halfmove_clock  # a replayed null move zeroed it; python-chess does not
        return position

    @classmethod
    def _from_plain(cls, board: chess.Board) -> Position:
        position = cls()
        for square, piece in board.piece_map().items():
            code = 6 * (0 if piece.color == chess.WHITE else 1) + piece.piece_type - 1
            position.sq[square] = code
            position.bb[code] |= np.uint64(1 << square)
            position.bb[K.OCC_WHITE + code // 6] |= np.uint64(1 << square)
        st = position.st
        st[K.ST_SIDE] = K.WHITE if board.turn == chess.WHITE else K.BLACK
        st[K.ST_CASTLING] = castling_bits(board)
        st[K.ST_EP] = K.NO_SQUARE
        if board.ep_square is not None:
            # Kept only where a pawn of the side to move stands ready (the kernel's invariant).
            side = st[K.ST_SIDE]
            if int(K.PAWN_ATTACKS[1 - side, board.ep_square]) & int(position.bb[6 * side + K.PAWN]):
                st[K.ST_EP] = board.ep_square
        st[K.ST_HALFMOVE] = board.halfmove_clock
        st[K.ST_FULLMOVE] = board.fullmove_number
        st[K.ST_PLY] = 0
        position.keys[0] = K.compute_key(position.bb, position.st)
        return position

    def copy(self) -> Position:
        other = Position.__new__(Position)
        for name in ("bb", "sq", "st", "keys", "undo", "_scratch"):
            setattr(other, name, getattr(self, name).copy())
        return other

    # -- reading ---------------------------------------------------------------------------------
    def to_board(self) -> chess.Board:
        """The position as a ``chess.Board`` (without move history)."""
        board = chess.Board(None)
        for square in range(64):
            code = int(self.sq[square])
            if code != K.EMPTY:
                board.set_piece_at(square, chess.Piece(code % 6 + 1, code < 6))
        st = self.st
        board.turn = chess.WHITE if st[K.ST_SIDE] == K.WHITE else chess.BLACK
        rights = int(st[K.ST_CASTLING])
        board.castling_rights = sum(rook for bit, rook in CASTLING_ROOKS if rights & bit)
        board.ep_square = None if st[K.ST_EP] == K.NO_SQUARE else int(st[K.ST_EP])
        board.halfmove_clock = int(st[K.ST_HALFMOVE])
        board.fullmove_number = int(st[K.ST_FULLMOVE])
        return board

    def fen(self) -> str:
        return self.to_board().fen()

    @property
    def key(self) -> int:
        """The incrementally kept Zobrist key (Polyglot's)."""
        return int(self.keys[self.st[K.ST_PLY]])

    def legal_moves(self) -> np.ndarray:
        """The legal moves, [n] int32, in generation order."""
        n = K.generate_moves(self.bb, self.sq, self.st, self._scratch, False)
        return self._scratch[:n].copy()

    def in_check(self) -> bool:
        return bool(K.in_check(self.bb, self.st))

    # -- changing --------------------------------------------------------------------------------
    def push(self, move: int) -> None:
        """Play ``move``, which must be legal here (the kernel does not check: an illegal move
        corrupts the position)."""
        if self.st[K.ST_PLY] >= K.HISTORY - 1:
            raise ValueError(f"position history full ({K.HISTORY} moves)")
        K.make_move(self.bb, self.sq, self.st, self.keys, self.undo, np.int32(move))

    def pop(self) -> None:
        if self.st[K.ST_PLY] == 0:
            raise IndexError("pop from a position with no moves made")
        if self.undo[self.st[K.ST_PLY] - 1, K.U_MOVE] == K.NO_MOVE:
            K.unmake_null(self.st, self.undo)
        else:
            K.unmake_move(self.bb, self.sq, self.st, self.undo)

    def push_chess(self, move: chess.Move) -> None:
        """Play a ``chess.Move`` after checking it is legal here (``ValueError`` if not)."""
        code = move_from_chess(move)
        if code not in self.legal_moves():
            raise ValueError(f"illegal move {move.uci()} in {self.fen()}")
        self.push(code)

    # -- rules -----------------------------------------------------------------------------------
    def repetitions(self) -> int:
        """Earlier occurrences of this position (2 means threefold repetition)."""
        return int(K.repetitions(self.st, self.keys))

    def is_fifty_moves(self) -> bool:
        """python-chess's ``is_fifty_moves``: 100 half-moves without a capture or pawn move, and a
        legal move left (mate takes precedence)."""
        return bool(self.st[K.ST_HALFMOVE] >= 100 and len(self.legal_moves()) > 0)

    def is_insufficient_material(self) -> bool:
        return bool(K.insufficient_material(self.bb))

    def perft(self, depth: int, bulk: bool = True) -> int:
        """Leaves of the legal move tree to ``depth`` (``bulk``: the last ply counted, not played)."""
        if depth <= 0:
            return 1
        moves = np.zeros((depth, K.MAX_MOVES), np.int32)
        function = K.perft if bulk else K.perft_full
        return int(function(self.bb, self.sq, self.st, self.keys, self.undo, moves, depth))
