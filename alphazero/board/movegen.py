"""Fast legal move generation for the search: one bitboard pass, moves from a shared table.

Owns nothing but speed. ``legal_moves(board)`` returns the same set of moves as
``list(board.legal_moves)`` (python-chess stays the rules oracle; the tests compare the two on
thousands of positions), in its own order, two to three times faster: python-chess builds each move
through a generator and tests each one for king safety, while this computes pins and checks once
per position and reads ``chess.Move`` objects (immutable) from a precomputed table.

Standard chess only; a board that is not (Chess960, a missing or extra king, a variant) is handed
to python-chess unchanged. En passant, rare and subtle, is checked by python-chess as well.
"""

from __future__ import annotations

import chess

_MOVES = [chess.Move(start, end) for start in range(64) for end in range(64)]  # [from * 64 + to]
_PROMOTIONS = [
    [chess.Move(start, end, piece) for piece in (chess.QUEEN, chess.ROOK, chess.BISHOP, chess.KNIGHT)]
    for start in range(64) for end in range(64)
]  # [from * 64 + to] -> the four promotions

_KNIGHT = chess.BB_KNIGHT_ATTACKS
_KING = chess.BB_KING_ATTACKS
_PAWN = chess.BB_PAWN_ATTACKS
_DIAG_MASKS, _DIAG = chess.BB_DIAG_MASKS, chess.BB_DIAG_ATTACKS
_RANK_MASKS, _RANK = chess.BB_RANK_MASKS, chess.BB_RANK_ATTACKS
_FILE_MASKS, _FILE = chess.BB_FILE_MASKS, chess.BB_FILE_ATTACKS
_RAYS = chess.BB_RAYS
_BETWEEN = [[chess.between(a, b) for b in range(64)] for a in range(64)]  # squares strictly between, 0 if not aligned
_ALL = chess.BB_ALL
_NOT_FILE_A = _ALL & ~chess.BB_FILE_A
_NOT_FILE_H = _ALL & ~chess.BB_FILE_H
_BACK_RANKS = chess.BB_RANK_1 | chess.BB_RANK_8


def attacks_through(board: chess.Board, color: chess.Color, occupied: int) -> int:
    """Every square ``color`` attacks, its sliders seeing through ``occupied``: ``board.occupied`` for the
    squares ``board.is_attacked_by`` names (the encoding's planes 17 and 18), the board without the
    mover's king for the squares that king may not step to."""
    ours = board.occupied_co[color]
    pawns = board.pawns & ours
    if color == chess.WHITE:
        attacked = ((pawns << 7) & _NOT_FILE_H) | ((pawns << 9) & _NOT_FILE_A)
    else:
        attacked = ((pawns >> 9) & _NOT_FILE_H) | ((pawns >> 7) & _NOT_FILE_A)
    attacked &= _ALL
    knights = board.knights & ours
    while knights:
        square = knights.bit_length() - 1
        knights ^= 1 << square
        attacked |= _KNIGHT[square]
    diagonal = (board.bishops | board.queens) & ours
    while diagonal:
        square = diagonal.bit_length() - 1
        diagonal ^= 1 << square
        attacked |= _DIAG[square][_DIAG_MASKS[square] & occupied]
    straight = (board.rooks | board.queens) & ours
    while straight:
        square = straight.bit_length() - 1
        straight ^= 1 << square
        attacked |= _RANK[square][_RANK_MASKS[square] & occupied] | _FILE[square][_FILE_MASKS[square] & occupied]
    king = board.kings & ours
    if king:
        attacked |= _KING[king.bit_length() - 1]
    return attacked


def _lone_blockers(board: chess.Board, king: int, sliders: int, pieces: int) -> int:
    """The ``pieces`` that stand alone between square ``king`` and one of the ``sliders`` aimed at it
    along a rank, file or diagonal: with ``sliders`` the enemy's, our pinned pieces; with ``sliders``
    ours and ``king`` the enemy king's square, the pieces whose move may give a discovered check."""
    occupied = board.occupied
    found = 0
    snipers = (((_RANK[king][0] | _FILE[king][0]) & (board.rooks | board.queens))
               | (_DIAG[king][0] & (board.bishops | board.queens))) & sliders
    while snipers:
        sniper = snipers.bit_length() - 1
        snipers ^= 1 << sniper
        between = _BETWEEN[king][sniper] & occupied
        if between and not between & (between - 1):
            found |= between & pieces
    return found


def legal_moves(board: chess.Board) -> list[chess.Move]:
    """Every legal move of the side to move (the set ``board.legal_moves`` gives; order differs).

    Cost: ~2-3x less than ``list(board.legal_moves)`` on typical middle-game positions.
    """
    us = board.turn
    ours = board.occupied_co[us]
    theirs = board.occupied_co[not us]
    king_bb = board.kings & ours
    if board.chess960 or not king_bb or king_bb & (king_bb - 1) or not board.kings & theirs:
        return list(board.legal_moves)
    occupied = board.occupied
    king = king_bb.bit_length() - 1
    enemy = attacks_through(board, not us, occupied ^ king_bb)
    checkers = board.attackers_mask(not us, king)
    moves: list[chess.Move] = []
    append = moves.append
    base = king * 64
    targets = _KING[king] & ~ours & ~enemy
    while targets:
        to = targets.bit_length() - 1
        targets ^= 1 << to
        append(_MOVES[base + to])
    if checkers & (checkers - 1):  # double check: only the king moves
        return moves
    if checkers:
        checker = checkers.bit_length() - 1
        allowed = checkers | _BETWEEN[king][checker]
    else:
        allowed = _ALL

    # Pinned pieces may move only along the line through their king.
    pinned = _lone_blockers(board, king, theirs, ours)
    rays = _RAYS[king]

    not_ours = ~ours & allowed
    pieces = board.knights & ours & ~pinned  # a pinned knight never moves
    while pieces:
        start = pieces.bit_length() - 1
        pieces ^= 1 << start
        targets = _KNIGHT[start] & not_ours
        base = start * 64
        while targets:
            to = targets.bit_length() - 1
            targets ^= 1 << to
            append(_MOVES[base + to])
    sliders = (board.bishops | board.rooks | board.queens) & ours
    diagonal_movers = board.bishops | board.queens
    straight_movers = board.rooks | board.queens
    while sliders:
        start = sliders.bit_length() - 1
        bit = 1 << start
        sliders ^= bit
        targets = 0
        if bit & diagonal_movers:
            targets = _DIAG[start][_DIAG_MASKS[start] & occupied]
        if bit & straight_movers:
            targets |= _RANK[start][_RANK_MASKS[start] & occupied] | _FILE[start][_FILE_MASKS[start] & occupied]
        targets &= not_ours
        if bit & pinned:
            targets &= rays[start]
        base = start * 64
        while targets:
            to = targets.bit_length() - 1
            targets ^= 1 << to
            append(_MOVES[base + to])

    # Pawns: pushes and captures in bulk for the free ones, one by one for the pinned ones.
    pawns = board.pawns & ours
    empty = ~occupied & _ALL
    free = pawns & ~pinned
    if us == chess.WHITE:
        single = (free << 8) & empty
        double = ((single & chess.BB_RANK_3) << 8) & empty & allowed
        single &= allowed
        left = ((free & _NOT_FILE_A) << 7) & theirs & allowed
        right = ((free & _NOT_FILE_H) << 9) & theirs & allowed
        shifts = ((single, -8), (double, -16), (left, -7), (right, -9))
    else:
        single = (free >> 8) & empty
        double = ((single & chess.BB_RANK_6) >> 8) & empty & allowed
        single &= allowed
        left = ((free & _NOT_FILE_A) >> 9) & theirs & allowed
        right = ((free & _NOT_FILE_H) >> 7) & theirs & allowed
        shifts = ((single, 8), (double, 16), (left, 9), (right, 7))
    for targets, delta in shifts:
        while targets:
            to = targets.bit_length() - 1
            targets ^= 1 << to
            key = (to + delta) * 64 + to
            if (1 << to) & _BACK_RANKS:
                moves.extend(_PROMOTIONS[key])
            else:
                append(_MOVES[key])
    pinned_pawns = pawns & pinned
    if pinned_pawns:
        forward = 8 if us == chess.WHITE else -8
        start_rank = chess.BB_RANK_2 if us == chess.WHITE else chess.BB_RANK_7
        while pinned_pawns:
            start = pinned_pawns.bit_length() - 1
            pinned_pawns ^= 1 << start
            targets = _PAWN[us][start] & theirs
            one = start + forward
            if (1 << one) & empty:
                targets |= 1 << one
                two = one + forward
                if (1 << start) & start_rank and (1 << two) & empty:
                    targets |= 1 << two
            targets &= allowed & rays[start]
            base = start * 64
            while targets:
                to = targets.bit_length() - 1
                targets ^= 1 << to
                if (1 << to) & _BACK_RANKS:
                    moves.extend(_PROMOTIONS[base + to])
                else:
                    append(_MOVES[base + to])
    if board.ep_square is not None:
        moves.extend(move for move in board.generate_pseudo_legal_ep() if board.is_legal(move))

    if not checkers:
        rights = board.clean_castling_rights() & ours
        if rights:
            back = chess.BB_RANK_1 if us == chess.WHITE else chess.BB_RANK_8
            rank = 0 if us == chess.WHITE else 56
            # Kingside: f and g empty and not attacked; queenside: b, c, d empty, c and d not attacked.
            if rights & chess.BB_FILE_H & back:
                path = (1 << (rank + 5)) | (1 << (rank + 6))
                if not path & occupied and not path & enemy:
                    append(_MOVES[(rank + 4) * 64 + rank + 6])
            if rights & chess.BB_FILE_A & back:
                empty_path = (1 << (rank + 1)) | (1 << (rank + 2)) | (1 << (rank + 3))
                safe_path = (1 << (rank + 2)) | (1 << (rank + 3))
                if not empty_path & occupied and not safe_path & enemy:
                    append(_MOVES[(rank + 4) * 64 + rank + 2])
    return moves


def mating_move_index(board: chess.Board, moves: list[chess.Move]) -> int | None:
    """Index in ``moves`` (``board``'s legal moves) of the first move that checkmates, else None.

    A cheap filter first: a move can give check only when the piece arriving attacks the enemy king
    from its new square, when it leaves a line between the enemy king and one of the mover's sliders
    (a discovered check), or when it castles or captures en passant. Only those moves are played and
    tested with python-chess (check, and no legal reply), so the answer is exact.
    """
    us = board.turn
    king_bb = board.kings & board.occupied_co[not us]
    if not king_bb or king_bb & (king_bb - 1) or board.chess960:
        for index, move in enumerate(moves):
            board.push(move)
            mate = board.is_checkmate()
            board.pop()
            if mate:
                return index
        return None
    king = king_bb.bit_length() - 1
    ours = board.occupied_co[us]
    occupied = board.occupied
    # Our pieces that alone stand between the enemy king and one of our sliders aimed at it.
    discoverers = _lone_blockers(board, king, ours, ours)
    pawn_checks = _PAWN[not us][king]  # squares from which a pawn of ours attacks the king
    knight_checks = _KNIGHT[king]
    pawns, knights, kings = board.pawns, board.knights, board.kings
    diagonal, straight = board.bishops | board.queens, board.rooks | board.queens
    ep_square = board.ep_square
    for index, move in enumerate(moves):
        start, to = move.from_square, move.to_square
        start_bit, to_bit = 1 << start, 1 << to
        candidate = bool(start_bit & discoverers)
        if not candidate:
            piece = move.promotion
            if piece is None:
                piece = (chess.PAWN if start_bit & pawns else chess.KNIGHT if start_bit & knights
                         else chess.KING if start_bit & kings else 0)
                if not piece:
                    piece = (chess.QUEEN if start_bit & diagonal and start_bit & straight
                             else chess.BISHOP if start_bit & diagonal else chess.ROOK)
            if piece == chess.PAWN:
                candidate = bool(to_bit & pawn_checks) or to == ep_square
            elif piece == chess.KNIGHT:
                candidate = bool(to_bit & knight_checks)
            elif piece == chess.KING:
                candidate = abs(to - start) == 2 and start_bit & _BACK_RANKS != 0  # castling: the rook may check
            else:
                after = (occupied & ~start_bit) | to_bit
                if piece != chess.ROOK:
                    candidate = bool(_DIAG[to][_DIAG_MASKS[to] & after] & king_bb)
                if not candidate and piece != chess.BISHOP:
                    candidate = bool((_RANK[to][_RANK_MASKS[to] & after] | _FILE[to][_FILE_MASKS[to] & after])
                                     & king_bb)
        if candidate:
            board.push(move)
            mate = board.is_check() and not any(board.generate_legal_moves())
            board.pop()
            if mate:
                return index
    return None
