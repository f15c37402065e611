"""The compiled search's trees: one array tree per game slot, batched (mctx's ``Tree``), and the games
that own them.

Owns the layout below (every compiled function of ``alphazero.search.compiled`` reads it through
these names), the compiled functions that make, back up, move and read a tree without any search
rule (``new_node``, ``clear_tree``, ``backup``, ``advance_tree``, ``load_slot``, ``principal_line``), ``Forest`` (the
arrays of every slot, grown by doubling) and ``CompiledGameTree``, the game a user holds. Knows the
position only as ``alphazero.board.kernel``'s arrays; knows nothing of selection, networks, torch or Ray.

Layout (``B`` game slots, ``N`` node and ``E`` edge capacity per slot, grown by doubling)
============ ===================== ===================================================================
array        shape, dtype          content
============ ===================== ===================================================================
``nodes_i``  [B, N, 9] int32       ``NI_EDGE_START`` (first edge, -1 before expansion), ``NI_NUM_EDGES``
                                   (legal moves K), ``NI_VISITS`` N(s) (virtual visits included),
                                   ``NI_STATE`` (``FRESH``, ``PENDING`` waiting for the network,
                                   ``EXPANDED``, ``TERMINAL``), ``NI_PARENT`` / ``NI_PARENT_EDGE`` (-1
                                   at the root, always node 0), ``NI_NUM_TRIED``, ``NI_CURSOR``
                                   (position in the prior order before which every move was tried),
                                   ``NI_WIN`` (a root's mating move, local, -1 if none: ``mate_in_one``)
``nodes_f``  [B, N, 3] float64     ``NF_VALUE_SUM`` (for the node's mover), ``NF_TERMINAL`` (the true
                                   result for the mover), ``NF_RAW`` (the network's value)
``edges_i``  [B, E, 7] int32       ``EI_MOVE`` (kernel int), ``EI_ACTION`` (policy index),
                                   ``EI_CHILD`` (node, -1 until first tried), ``EI_VISITS`` N(s, a),
                                   ``EI_ORDER`` (the node's j-th move by descending selection prior,
                                   a local index), ``EI_TRIED`` (its j-th tried move, local),
                                   ``EI_KEPT`` (a node of an earlier search kept for this move, -1 if
                                   none: it becomes the child when the move is first tried; below)
``edges_f``  [B, E, 3] float64     ``EF_VALUE`` W(s, a) for the node's mover (virtual loss included),
                                   ``EF_PRIOR`` (the network's, a float32 value), ``EF_SEL_PRIOR``
                                   (what selection uses: the root's noisy priors)
``trees``    [B, 3] int64          ``T_NUM_NODES``, ``T_NUM_EDGES`` in use, ``T_ROOT_PLY`` (the
                                   kernel's ``ST_PLY`` at the root)
``bb`` ...   [B, ...]              each slot's kernel position (``bb`` [14], ``sq`` [64], ``st`` [6],
                                   ``keys`` [H], ``undo`` [H, 5]: the kernel's layout), at the root
                                   between calls; selection descends with make/unmake
``params``   [10] float64          the search's settings for compiled code: ``P_C_PUCT``, ``P_C_BASE``,
                                   ``P_FPU``, ``P_VIRTUAL_LOSS``, ``P_TWOFOLD`` and ``P_MATE_IN_ONE``
                                   (1.0 or 0.0), ``P_LEAVES_PER_GAME``; ``P_GUMBEL`` (1.0: Gumbel
                                   selection, 0.0: PUCT), ``P_C_VISIT`` and ``P_C_SCALE`` (Gumbel's
                                   ``sigma(q) = (c_visit + max N) * c_scale * q``)
============ ===================== ===================================================================

Gumbel reads the same arrays: its completed Q needs per edge only N(s, a), W(s, a) and the prior
(``EF_PRIOR``; ``log P`` stands for the logits, as in ``mcts``, so no logit is kept) and per node the
network's value (``NF_RAW``, the mixed value's ``v``). What only the root of one search needs (its
Gumbel draw, ``log P``, the halving schedule) lives outside the tree, in ``gumbel``'s arrays.

Kept evaluations (Gumbel with ``reuse_tree``): sequential halving needs a root without visits, so a
Gumbel search starts its statistics afresh, yet the subtree of the move played holds network
evaluations the new search would ask for again (13% of its network positions in the tests' games at 32
simulations: the played move gets about 4 of them).
``keep_evaluations`` zeroes every visit and value of the kept tree and moves each child pointer to
``EI_KEPT``; when a search first tries that move, the kept node becomes the child again (its priors,
edges and ``NF_RAW`` intact, no visits, no children), and a simulation arriving at such a node backs up
its ``NF_RAW`` instead of asking the network (``selection.SELECT_KEPT``), in its turn when the round's
network call is answered, as a network leaf would (so virtual losses are the same too). The search is
the one it would have been without the kept tree, simulation for simulation (draws by repetition,
which depend on the root, are judged again), with fewer positions sent to the network.

A node's edges are the range ``[NI_EDGE_START, + NI_NUM_EDGES)`` of its slot's edge arrays, written
when the node is first reached (its legal moves and their actions) and filled in when the network
answers. Values are for the side to move at the node and change sign at each step up, as in ``mcts``.

Memory: the capacities are common to all slots (48 bytes an edge, ~35 edges a node), so one search
object should hold games of similar size; one long search (UCI) takes one slot.

``CompiledGameTree`` has ``GameTree``'s interface for its users (``board``, ``rng``, ``advance``;
``root_priors`` and ``principal_variation()`` for tools) but no ``root`` of Python ``Node``s: the
tree lives in a slot of its search's ``Forest``, taken at its first search (``attach``), given back
when the tree object is collected, and reloaded from ``board`` whenever the board moved on other than
by ``advance``.
"""

from __future__ import annotations

import weakref
from typing import Any

import chess
import numpy as np
from numba import njit

from alphazero.board import kernel as K
from alphazero.board.bits import lsb
from alphazero.board.kernel import HISTORY, NO_SQUARE, ST_EP, ST_HALFMOVE, ST_PLY, ST_SIDE, make_move
from alphazero.board.position import SEARCH_RESERVE, castling_bits, move_from_chess, replayed_start, why_unsupported

NI_EDGE_START, NI_NUM_EDGES, NI_VISITS, NI_STATE, NI_PARENT, NI_PARENT_EDGE, NI_NUM_TRIED, NI_CURSOR, NI_WIN = range(9)
NODE_I = 9
NF_VALUE_SUM, NF_TERMINAL, NF_RAW = range(3)
NODE_F = 3
EI_MOVE, EI_ACTION, EI_CHILD, EI_VISITS, EI_ORDER, EI_TRIED, EI_KEPT = range(7)
EDGE_I = 7
EF_VALUE, EF_PRIOR, EF_SEL_PRIOR = range(3)
EDGE_F = 3
T_NUM_NODES, T_NUM_EDGES, T_ROOT_PLY = range(3)
TREE_SIZE = 3
FRESH, PENDING, EXPANDED, TERMINAL = 0, 1, 2, 3
# ``params``: the search's settings, handed to the compiled functions as one float64 array.
P_C_PUCT, P_C_BASE, P_FPU, P_VIRTUAL_LOSS, P_TWOFOLD, P_LEAVES_PER_GAME, P_MATE_IN_ONE, P_GUMBEL, P_C_VISIT, P_C_SCALE = range(10)
NUM_PARAMS = 10


# ----------------------------------------------------------------------------------------------
# Compiled: trees without search rules

@njit(cache=True)
def new_node(nodes_i, nodes_f, trees, g, parent, parent_edge):
    """A fresh node (no edges, no visits) at the end of slot ``g``'s nodes, below ``parent`` by ``parent_edge``."""
    node = trees[g, T_NUM_NODES]
    trees[g, T_NUM_NODES] = node + 1
    nodes_i[g, node, NI_EDGE_START] = -1
    nodes_i[g, node, NI_NUM_EDGES] = 0
    nodes_i[g, node, NI_VISITS] = 0
    nodes_i[g, node, NI_STATE] = FRESH
    nodes_i[g, node, NI_PARENT] = parent
    nodes_i[g, node, NI_PARENT_EDGE] = parent_edge
    nodes_i[g, node, NI_NUM_TRIED] = 0
    nodes_i[g, node, NI_CURSOR] = 0
    nodes_i[g, node, NI_WIN] = -1
    nodes_f[g, node, NF_VALUE_SUM] = 0.0
    nodes_f[g, node, NF_TERMINAL] = 0.0
    nodes_f[g, node, NF_RAW] = 0.0
    return node


@njit(cache=True)
def clear_tree(nodes_i, nodes_f, trees, g):
    """Drop slot ``g``'s tree: an empty tree of one fresh root (the board stays where it is)."""
    trees[g, T_NUM_NODES] = 0
    trees[g, T_NUM_EDGES] = 0
    new_node(nodes_i, nodes_f, trees, g, -1, -1)


@njit(cache=True)
def keep_evaluations(nodes_i, nodes_f, edges_i, edges_f, trees, g):
    """Slot ``g``'s tree as a fresh search would find it, with its network evaluations kept (module
    docstring, "Kept evaluations"): no visits or values, every child moved to ``EI_KEPT``, a draw judged
    again (it may have been a repetition inside the old tree), an expanded root as its expansion left it
    (one visit of its network value)."""
    for node in range(trees[g, T_NUM_NODES]):
        state = nodes_i[g, node, NI_STATE]
        if state == PENDING or (state == TERMINAL and nodes_f[g, node, NF_TERMINAL] == 0.0):
            nodes_i[g, node, NI_STATE] = FRESH
            nodes_i[g, node, NI_EDGE_START] = -1
            nodes_i[g, node, NI_NUM_EDGES] = 0
        nodes_i[g, node, NI_VISITS] = 0
        nodes_i[g, node, NI_NUM_TRIED] = 0
        nodes_i[g, node, NI_CURSOR] = 0
        nodes_f[g, node, NF_VALUE_SUM] = 0.0
        start = nodes_i[g, node, NI_EDGE_START]
        if start < 0:
            continue
        for k in range(nodes_i[g, node, NI_NUM_EDGES]):
            edge = start + k
            if edges_i[g, edge, EI_CHILD] >= 0:
                edges_i[g, edge, EI_KEPT] = edges_i[g, edge, EI_CHILD]
                edges_i[g, edge, EI_CHILD] = -1
            edges_i[g, edge, EI_VISITS] = 0
            edges_f[g, edge, EF_VALUE] = 0.0
    if nodes_i[g, 0, NI_STATE] == EXPANDED:
        nodes_i[g, 0, NI_VISITS] = 1
        nodes_f[g, 0, NF_VALUE_SUM] = nodes_f[g, 0, NF_RAW]


@njit(cache=True)
def backup(nodes_i, nodes_f, edges_f, g, leaf, value, virtual_loss):
    """Add ``value`` (for the leaf's mover) to the leaf and, negated at each step, to its ancestors
    (``MCTS._backup``; interior visits were counted on the way down)."""
    nodes_i[g, leaf, NI_VISITS] += 1
    nodes_f[g, leaf, NF_VALUE_SUM] += value
    node = leaf
    while True:
        parent = nodes_i[g, node, NI_PARENT]
        if parent < 0:
            return
        edge = nodes_i[g, node, NI_PARENT_EDGE]
        value = -value
        edges_f[g, edge, EF_VALUE] += virtual_loss + value
        nodes_f[g, parent, NF_VALUE_SUM] += value
        node = parent


@njit(cache=True)
def advance_tree(g, move, reuse, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo,
                 scratch_nodes_i, scratch_nodes_f, scratch_edges_i, scratch_edges_f, queue):
    """Play ``move`` (legal) on slot ``g``'s board; keep its subtree as the new tree when ``reuse``
    (copied breadth first to the front of the slot's arrays), else start an empty tree."""
    child = -1
    if reuse and nodes_i[g, 0, NI_STATE] == EXPANDED:
        start = nodes_i[g, 0, NI_EDGE_START]
        for k in range(nodes_i[g, 0, NI_NUM_EDGES]):
            if edges_i[g, start + k, EI_MOVE] == move:
                child = max(edges_i[g, start + k, EI_CHILD], edges_i[g, start + k, EI_KEPT])
                break
    make_move(bb[g], sq[g], st[g], keys[g], undo[g], move)
    trees[g, T_ROOT_PLY] = st[g, ST_PLY]
    if child < 0:
        clear_tree(nodes_i, nodes_f, trees, g)
        return
    # Breadth first: new node ids in discovery order, each node's edges copied as one range (the
    # local indices in EI_ORDER / EI_TRIED stay valid). Element by element: a slice is a view with a
    # reference count, dearer than the copy itself.
    queue[0] = child
    num_nodes = 1
    num_edges = 0
    head = 0
    while head < num_nodes:
        old = queue[head]
        new = head
        head += 1
        for f in range(NODE_I):
            scratch_nodes_i[new, f] = nodes_i[g, old, f]
        for f in range(NODE_F):
            scratch_nodes_f[new, f] = nodes_f[g, old, f]
        old_start = nodes_i[g, old, NI_EDGE_START]
        if old_start < 0:
            continue
        count = nodes_i[g, old, NI_NUM_EDGES]
        scratch_nodes_i[new, NI_EDGE_START] = num_edges
        for k in range(count):
            edge = num_edges + k
            for f in range(EDGE_I):
                scratch_edges_i[edge, f] = edges_i[g, old_start + k, f]
            for f in range(EDGE_F):
                scratch_edges_f[edge, f] = edges_f[g, old_start + k, f]
            for field in (EI_CHILD, EI_KEPT):  # at most one of the two is set
                grandchild = scratch_edges_i[edge, field]
                if grandchild >= 0:
                    queue[num_nodes] = grandchild
                    scratch_edges_i[edge, field] = num_nodes
                    num_nodes += 1
        num_edges += count
    # Parents: the root has none; every other node's parent is the node whose edge points at it.
    scratch_nodes_i[0, NI_PARENT] = -1
    scratch_nodes_i[0, NI_PARENT_EDGE] = -1
    for node in range(num_nodes):
        start = scratch_nodes_i[node, NI_EDGE_START]
        if start < 0:
            continue
        for k in range(scratch_nodes_i[node, NI_NUM_EDGES]):
            kid = max(scratch_edges_i[start + k, EI_CHILD], scratch_edges_i[start + k, EI_KEPT])
            if kid >= 0:
                scratch_nodes_i[kid, NI_PARENT] = node
                scratch_nodes_i[kid, NI_PARENT_EDGE] = start + k
    for node in range(num_nodes):
        for f in range(NODE_I):
            nodes_i[g, node, f] = scratch_nodes_i[node, f]
        for f in range(NODE_F):
            nodes_f[g, node, f] = scratch_nodes_f[node, f]
    for edge in range(num_edges):
        for f in range(EDGE_I):
            edges_i[g, edge, f] = scratch_edges_i[edge, f]
        for f in range(EDGE_F):
            edges_f[g, edge, f] = scratch_edges_f[edge, f]
    trees[g, T_NUM_NODES] = num_nodes
    trees[g, T_NUM_EDGES] = num_edges


@njit(cache=True)
def load_slot(g, pieces, side, castling, ep, halfmove_start, fullmove, moves, halfmove, bb, sq, st, keys, undo,
              trees, nodes_i, nodes_f):
    """Set slot ``g`` to a position (``pieces`` uint64 [12] by piece code, the ``st`` scalars) followed by
    ``moves`` (int32, ``NO_MOVE`` a pass), as ``Position.from_board`` does, with an empty tree."""
    bb[g, :] = 0
    sq[g, :] = K.EMPTY
    for code in range(12):
        bits = pieces[code]
        bb[g, code] = bits
        bb[g, K.OCC_WHITE + code // 6] |= bits
        while bits:
            sq[g, lsb(bits)] = code
            bits &= bits - np.uint64(1)
    st[g, ST_SIDE] = side
    st[g, K.ST_CASTLING] = castling
    st[g, ST_EP] = NO_SQUARE
    if ep != NO_SQUARE and K.PAWN_ATTACKS[1 - side, ep] & bb[g, 6 * side + K.PAWN]:
        st[g, ST_EP] = ep  # kept only where a pawn of the side to move stands ready (the kernel's invariant)
    st[g, ST_HALFMOVE] = halfmove_start
    st[g, K.ST_FULLMOVE] = fullmove
    st[g, ST_PLY] = 0
    keys[g, 0] = K.compute_key(bb[g], st[g])
    for move in moves:
        if move == K.NO_MOVE:
            K.make_null(st[g], keys[g], undo[g])
        else:
            make_move(bb[g], sq[g], st[g], keys[g], undo[g], move)
    st[g, ST_HALFMOVE] = halfmove  # a replayed pass zeroed the clock; python-chess does not
    trees[g, T_ROOT_PLY] = st[g, ST_PLY]
    clear_tree(nodes_i, nodes_f, trees, g)


@njit(cache=True)
def principal_line(g, nodes_i, edges_i, out):
    """The most visited line from the root of slot ``g`` (first of equals), as kernel moves; returns its length."""
    node = 0
    length = 0
    while length < len(out) and nodes_i[g, node, NI_STATE] == EXPANDED:
        start = nodes_i[g, node, NI_EDGE_START]
        best = -1
        most = 0
        for k in range(nodes_i[g, node, NI_NUM_EDGES]):
            if edges_i[g, start + k, EI_VISITS] > most:
                most = edges_i[g, start + k, EI_VISITS]
                best = k
        if best < 0:
            break
        out[length] = edges_i[g, start + best, EI_MOVE]
        length += 1
        node = edges_i[g, start + best, EI_CHILD]
        if node < 0:
            break
    return length


# ----------------------------------------------------------------------------------------------
# Python: the arrays and the games

_MOVE_TABLE: list[chess.Move] = []


def move_table() -> list[chess.Move]:
    """``chess.Move`` for every kernel move int (``from | to << 6 | promotion << 12``), built once."""
    if not _MOVE_TABLE:
        for code in range(5 << 12):
            promotion = code >> 12
            _MOVE_TABLE.append(chess.Move(code & 63, (code >> 6) & 63, promotion + 1 if promotion else None))
    return _MOVE_TABLE


class Forest:
    """The arrays of every game slot (layout in the module docstring), grown by doubling."""

    def __init__(self, slots: int = 1, nodes: int = 64, edges: int = 2048) -> None:
        self.num_slots, self.num_nodes, self.num_edges = slots, nodes, edges
        self.nodes_i = np.zeros((slots, nodes, NODE_I), np.int32)
        self.nodes_f = np.zeros((slots, nodes, NODE_F), np.float64)
        self.edges_i = np.zeros((slots, edges, EDGE_I), np.int32)
        self.edges_f = np.zeros((slots, edges, EDGE_F), np.float64)
        self.trees = np.zeros((slots, TREE_SIZE), np.int64)
        self.bb = np.zeros((slots, 14), np.uint64)
        self.sq = np.full((slots, 64), K.EMPTY, np.int8)
        self.st = np.zeros((slots, K.ST_SIZE), np.int64)
        self.keys = np.zeros((slots, HISTORY), np.uint64)
        self.undo = np.zeros((slots, HISTORY, K.U_SIZE), np.int32)
        self.free = list(range(slots - 1, -1, -1))
        self.scratch_nodes_i, self.scratch_nodes_f, self.scratch_edges_i, self.scratch_edges_f, self.queue = self._scratch()

    def _scratch(self) -> tuple[np.ndarray, ...]:
        """One slot's worth of node and edge rows, and a node queue, for the current capacities."""
        return (np.zeros((self.num_nodes, NODE_I), np.int32), np.zeros((self.num_nodes, NODE_F), np.float64),
                np.zeros((self.num_edges, EDGE_I), np.int32), np.zeros((self.num_edges, EDGE_F), np.float64),
                np.zeros(self.num_nodes, np.int64))

    def _grow(self, slots: int, nodes: int, edges: int) -> None:
        def grown(array: np.ndarray, shape: tuple, fill: Any = 0) -> np.ndarray:
            out = np.full(shape, fill, array.dtype)
            out[tuple(slice(0, n) for n in array.shape)] = array
            return out

        old_slots = self.num_slots
        self.nodes_i = grown(self.nodes_i, (slots, nodes, NODE_I))
        self.nodes_f = grown(self.nodes_f, (slots, nodes, NODE_F))
        self.edges_i = grown(self.edges_i, (slots, edges, EDGE_I))
        self.edges_f = grown(self.edges_f, (slots, edges, EDGE_F))
        if slots != old_slots:
            self.trees = grown(self.trees, (slots, TREE_SIZE))
            self.bb = grown(self.bb, (slots, 14))
            self.sq = grown(self.sq, (slots, 64), K.EMPTY)
            self.st = grown(self.st, (slots, K.ST_SIZE))
            self.keys = grown(self.keys, (slots, HISTORY))
            self.undo = grown(self.undo, (slots, HISTORY, K.U_SIZE))
            self.free = list(range(slots - 1, old_slots - 1, -1)) + self.free
        resized = nodes != self.num_nodes or edges != self.num_edges
        self.num_slots, self.num_nodes, self.num_edges = slots, nodes, edges
        if resized:
            self.scratch_nodes_i, self.scratch_nodes_f, self.scratch_edges_i, self.scratch_edges_f, self.queue = self._scratch()

    def reserve(self, nodes: int, edges: int) -> None:
        """At least ``nodes`` nodes and ``edges`` edges per slot."""
        if nodes > self.num_nodes or edges > self.num_edges:
            new_nodes, new_edges = self.num_nodes, self.num_edges
            while new_nodes < nodes:
                new_nodes *= 2
            while new_edges < edges:
                new_edges *= 2
            self._grow(self.num_slots, new_nodes, new_edges)

    def acquire(self) -> int:
        if not self.free:
            self._grow(self.num_slots * 2, self.num_nodes, self.num_edges)
        return self.free.pop()

    def release(self, slot: int) -> None:
        self.free.append(slot)

    def load(self, slot: int, board: chess.Board) -> None:
        """Set slot ``slot`` to ``board`` with an empty tree: its recent moves (since the last capture or
        pawn move) replayed so that repetitions are seen, as ``Position.from_board`` does."""
        reason = why_unsupported(board)
        if reason:  # the kernel cannot hold it: say why
            raise ValueError(f"position {board.fen()!r}: {reason}")
        start, replayed = replayed_start(board)
        moves = np.array([move_from_chess(move) for move in replayed], dtype=np.int32)
        pieces = np.array([start.pieces_mask(kind, colour) for colour in (chess.WHITE, chess.BLACK)
                           for kind in range(1, 7)], dtype=np.uint64)
        castling = castling_bits(start)
        ep = NO_SQUARE if start.ep_square is None else start.ep_square
        load_slot(slot, pieces, K.WHITE if start.turn == chess.WHITE else K.BLACK, castling, ep,
                  start.halfmove_clock, start.fullmove_number, moves, board.halfmove_clock, self.bb, self.sq,
                  self.st, self.keys, self.undo, self.trees, self.nodes_i, self.nodes_f)


class CompiledGameTree:
    """One game being searched by a ``CompiledMCTS`` (``GameTree``'s interface).

    ``board`` is the game (a ``chess.Board`` with its move stack); the tree and the compiled board
    live in a slot of the search's ``Forest``, taken at the first search and given back when this
    object is collected. Each tree draws its noise and samples its moves from its own ``rng``.
    """

    def __init__(self, board: chess.Board | None = None, seed: int | np.random.Generator | None = None) -> None:
        self.board = board.copy() if board is not None else chess.Board()
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self._forest: Forest | None = None
        self._slot = -1
        self._synced: tuple[int, chess.Move | None] = (-1, None)  # the board the slot holds

    def _stamp(self) -> tuple[int, chess.Move | None]:
        stack = self.board.move_stack
        return len(stack), (stack[-1] if stack else None)

    @property
    def slot(self) -> int:
        """The slot of its search's ``Forest`` holding this game (-1 before its first search)."""
        return self._slot

    def attach(self, forest: Forest) -> int:
        """The slot of ``forest`` holding this game (taken at the first call), (re)loaded when the board
        moved on outside ``advance``. A tree is searched by one search, whose forest this is."""
        if self._forest is None:
            self._forest = forest
            self._slot = forest.acquire()
            weakref.finalize(self, forest.release, self._slot)
        elif self._forest is not forest:
            raise ValueError("a CompiledGameTree is searched by one CompiledMCTS only")
        if self._synced != self._stamp():
            forest.load(self._slot, self.board)
            self._synced = self._stamp()
        return self._slot

    def forget(self) -> None:
        """Drop the tree kept in the slot: the next search reloads the slot from ``board`` (after a search
        cut short, whose leaves wait for a network answer that will not come)."""
        self._synced = (-1, None)

    def advance(self, move: chess.Move, reuse: bool = True) -> None:
        """Play ``move`` and keep its subtree as the new root when ``reuse`` (noise is redrawn later)."""
        forest = self._forest
        in_sync = forest is not None and self._synced == self._stamp()
        self.board.push(move)
        if forest is None or not in_sync:
            return
        slot = self._slot
        if forest.st[slot, ST_PLY] >= HISTORY - SEARCH_RESERVE - 1:  # the kernel's history is full: reload
            return
        advance_tree(slot, move_from_chess(move), reuse, forest.nodes_i, forest.nodes_f, forest.edges_i,
                     forest.edges_f, forest.trees, forest.bb, forest.sq, forest.st, forest.keys, forest.undo,
                     forest.scratch_nodes_i, forest.scratch_nodes_f, forest.scratch_edges_i, forest.scratch_edges_f,
                     forest.queue)
        self._synced = self._stamp()

    @property
    def root_priors(self) -> np.ndarray | None:
        """``float32 [K]``: the priors the root's selection uses (with this search's noise), None before a search."""
        forest = self._forest
        if forest is None or self._synced != self._stamp() or forest.nodes_i[self._slot, 0, NI_STATE] != EXPANDED:
            return None
        start = forest.nodes_i[self._slot, 0, NI_EDGE_START]
        count = forest.nodes_i[self._slot, 0, NI_NUM_EDGES]
        return forest.edges_f[self._slot, start:start + count, EF_SEL_PRIOR].astype(np.float32)

    def principal_variation(self, max_length: int = 20) -> list[chess.Move]:
        """The most visited line from the root (``mcts.principal_variation``); empty before a search."""
        if self._forest is None or self._synced != self._stamp():
            return []
        out = np.zeros(max_length, np.int32)
        f = self._forest
        length = principal_line(self._slot, f.nodes_i, f.edges_i, out)
        table = move_table()
        return [table[m] for m in out[:length].tolist()]
