"""The alpha-beta search's switchable techniques: static exchange evaluation, the pruning each
technique does, the answers that must survive it, and how specs and callers switch them."""

import chess
import numpy as np
import pytest

from alphazero.bench.positions import MIDDLEGAMES
from alphazero.board import kernel as K
from alphazero.board.position import Position, move_from_chess
from alphazero.search import alphabeta as A
from alphazero.search.ab_player import parse_ab_spec
from alphazero.search.alphabeta import DEFAULT_TECHNIQUES, TECHNIQUES, AlphaBeta, see, technique_set

ALL_ON = {name: True for name in TECHNIQUES}


@pytest.mark.parametrize("fen,uci,value", [
    # an undefended pawn; the same pawn defended by a pawn (pawn for pawn)
    ("4k3/8/8/3p4/4P3/8/8/4K3 w - - 0 1", "e4d5", 100),
    ("4k3/8/2p5/3p4/4P3/8/8/4K3 w - - 0 1", "e4d5", 0),
    # a queen takes a pawn a pawn defends: 100 - 900
    ("4k3/8/2p5/3p4/8/8/3Q4/4K3 w - - 0 1", "d2d5", 100 - 900),
    # the knight takes a pawn the bishop defends, behind which the queen x-rays (chessprogramming's example)
    ("1k1r3q/1ppn3p/p4b2/4p3/8/P2N2P1/1PP1R1BP/2K1Q3 w - - 0 1", "d3e5", 100 - 320),
    # a rook takes a pawn a rook defends, with the second rook x-raying through the first: +100 net
    ("3r2k1/8/8/3p4/8/8/3R4/3R2K1 w - - 0 1", "d2d5", 100),
    # the same without the second rook: the rook is lost for the pawn
    ("3r2k1/8/8/3p4/8/8/3R4/6K1 w - - 0 1", "d2d5", 100 - 500),
    # en passant takes the pawn beside, not the empty square
    ("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1", "e5d6", 100),
    # a king takes an undefended rook, and recaptures an undefended queen's taker; not a defended one
    ("3k4/8/8/8/8/8/3r4/3QK3 w - - 0 1", "e1d2", 500),
    ("3k4/8/8/8/8/8/3r4/3QK3 b - - 0 1", "d2d1", 900 - 500),
    ("3k4/8/8/8/8/8/3r1n2/3QK3 b - - 0 1", "d2d1", 900),  # the knight on f2 guards d1 from the king
    # a promotion that captures: a rook taken and a pawn turned queen, then the queen lost to the king
    ("1r5k/P7/8/8/8/8/8/6K1 w - - 0 1", "a7b8q", 500 + 900 - 100),
    ("1r6/P1k5/8/8/8/8/8/6K1 w - - 0 1", "a7b8q", 500 + 900 - 100 - 900),
    # a quiet move to a square nobody attacks
    ("4k3/8/8/8/8/8/8/R3K3 w - - 0 1", "a1a5", 0),
])
def test_see_is_the_exchange_hand_computed(fen, uci, value):
    position = Position.from_fen(fen)
    move = chess.Move.from_uci(uci)
    assert move in chess.Board(fen).legal_moves
    assert see(position.bb, position.sq, position.st, move_from_chess(move)) == value


def test_see_ge_answers_as_the_full_exchange_does_at_every_threshold():
    """``see_ge`` (what the search asks) against ``see`` (the swap list) on every capture, en passant
    and promotion of positions from random games and of the hand-computed cases, at thresholds around
    each exchange's value: the same answer every time."""
    import numpy as np

    rng = np.random.default_rng(3)
    fens = list(MIDDLEGAMES) + [
        "1k1r3q/1ppn3p/p4b2/4p3/8/P2N2P1/1PP1R1BP/2K1Q3 w - - 0 1", "3r2k1/8/8/3p4/8/8/3R4/3R2K1 w - - 0 1",
        "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1", "3k4/8/8/8/8/8/3r1n2/3QK3 b - - 0 1", "1r6/P1k5/8/8/8/8/8/6K1 w - - 0 1",
        "3k4/8/8/8/8/8/3r4/3QK3 w - - 0 1", "3k4/8/8/8/8/8/3r4/3QK3 b - - 0 1"]
    for _ in range(300):  # positions from random games, captures taken more often so material thins out
        board = chess.Board()
        for _ in range(int(rng.integers(10, 120))):
            moves = list(board.legal_moves)
            if not moves:
                break
            captures = [m for m in moves if board.is_capture(m)]
            pool = captures if captures and rng.random() < 0.4 else moves
            board.push(pool[int(rng.integers(len(pool)))])
        fens.append(board.fen())
    checked = 0
    for fen in fens:
        board = chess.Board(fen)
        position = Position.from_fen(fen)
        for move in board.legal_moves:
            if not (board.is_capture(move) or move.promotion):
                continue
            code = move_from_chess(move)
            value = int(see(position.bb, position.sq, position.st, code))
            for threshold in {value - 101, value - 1, value, value + 1, value + 99, 0, -1, 1}:
                assert A.see_ge(position.bb, position.sq, position.st, code, threshold) == (value >= threshold), \
                    (fen, move.uci(), value, threshold)
            checked += 1
    assert checked > 250


def test_technique_set_applies_changes_to_the_defaults():
    assert technique_set() == DEFAULT_TECHNIQUES
    assert technique_set({"lmr": False}) == DEFAULT_TECHNIQUES - {"lmr"}
    assert technique_set(ALL_ON) == frozenset(TECHNIQUES)
    with pytest.raises(ValueError, match="unknown search technique 'speed'"):
        technique_set({"speed": True})
    search = AlphaBeta(tt_mb=1, techniques={"nullmove": False, "lmp": True})
    assert search.info[A.I_OPTIONS] == sum(TECHNIQUES[name] for name in (DEFAULT_TECHNIQUES - {"nullmove"}) | {"lmp"})
    assert {"nullmove", "lmr", "checkext"} <= DEFAULT_TECHNIQUES  # the search's long-standing core


def test_spec_switches_techniques():
    from alphazero.judge.players import make_player

    assert parse_ab_spec("ab:material?lmp=1&nullmove=off")["techniques"] == {"lmp": True, "nullmove": False}
    player = make_player("ab:material?depth=2&lmp=1&checkext=0")
    assert player.search.techniques == (DEFAULT_TECHNIQUES | {"lmp"}) - {"checkext"}
    for spec, message in [("ab:material?lmp=2", "lmp='2' must be 1 or 0"),
                          ("ab:material?lmp=1&lmp=0", "lmp is given twice")]:
        with pytest.raises(ValueError, match="player spec") as error:
            make_player(spec)
        assert message in str(error.value)


def _nodes_to_depth(techniques, depth=6):
    search = AlphaBeta(tt_mb=4, techniques=techniques)
    total = 0
    for fen in MIDDLEGAMES:
        search.clear()
        _, info = search.search(chess.Board(fen), depth=depth)
        total += info.nodes
    return total


def test_each_pruning_shrinks_the_tree_and_check_extension_grows_it():
    """Each switch reaches the compiled search: pruning searches fewer nodes to the same depth than
    the search without it, the check extension more (forcing lines are searched deeper)."""
    for name in ("rfp", "futility", "lmp", "qsee"):
        assert _nodes_to_depth({name: True}) < 0.9 * _nodes_to_depth({name: False}), name
    assert _nodes_to_depth({"checkext": False}) < _nodes_to_depth({"checkext": True})
    assert _nodes_to_depth({"seeorder": True}) != _nodes_to_depth({"seeorder": False})  # another order, another tree
    for name in ("iir", "nmpdepth", "qtt"):  # a ply less where no move is known; a deeper null-move cut;
        # quiescence nodes answered by the table
        assert _nodes_to_depth({name: True}) < _nodes_to_depth({name: False}), name
    assert _nodes_to_depth({"histmalus": True}) != _nodes_to_depth({"histmalus": False})  # another order
    assert _nodes_to_depth({"conthist": True}) != _nodes_to_depth({"conthist": False})  # another order
    # singular extensions act from depth 6 below the root: the hash moves found singular are searched deeper
    assert _nodes_to_depth({"singular": False}, depth=8) < _nodes_to_depth({"singular": True}, depth=8)
    # reductions that follow the histories: the moves that never cut (negative, with the malus) searched shallower
    assert _nodes_to_depth({"histlmr": True, "histmalus": True}) < 0.9 * _nodes_to_depth({"histlmr": False, "histmalus": True})
    # "improving" only changes the others: more pruning where the evaluation did not improve
    pruned = {"rfp": True, "lmp": True}
    assert _nodes_to_depth({**pruned, "improving": True}) < _nodes_to_depth({**pruned, "improving": False})


@pytest.mark.parametrize("fen,best,mate", [
    ("6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1", "d1d8", 1),
    ("kbK5/pp6/1P6/8/8/8/8/R7 w - - 0 1", "a1a6", 2),  # Morphy: a quiet first move, then zugzwang
])
def test_forced_wins_survive_every_technique(fen, best, mate):
    """With every technique on, the quiet moves that win are still found: pruning acts only far from
    the window, never on a move that gives check, never on the first move, never near a mate."""
    search = AlphaBeta(tt_mb=4, techniques=ALL_ON)
    move, info = search.search(chess.Board(fen), depth=7)
    assert move.uci() == best
    if mate is not None:
        assert info.mate == mate


def _node(engine, fen, depth, alpha, beta, excluded):
    """``negamax`` at ``fen`` as a node one ply below the root, and the position after it."""
    position = Position.from_fen(fen)
    A.eval_root(engine.info[A.I_EVAL], position.bb, position.sq, position.st, position.keys, engine.params, engine.acc)
    engine.info[A.I_NODE_LIMIT] = 10**9
    engine.info[A.I_STOPPED] = 0
    score = A.negamax(position.bb, position.sq, position.st, position.keys, position.undo, engine.moves, engine.order,
                      engine.tt, engine.killers, engine.history, engine.cont, engine.corr, engine.pv, engine.pv_len,
                      engine.evals, engine.info, engine.params, engine.acc, depth, alpha, beta, 1, excluded)
    return int(score), position


def test_a_search_without_the_hash_move_neither_plays_nor_stores_it():
    """The search ``singular`` makes (``excluded``, the hash move): the node's other moves only, its score
    theirs, nothing stored for the node; with one legal move, excluded, it answers alpha."""
    fen = "4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1"  # Rxd5 wins the queen; anything else loses the exchange
    win = move_from_chess(chess.Move.from_uci("d2d5"))
    engine = AlphaBeta(tt_mb=1)
    without, position = _node(engine, fen, 4, -A.INF, A.INF, win)
    assert without < -300 and engine.pv[1, 1] != win and engine.pv_len[1] > 1
    assert A.tt_probe(engine.tt, position.keys[position.st[K.ST_PLY]]) < 0  # nothing stored for this node
    assert position.fen() == fen
    engine.clear()
    full, position = _node(engine, fen, 4, -A.INF, A.INF, A.NO_MOVE)
    assert full > 300 and engine.pv[1, 1] == win
    assert A.tt_probe(engine.tt, position.keys[position.st[K.ST_PLY]]) >= 0
    only = "7k/4Q3/8/8/8/8/8/6K1 b - - 0 1"
    (alone,) = chess.Board(only).legal_moves
    assert _node(engine, only, 4, -77, -76, move_from_chess(alone))[0] == -77


def test_probcut_cuts_on_a_capture_far_above_beta_and_stores_a_shallower_bound():
    """``probcut`` at a non-PV node of depth 6: Rxd5 (a free queen) beats beta by more than the margin in
    quiescence and at depth 1, so the node stops there with a lower bound stored three plies shallower,
    the capture its move; without it, or where even the capture's exchange cannot reach beta + margin, the
    node is searched in full and stored at its own depth."""
    fen = "4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1"  # White to move, a queen down, Rxd5 wins it back
    take = move_from_chess(chess.Move.from_uci("d2d5"))
    quiet = {"nullmove": False, "rfp": False, "futility": False}  # nothing else cuts this node early
    entries = {}
    for on, beta in ((True, 0), (False, 0), (True, 800)):
        engine = AlphaBeta(tt_mb=1, techniques={**quiet, "probcut": on})
        score, position = _node(engine, fen, 6, beta - 1, beta, A.NO_MOVE)
        row = A.tt_probe(engine.tt, position.keys[position.st[K.ST_PLY]])
        data = engine.tt[row, 1]
        entries[on, beta] = (score, int(A.tt_depth(data)), int(A.tt_bound(data)), int(A.tt_move(data)),
                             int(engine.info[A.I_NODES]))
    score, depth, bound, move, nodes = entries[True, 0]
    assert score >= A.PROBCUT_MARGIN and bound == A.BOUND_LOWER and move == take
    assert depth == 6 - A.PROBCUT_REDUCTION + 1
    full = entries[False, 0]
    assert full[0] >= 0 and full[1] == 6 and full[3] == take and nodes < full[4]
    assert entries[True, 800][1] == 6  # beta + margin beyond what the capture's exchange can win: no ProbCut


def test_the_command_line_help_names_every_technique():
    from commands.options import PLAYER_SPECS

    assert "TECHNIQUE: " + ", ".join(TECHNIQUES) + ")" in PLAYER_SPECS


def _after(*ucis):
    position = Position.from_board(chess.Board())
    for uci in ucis:
        position.push(move_from_chess(chess.Move.from_uci(uci)))
    return position


def test_continuations_name_the_last_two_moves_pieces_where_they_stand():
    """``conthist``'s rows: (piece code, square) of the opponent's last move and of our move before it;
    none at the start, after a null move, or where the piece that moved two plies ago was taken since."""
    def row(position, square):
        return int(position.sq[square]) * 64 + square

    position = _after("e2e4", "e7e5")
    assert A._continuations(position.sq, position.st, position.undo) == (row(position, chess.E5), row(position, chess.E4))
    assert position.sq[chess.E5] != position.sq[chess.E4]  # a black pawn, a white pawn: other rows
    start = _after()
    assert A._continuations(start.sq, start.st, start.undo) == (-1, -1)
    taken = _after("e2e4", "d7d5", "e4d5")  # Black's d-pawn, which moved two plies ago, is gone
    assert A._continuations(taken.sq, taken.st, taken.undo) == (row(taken, chess.D5), -1)
    passed = _after("e2e4", "e7e5")
    K.make_null(passed.st, passed.keys, passed.undo)
    assert A._continuations(passed.sq, passed.st, passed.undo) == (-1, row(passed, chess.E5))


def test_histories_stay_bounded_and_learn_the_cuts():
    """With ``conthist`` every history moves by gravity: after deep searches of busy middlegames each
    value is within +-HISTORY_MAX (the continuation tables fit int16); cuts raise values, and only
    with ``histmalus`` do the quiet moves searched before a cut go below 0."""
    for malus in (True, False):
        search = AlphaBeta(tt_mb=4, techniques={"conthist": True, "histmalus": malus})
        for fen in MIDDLEGAMES[:4]:
            search.search(chess.Board(fen), depth=7)
        for table in (search.history, search.cont):
            assert -A.HISTORY_MAX <= table.min() and 0 < table.max() <= A.HISTORY_MAX
            assert (table.min() < 0) == malus
    alone = AlphaBeta(tt_mb=4, techniques={"histlmr": True, "histmalus": True})  # gravity without continuations
    for fen in MIDDLEGAMES[:4]:
        alone.search(chess.Board(fen), depth=7)
    assert -A.HISTORY_MAX <= alone.history.min() < 0 < alone.history.max() <= A.HISTORY_MAX
    assert not alone.cont.any()
    plain = AlphaBeta(tt_mb=4, techniques={"histlmr": False, "histmalus": False})  # the continuation tables never written
    plain.search(chess.Board(MIDDLEGAMES[0]), depth=7)
    assert not plain.cont.any() and plain.history.min() >= 0


def test_quiescence_answers_from_the_table_with_qtt():
    """With ``qtt`` a quiescence search stores its result, and the same null-window search again is
    answered by the table at its first node, with the same score; without it the whole search is redone."""
    fen = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"  # Kiwipete: captures everywhere
    for on in (True, False):
        engine = AlphaBeta(tt_mb=1, techniques={"qtt": on})
        position = Position.from_fen(fen)
        A.eval_root(engine.info[A.I_EVAL], position.bb, position.sq, position.st, position.keys, engine.params, engine.acc)
        engine.info[A.I_NODE_LIMIT] = 10**9
        counts, scores = [], []
        for _ in range(2):
            before = engine.info[A.I_QNODES]
            scores.append(A.quiesce(position.bb, position.sq, position.st, position.keys, position.undo, engine.moves,
                                    engine.order, engine.tt, engine.corr, engine.pv_len, engine.info, engine.params, engine.acc,
                                    199, 200, 1))
            counts.append(engine.info[A.I_QNODES] - before)
        assert scores[0] == scores[1] and counts[0] > 5, (on, scores, counts)
        assert counts[1] == (1 if on else counts[0]), (on, counts)
        assert position.fen() == fen


def test_the_correction_moves_toward_the_error_and_stays_bounded():
    """``corrhist``'s update: a depth-weighted step from the stored mean toward (score - static), read back
    in centipawns; many updates of one error converge to it, and an error beyond the limit stops there."""
    corr = np.zeros((2, A.CORR_SIZE), np.int32)
    position = Position.from_board(chess.Board())
    index = A._pawn_index(position.bb)
    A._update_correction(corr, position.bb, 0, 10, 50, 3)  # error +40 at depth 3: a step of 4/256 of it
    assert corr[0, index] == 40 * A.CORR_GRAIN * 4 // A.CORR_WEIGHT and not corr[1].any()
    for _ in range(400):
        A._update_correction(corr, position.bb, 0, 10, 50, 15)
    assert A._corrected(10, corr, position.bb, 0) in (49, 50)  # integer steps stop just short of the mean
    for _ in range(400):
        A._update_correction(corr, position.bb, 1, 0, -1000, 15)
    assert corr[1, index] == -A.CORR_LIMIT_CP * A.CORR_GRAIN
    assert A._corrected(0, corr, position.bb, 1) == -A.CORR_LIMIT_CP


def test_the_correction_is_keyed_by_the_pawns_alone():
    """Positions with the same pawns share a correction whatever the pieces; moving a pawn changes it."""
    start = Position.from_board(chess.Board())
    knight_out = _after("g1f3", "b8c6")
    pawn_moved = _after("e2e4")
    assert A._pawn_index(start.bb) == A._pawn_index(knight_out.bb)
    assert A._pawn_index(start.bb) != A._pawn_index(pawn_moved.bb)
    assert 0 <= A._pawn_index(pawn_moved.bb) < A.CORR_SIZE


def test_quiescence_stands_pat_on_the_corrected_evaluation():
    """A quiet position (no capture): quiescence returns the static evaluation, plus the correction of its
    pawn structure for the side to move with ``corrhist``, and the raw evaluation without."""
    fen = "4k3/pp6/8/8/8/8/PP6/4K3 w - - 0 1"
    scores = {}
    for on in (True, False):
        engine = AlphaBeta(tt_mb=1, techniques={"corrhist": on})
        position = Position.from_fen(fen)
        engine.corr[0, A._pawn_index(position.bb)] = 37 * A.CORR_GRAIN
        engine.info[A.I_NODE_LIMIT] = 10**9
        A.eval_root(engine.info[A.I_EVAL], position.bb, position.sq, position.st, position.keys, engine.params, engine.acc)
        scores[on] = A.quiesce(position.bb, position.sq, position.st, position.keys, position.undo, engine.moves,
                               engine.order, engine.tt, engine.corr, engine.pv_len, engine.info, engine.params,
                               engine.acc, -A.INF, A.INF, 1)
    assert scores[True] == scores[False] + 37


def test_searches_learn_corrections_only_with_corrhist():
    """Deep searches of middlegames write corrections within the limit with ``corrhist`` (and find the same
    kind of answer: a legal move), and never touch the table without it; a new game clears it."""
    for on in (True, False):
        search = AlphaBeta(tt_mb=4, techniques={"corrhist": on})
        for fen in MIDDLEGAMES[:3]:
            move, _ = search.search(chess.Board(fen), depth=7)
            assert move in chess.Board(fen).legal_moves
        assert bool(search.corr.any()) == on
        assert abs(search.corr).max() <= A.CORR_LIMIT_CP * A.CORR_GRAIN
        search.clear()
        assert not search.corr.any()
