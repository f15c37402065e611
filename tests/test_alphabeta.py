"""The alpha-beta search on positions whose answer is known: mates, draws, limits, the table, the spec."""

import random
import time

import chess
import numpy as np
import pytest

from alphazero.board.position import Position, move_to_chess
from alphazero.search import alphabeta as A
from alphazero.search.ab_player import ABPlayer, parse_ab_spec
from alphazero.search.alphabeta import MATE, AlphaBeta
from alphazero.search.evals import material

KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"


@pytest.fixture(scope="module")
def search():
    engine = AlphaBeta(tt_mb=4)
    engine.search(chess.Board(), depth=2)  # compile (or load the cache) once, outside any timing
    return engine


def _solve(engine, fen, **limits):
    engine.clear()
    return engine.search(chess.Board(fen), **limits)


def test_mate_in_one(search):
    move, info = _solve(search, "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1", depth=5)
    assert move.uci() == "d1d8"
    assert info.mate == 1 and info.score_cp is None and info.pv == ["d1d8"]
    assert "score mate 1" in info.uci()


def test_mate_in_two_and_the_mated_side(search):
    move, info = _solve(search, "r5k1/5ppp/8/8/8/8/1R3PPP/1R4K1 w - - 0 1", depth=5)
    assert move.uci() == "b2b8" and info.mate == 2
    assert info.pv[:3] == ["b2b8", "a8b8", "b1b8"]
    # One move later the defender sees its own mate, one move away: scores shorten with distance.
    _, info = _solve(search, "rR4k1/5ppp/8/8/8/8/5PPP/1R4K1 b - - 1 1", depth=5)
    assert info.mate == -1


def test_mate_in_two_through_zugzwang(search):
    """Morphy's problem: 1.Ra6, and every Black move allows mate. Passing would not, so a null move
    there fails high wrongly: the search must not prune it away."""
    move, info = _solve(search, "kbK5/pp6/1P6/8/8/8/8/R7 w - - 0 1", depth=6)
    assert move.uci() == "a1a6" and info.mate == 2


def test_terminal_nodes_score_mate_and_stalemate():
    engine = AlphaBeta(tt_mb=1)

    def node_score(fen):
        position = Position.from_fen(fen)
        engine.info[A.I_NODE_LIMIT] = 10**9
        engine.info[A.I_STOPPED] = 0
        return A.negamax(position.bb, position.sq, position.st, position.keys, position.undo, engine.moves,
                         engine.order, engine.tt, engine.killers, engine.history, engine.cont, engine.corr, engine.pv, engine.pv_len,
                         engine.evals, engine.info, engine.params, engine.acc, 3, -A.INF, A.INF, 1, A.NO_MOVE)

    assert node_score("7k/6Q1/6K1/8/8/8/8/8 b - - 0 1") == -MATE + 1  # mated, one ply from the root
    assert node_score("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1") == 0  # stalemated: a draw, queen or not


def test_winning_side_avoids_stalemate(search):
    # Qf7 stalemates; the engine must mate instead.
    move, info = _solve(search, "7k/4Q3/6K1/8/8/8/8/8 w - - 0 1", depth=4)
    board = chess.Board("7k/4Q3/6K1/8/8/8/8/8 w - - 0 1")
    board.push(move)
    assert board.is_checkmate() and info.mate == 1


def test_repetition_is_a_draw(search):
    """A queen down, White can repeat the position with Nc3: the search takes the draw (score 0)."""
    board = chess.Board("3q3k/8/8/8/8/8/8/KN6 w - - 0 1")
    for uci in ["b1c3", "d8e8", "c3b1", "e8d8"]:
        board.push_uci(uci)
    search.clear()
    move, info = search.search(board, depth=5)
    assert move.uci() == "b1c3" and info.score_cp == 0
    # Without the history the same position is simply lost.
    _, fresh = _solve(search, board.fen(), depth=5)
    assert fresh.score_cp is not None and fresh.score_cp < -500


def test_insufficient_material_and_fifty_moves_are_draws(search):
    _, info = _solve(search, "8/8/8/4k3/8/8/3NK3/8 w - - 0 1", depth=5)
    assert info.score_cp == 0
    # A rook up, but the hundredth reversible half-move comes before any mate.
    _, info = _solve(search, "8/8/4k3/8/8/3RK3/8/8 w - - 99 80", depth=4)
    assert info.score_cp == 0


def test_table_never_yields_an_illegal_move():
    """A table full of garbage, and the real keys of the positions searched pointing at illegal
    moves: every move played and every PV move is still legal."""
    rng = np.random.default_rng(0)
    engine = AlphaBeta(tt_mb=0.05)
    fens = [KIWIPETE, chess.STARTING_FEN, "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10"]
    for fen in fens:
        engine.tt[:, 0] = rng.integers(0, 2**63, size=engine.tt.shape[0], dtype=np.uint64)
        engine.tt[:, 1] = rng.integers(1, 2**50, size=engine.tt.shape[0], dtype=np.uint64)
        position = Position.from_fen(fen)
        for move in position.legal_moves():
            position.push(move)
            A.tt_store(engine.tt, np.uint64(position.key), 12 | 40 << 6, 30000, 99, A.BOUND_EXACT, 0)
            position.pop()
        A.tt_store(engine.tt, np.uint64(position.key), 7 | 50 << 6, 0, 1, A.BOUND_UPPER, 0)  # h1c7
        board = chess.Board(fen)
        move, info = engine.search(board, depth=4)
        assert move in board.legal_moves
        for uci in info.pv:
            assert chess.Move.from_uci(uci) in board.legal_moves, (fen, info.pv)
            board.push_uci(uci)


def test_table_moves_stay_legal_in_random_games():
    """A small table, shared across many searches: each position's stored move is legal there."""
    rng = random.Random(3)
    engine = AlphaBeta(tt_mb=0.05)
    board = chess.Board()
    checked = 0
    for _ in range(60):
        if board.is_game_over():
            board = chess.Board()
        move, _ = engine.search(board, depth=3)
        assert move in board.legal_moves
        row = A.tt_probe(engine.tt, np.uint64(Position.from_board(board).key))
        if row >= 0:
            stored = A.tt_move(engine.tt[row, 1])
            assert stored == 0 or move_to_chess(stored) in board.legal_moves
            checked += 1
        board.push(move if rng.random() < 0.5 else rng.choice(list(board.legal_moves)))
    assert checked > 30


def test_time_limit_is_respected(search):
    started, started_cpu = time.perf_counter(), time.process_time()
    move, info = _solve(search, KIWIPETE, movetime_ms=300)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    # The deadline is wall time, read every 1024 nodes (well under a millisecond). The CPU time spent is
    # the overshoot a busy machine cannot inflate (a descheduled process spends none); the wall bound only
    # says the search did stop, with the margin a loaded two-core machine needs.
    assert cpu < 0.3 + 0.15 and elapsed < 0.3 + 2.0, (cpu, elapsed)
    assert move in chess.Board(KIWIPETE).legal_moves and info.depth >= 2


def test_deadline_stops_a_deep_iteration(search):
    """The compiled search reads the clock itself: one iteration to depth 30 stops at the deadline."""
    position = Position.from_fen(KIWIPETE)
    search.clear()
    info = search.info
    info[A.I_NODES] = info[A.I_STOPPED] = 0
    backstop = 20_000_000  # nodes: many seconds, should the clock fail
    info[A.I_NODE_LIMIT] = backstop
    started, started_cpu = time.monotonic_ns(), time.process_time()
    info[A.I_DEADLINE] = started + 100_000_000
    A.search_iteration(position.bb, position.sq, position.st, position.keys, position.undo, search.moves,
                       search.order, search.tt, search.killers, search.history, search.cont, search.corr, search.pv, search.pv_len,
                       search.evals, info, search.params, search.acc, 30, 0, 30)
    elapsed_ms, cpu_ms = (time.monotonic_ns() - started) / 1e6, (time.process_time() - started_cpu) * 1e3
    # Stopped by the deadline, not the node backstop; CPU time bounds the overshoot on a busy machine too.
    assert info[A.I_STOPPED] == 1 and info[A.I_NODES] < backstop
    assert cpu_ms < 100 + 100 and elapsed_ms < 100 + 2000, (cpu_ms, elapsed_ms)
    assert position.fen() == KIWIPETE  # every move made was taken back


def test_node_limit_is_respected(search):
    for limit in (1, 700, 5000):
        move, info = _solve(search, KIWIPETE, nodes=limit)
        assert info.nodes <= limit
        assert move in chess.Board(KIWIPETE).legal_moves


def test_depth_limit_and_info(search):
    _, info = _solve(search, KIWIPETE, depth=3)
    assert info.depth == 3 and info.seldepth >= 3 and info.nodes > 0 and info.nps > 0
    assert info.score_cp is not None and len(info.pv) >= 1


def test_ab_spec_through_make_player():
    from alphazero.judge.players import make_player

    player = make_player("ab:material?depth=3&hash=1")
    assert isinstance(player, ABPlayer) and player.name == "ab:material?depth=3&hash=1"
    boards = [chess.Board(), chess.Board(KIWIPETE)]
    moves = player.choose_moves(boards)
    assert all(move in board.legal_moves for move, board in zip(moves, boards))
    assert player.last_info().depth == 3 and player.last_info().pv[0] == moves[1].uci()
    assert [board.fen() for board in boards] == [chess.STARTING_FEN, KIWIPETE]  # boards untouched
    player.close()
    assert parse_ab_spec("ab:material")["movetime_ms"] is None
    assert make_player("ab:material").movetime_ms == 100  # no limit: 100 ms a move


def test_ab_spec_share_is_when_the_player_stops_starting_iterations():
    from alphazero.judge.players import make_player

    # A millionth of five seconds (5 us): the first iteration outlasts it, so no second one starts.
    early = make_player("ab:material?movetime=5000&share=0.000001&hash=1")
    early.choose_moves([chess.Board(KIWIPETE)])
    assert early.last_info().depth == 1
    whole = make_player("ab:material?movetime=5000&depth=3&share=1&hash=1")  # the depth ends it, not the time
    whole.choose_moves([chess.Board(KIWIPETE)])
    assert whole.last_info().depth == 3 and whole.last_info().time_s < 5
    assert parse_ab_spec("ab:material")["share"] == 1.0 and parse_ab_spec("ab:material?share=0.6")["share"] == 0.6
    assert make_player("ab:material?movetime=50").soft_ms == pytest.approx(50.0)  # the whole move time
    assert make_player("ab:material?movetime=50&share=0.6").soft_ms == pytest.approx(30.0)
    assert make_player("ab:material?depth=4&share=0.5").soft_ms is None  # no move time, nothing to share


@pytest.mark.parametrize("spec,message", [
    ("ab:material?share=1.5", "share must be at most 1"),
    ("ab:material?share=0", "share must be a positive"),
    ("ab:nnue", "unknown evaluation 'nnue'"),
    ("ab:", "missing evaluation"),
    ("ab:material?depth=three", "depth='three' is not a valid int"),
    ("ab:material?movetime=-5", "movetime must be a positive"),
    ("ab:material?speed=2", "unknown parameter 'speed'"),
    ("ab:material?depth", "is not name=value"),
])
def test_bad_ab_spec_is_one_clear_error(spec, message):
    from alphazero.judge.players import make_player

    with pytest.raises(ValueError, match="player spec") as error:
        make_player(spec)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_pesto_scores_a_position_and_its_colour_mirror_the_same_for_the_side_to_move():
    """Evaluation symmetry: swapping the colours (and the side to move) changes nothing for the mover."""
    rng = random.Random(5)
    checked = scored = 0
    while checked < 400:
        board = chess.Board()
        for _ in range(rng.randrange(4, 90)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        position, mirrored = Position.from_fen(board.fen()), Position.from_fen(board.mirror().fen())
        score = material(position.bb, position.st)
        assert score == material(mirrored.bb, mirrored.st), board.fen()
        checked += 1
        scored += score != 0
    assert scored > 300  # real, unbalanced positions, not 400 copies of a symmetric one


# --------------------------------------------------------------------------------------------------
# What a UCI engine needs from another thread: abort, new limits; and MultiPV, searchmoves, mate N


def _search_in_thread(engine, board, **limits):
    import threading

    done: dict = {}

    def run():
        done["result"] = engine.search(board, **limits)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_abort_from_another_thread_stops_at_once(search):
    """The iteration kernel releases the GIL (this thread runs meanwhile) and reads the abort flag at
    every node: an endless search stops within milliseconds, deep inside an iteration."""
    search.clear()
    search.reset_abort()
    board = chess.Board(KIWIPETE)
    thread, done = _search_in_thread(search, board, depth=60)
    ticks, started = 0, time.monotonic()
    while time.monotonic() - started < 0.3:  # this thread is not starved while the search runs
        time.sleep(0.005)
        ticks += 1
    aborted = time.monotonic()
    search.abort()
    thread.join(timeout=10)
    try:
        assert not thread.is_alive() and time.monotonic() - aborted < 0.25 + 0.5  # goal: milliseconds
        assert ticks >= 10
        move, info = done["result"]
        assert move in board.legal_moves and info.depth >= 2
        # the flag stays set until reset: a search started after an abort stops at once
        move, info = search.search(board, depth=60)
        assert move in board.legal_moves and info.depth == 0
    finally:
        search.reset_abort()


def test_retarget_sets_a_deadline_on_a_running_search(search):
    """``ponderhit``: an unbounded search gets a hard deadline from another thread and keeps to it."""
    search.clear()
    search.reset_abort()
    thread, done = _search_in_thread(search, chess.Board(KIWIPETE), depth=60)
    time.sleep(0.2)
    hit = time.monotonic()
    search.retarget(deadline_ns=time.monotonic_ns() + 50_000_000)
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - hit < 0.05 + 0.5
    assert done["result"][0] in chess.Board(KIWIPETE).legal_moves


def test_multipv_lines_are_distinct_and_best_first(search):
    search.clear()
    board = chess.Board(KIWIPETE)
    move, info = search.search(board, depth=4, multipv=3)
    assert len(info.lines) == 3 and info.lines[0] is info
    firsts = [line.pv[0] for line in info.lines]
    assert len(set(firsts)) == 3 and move.uci() == firsts[0]
    scores = [line.score_cp for line in info.lines]
    assert scores == sorted(scores, reverse=True)
    for line in info.lines:  # every line is a legal line
        replay = board.copy()
        for uci in line.pv:
            replay.push_uci(uci)
    _, one = search.search(board, depth=4)
    assert len(one.lines) == 1


def test_searchmoves_restrict_the_root(search):
    quiet = [chess.Move.from_uci("g1f1"), chess.Move.from_uci("h2h3")]
    move, info = _solve(search, "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", depth=4, searchmoves=quiet)
    assert move in quiet and info.mate is None  # Ra8# is not among them
    move, _ = _solve(search, chess.STARTING_FEN, depth=3, searchmoves=quiet[1:], multipv=3)
    assert move == quiet[1]  # MultiPV over one allowed move: one line
    with pytest.raises(ValueError, match="searchmoves"):
        _solve(search, chess.STARTING_FEN, depth=2, searchmoves=[chess.Move.from_uci("e2e5")])


def test_mate_limit_stops_once_the_mate_is_proven(search):
    move, info = _solve(search, "kbK5/pp6/1P6/8/8/8/8/R7 w - - 0 1", depth=30, mate=2)
    assert move.uci() == "a1a6" and info.mate == 2 and info.depth <= 8
