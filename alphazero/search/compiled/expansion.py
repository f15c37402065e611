"""Expansion in the compiled search: a node reached for the first time, and the network's answer for it.

Owns the rules a new node meets (``reach``: checkmate, stalemate, insufficient material, fifty moves,
threefold repetition over the game, a repetition inside the tree as a draw, a mover who can mate in
one as a win; else its legal moves in ``alphazero.board.movegen``'s order become edges and its planes
are encoded), the roots made ready for one network call (``collect_roots``), and the answer turned
into priors and backed up (``expand_leaves``: ``softmax_over`` as ``masked_softmax`` computes it,
``sort_by_prior``). The tree layout is ``tree``'s; knows nothing of selection, networks, torch or Ray.

Arrays besides ``tree``'s
======================== ===================== ===============================================================
``rows``                 [R, 24, 8] uint64     the round's leaves' planes (``uint8 [R, 24, 8, 8]``,
                                               ``alphazero.board.encoding``'s table) a rank (8 bytes,
                                               little-endian) at a time: ``encode_kernel.plane_rows``
``request_slots/_nodes`` [R] int64             the slot and node of each leaf written to ``rows``
``logits``, ``values``   [R, 4672], [R] float32 the network's answer for those leaves (values for the
                                               leaf's mover)
``moves``, ``scratch``   [MAX_MOVES]           int32 moves and float64 exponentials: scratch space
======================== ===================== ===============================================================
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphazero.board import kernel as K
from alphazero.board.bits import lsb
from alphazero.board.encode_kernel import encode_rows, move_action
from alphazero.board.kernel import (
    KING_ATTACKS,
    KNIGHT_ATTACKS,
    MAX_MOVES,
    NO_SQUARE,
    PAWN_ATTACKS,
    ST_EP,
    ST_HALFMOVE,
    ST_PLY,
    ST_SIDE,
    U_EP,
    Z_EP,
    bishop_attacks,
    bit,
    generate_moves,
    in_check,
    insufficient_material,
    is_attacked,
    make_move,
    repetitions,
    rook_attacks,
    unmake_move,
)
from alphazero.board.move_order import ordered_moves
from alphazero.search.compiled.sums import pairwise_sum
from alphazero.search.compiled.tree import (
    EF_PRIOR,
    EF_SEL_PRIOR,
    EF_VALUE,
    EI_ACTION,
    EI_CHILD,
    EI_KEPT,
    EI_MOVE,
    EI_ORDER,
    EI_VISITS,
    EXPANDED,
    FRESH,
    NF_RAW,
    NF_TERMINAL,
    NF_VALUE_SUM,
    NI_CURSOR,
    NI_EDGE_START,
    NI_NUM_EDGES,
    NI_NUM_TRIED,
    NI_STATE,
    NI_VISITS,
    NI_WIN,
    P_VIRTUAL_LOSS,
    PENDING,
    T_NUM_EDGES,
    TERMINAL,
    backup,
)


@njit(cache=True, inline="always")
def _tree_key(keys, undo, st, ply, current):
    """The position key at ``ply`` without its en-passant part (``mcts.position_key`` ignores it)."""
    key = keys[ply]
    ep = st[ST_EP] if current else undo[ply, U_EP]
    if ep != NO_SQUARE:
        key ^= Z_EP[ep & 7]
    return key


@njit(cache=True, inline="always")
def may_give_check(sq, st, move, us, king, diagonal, straight):
    """False only where ``move`` (legal, ``us`` to move) cannot check the enemy king on ``king``;
    ``diagonal``/``straight`` are the squares a bishop/rook on ``king`` sees before the move. A check is
    the moved (or promoted) piece seeing the king from its destination, or a slider uncovered behind
    the square it left: that square is then the first piece on one of the king's lines (so a
    destination that the vacated square hid is covered too). En passant (a second vacated square)
    and castling (the rook) are always played."""
    start = move & 63
    end = (move >> 6) & 63
    if (bit(start) & (diagonal | straight)) or end == st[ST_EP]:
        return True
    kind = move >> 12
    if kind == 0:
        kind = sq[start] - 6 * us
    target = bit(end)
    if kind == K.PAWN:
        return (PAWN_ATTACKS[1 - us, king] & target) != 0
    if kind == K.KNIGHT:
        return (KNIGHT_ATTACKS[king] & target) != 0
    if kind == K.BISHOP:
        return (diagonal & target) != 0
    if kind == K.ROOK:
        return (straight & target) != 0
    if kind == K.QUEEN:
        return ((diagonal | straight) & target) != 0
    return abs(end - start) == 2  # the king: only castling's rook can check


@njit(cache=True, inline="always")
def king_can_step(bb, st):
    """Whether the side to move's king has a square to step to that no enemy piece attacks (the king's
    square counted empty, so a slider's ray through it is seen): then a check is not mate, without
    generating the replies."""
    side = st[ST_SIDE]
    king = lsb(bb[6 * side + K.KING])
    without_king = (bb[K.OCC_WHITE] | bb[K.OCC_BLACK]) ^ bit(king)
    targets = KING_ATTACKS[king] & ~bb[K.OCC_WHITE + side]
    while targets:
        target = lsb(targets)
        targets &= targets - np.uint64(1)
        if not is_attacked(bb, target, 1 - side, without_king):
            return True
    return False


@njit(cache=True)
def mating_move(bb, sq, st, keys, undo, moves, count):
    """Index in ``moves[:count]`` (the legal moves) of the first that checkmates, else -1
    (``movegen.mating_move_index``). Only a move that may give check is played (``may_give_check``: most
    moves are passed over without make/unmake), and only a check whose king cannot step aside
    (``king_can_step``) has its replies generated."""
    us = st[ST_SIDE]
    king = lsb(bb[6 * (1 - us) + K.KING])
    occupied = bb[K.OCC_WHITE] | bb[K.OCC_BLACK]
    diagonal = bishop_attacks(king, occupied)
    straight = rook_attacks(king, occupied)
    replies = np.empty(0, np.int32)
    for k in range(count):
        if not may_give_check(sq, st, moves[k], us, king, diagonal, straight):
            continue
        make_move(bb, sq, st, keys, undo, moves[k])
        mate = False
        if in_check(bb, st) and not king_can_step(bb, st):
            if len(replies) == 0:
                replies = np.empty(MAX_MOVES, np.int32)
            mate = generate_moves(bb, sq, st, replies, False) == 0
        unmake_move(bb, sq, st, undo)
        if mate:
            return k
    return -1


@njit(cache=True)
def reach(nodes_i, nodes_f, edges_i, edges_f, trees, g, node, depth, twofold, mate_in_one, bb, sq, st, keys, undo,
          moves, rows):
    """First arrival at a fresh node of slot ``g``, its board (the slot's kernel arrays) standing there:
    its terminal status, else its legal moves as edges and its planes in ``rows`` (uint64 [24, 8]).
    With ``mate_in_one`` a node below the root whose mover can mate is a win (terminal, +1) and the
    root (``depth`` 0) keeps its mating move in ``NI_WIN``. Returns True when the node now waits for
    the network."""
    count = ordered_moves(bb, sq, st, moves)
    halfmove = st[ST_HALFMOVE]
    terminal = True
    value = 0.0
    if count == 0:
        if in_check(bb, st):
            value = -1.0
    elif insufficient_material(bb):
        pass
    elif halfmove >= 100:
        pass
    elif halfmove >= 8 and repetitions(st, keys) >= 2:
        pass
    else:
        terminal = False
        if twofold:
            ply = st[ST_PLY]
            key = _tree_key(keys, undo, st, ply, True)
            for distance in range(4, min(depth, halfmove) + 1, 2):
                if _tree_key(keys, undo, st, ply - distance, False) == key:
                    terminal = True
                    break
    win = -1
    if not terminal and mate_in_one:
        win = mating_move(bb, sq, st, keys, undo, moves, count)
        if win >= 0 and depth > 0:
            terminal = True
            value = 1.0
    if terminal:
        nodes_i[g, node, NI_STATE] = TERMINAL
        nodes_f[g, node, NF_TERMINAL] = value
        return False
    nodes_i[g, node, NI_WIN] = win
    start = trees[g, T_NUM_EDGES]
    trees[g, T_NUM_EDGES] = start + count
    flip = 56 if st[ST_SIDE] == K.BLACK else 0
    for k in range(count):
        edge = start + k
        edges_i[g, edge, EI_MOVE] = moves[k]
        edges_i[g, edge, EI_ACTION] = move_action(moves[k], flip)
        edges_i[g, edge, EI_CHILD] = -1
        edges_i[g, edge, EI_KEPT] = -1
        edges_i[g, edge, EI_VISITS] = 0
        edges_f[g, edge, EF_VALUE] = 0.0
    nodes_i[g, node, NI_EDGE_START] = start
    nodes_i[g, node, NI_NUM_EDGES] = count
    nodes_i[g, node, NI_STATE] = PENDING
    encode_rows(bb, sq, st, moves, count, rows)
    return True


@njit(cache=True)
def collect_roots(slots, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo, planes, request_slots,
                  request_nodes, request_rows, moves, mate_in_one):
    """Every root not expanded yet, reset and encoded for one network call (``MCTS._expand_roots``).

    Returns ``(requests, finished)``: ``finished`` is the index in ``slots`` of a game that is over
    (the driver raises), -1 if none.
    """
    requests = 0
    for j in range(len(slots)):
        g = slots[j]
        if nodes_i[g, 0, NI_STATE] == EXPANDED:
            continue
        # A reused node may have been a draw by repetition inside the old tree; as a root it is not.
        nodes_i[g, 0, NI_STATE] = FRESH
        nodes_i[g, 0, NI_VISITS] = 0
        nodes_f[g, 0, NF_VALUE_SUM] = 0.0
        if not reach(nodes_i, nodes_f, edges_i, edges_f, trees, g, 0, 0, False, mate_in_one, bb[g], sq[g], st[g], keys[g],
                     undo[g], moves, planes[requests]):
            return requests, j
        request_slots[requests] = g
        request_nodes[requests] = 0
        request_rows[requests] = requests
        requests += 1
    return requests, -1


@njit(cache=True)
def softmax_over(logits_row, edges_i, edges_f, g, start, count, scratch):
    """Priors over a node's legal moves from its row of logits, as ``masked_softmax`` computes them:
    float64 max-shifted exponentials, summed as ``np.add.reduceat`` sums (first element, then the
    pairwise sum of the rest), divided and rounded to float32. Written to ``EF_PRIOR``/``EF_SEL_PRIOR``."""
    top = -np.inf
    for k in range(count):
        x = np.float64(logits_row[edges_i[g, start + k, EI_ACTION]])
        scratch[k] = x
        if x > top:
            top = x
    for k in range(count):
        scratch[k] = np.exp(scratch[k] - top)
    total = scratch[0]
    if count > 1:
        total += pairwise_sum(scratch, 1, count - 1)
    if not total > 0:
        total = 1.0
    for k in range(count):
        prior = np.float64(np.float32(scratch[k] / total))
        edges_f[g, start + k, EF_PRIOR] = prior
        edges_f[g, start + k, EF_SEL_PRIOR] = prior


@njit(cache=True)
def sort_by_prior(edges_i, edges_f, g, start, count):
    """``EI_ORDER``: local move indices by descending ``EF_SEL_PRIOR``, ties in move order
    (``np.argsort(-priors, kind="stable")``)."""
    for k in range(count):
        prior = edges_f[g, start + k, EF_SEL_PRIOR]
        j = k
        while j > 0 and edges_f[g, start + edges_i[g, start + j - 1, EI_ORDER], EF_SEL_PRIOR] < prior:
            edges_i[g, start + j, EI_ORDER] = edges_i[g, start + j - 1, EI_ORDER]
            j -= 1
        edges_i[g, start + j, EI_ORDER] = k


@njit(cache=True)
def expand_leaves(count, request_slots, request_nodes, request_rows, logits, values, params, nodes_i, nodes_f, edges_i,
                  edges_f, scratch):
    """The answers for a round's ``count`` leaves, in the order collected: the network's (row
    ``request_rows[r]`` of ``logits`` and ``values``) gives priors over the leaf's moves, then the backup of
    its value; a kept leaf (row -1: ``tree``'s "Kept evaluations") backs up the value it kept."""
    virtual_loss = params[P_VIRTUAL_LOSS]
    for j in range(count):
        g = request_slots[j]
        leaf = request_nodes[j]
        r = request_rows[j]
        if r < 0:
            nodes_i[g, leaf, NI_STATE] = EXPANDED
            backup(nodes_i, nodes_f, edges_f, g, leaf, nodes_f[g, leaf, NF_RAW], virtual_loss)
            continue
        start = nodes_i[g, leaf, NI_EDGE_START]
        moves = nodes_i[g, leaf, NI_NUM_EDGES]
        softmax_over(logits[r], edges_i, edges_f, g, start, moves, scratch)  # children, visits, W: set by reach
        sort_by_prior(edges_i, edges_f, g, start, moves)
        nodes_i[g, leaf, NI_NUM_TRIED] = 0
        nodes_i[g, leaf, NI_CURSOR] = 0
        nodes_i[g, leaf, NI_STATE] = EXPANDED
        value = np.float64(values[r])
        nodes_f[g, leaf, NF_RAW] = value
        backup(nodes_i, nodes_f, edges_f, g, leaf, value, virtual_loss)
