"""The compiled NNUE against the numpy reference node by node, and the NNUE in the alpha-beta player."""

import chess
import numpy as np
import pytest

from alphazero.board import kernel as K
from alphazero.board.position import Position, move_to_chess
from alphazero.errors import InputError
from alphazero.nets.features import reference_features
from alphazero.nets.nnue_file import FloatNNUE, quantise, random_nnue, save_nnue
from alphazero.search import evals
from alphazero.search.alphabeta import I_EVAL, MAX_PLY, AlphaBeta
from alphazero.search.nnue_eval import EVAL_LIMIT, new_scratch, pack, row_features

# Castling both ways for both sides, en passant ready (d6), promotions with and without capture.
SPECIAL = "r3k2r/1P4p1/8/3pP3/8/8/1p4P1/R3K2R w KQkq d6 0 1"
KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"
MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1"

NETS = [  # features, arch, activation, factor on the transformer's weights, output buckets
    ("all", "perspective", "crelu", 1.0, 1),
    ("ka", "perspective", "screlu", 1.0, 1),
    ("all+kb", "perspective", "crelu", 1.0, 1),  # four king buckets: a king move inside one is a diff
    ("all+pv", "layered", "crelu", 1.0, 1),
    ("all", "simple", "screlu", 1.0, 1),
    ("h+v+d1+d2+ph+mb+mc", "layered", "screlu", 1.0, 1),
    ("all", "perspective", "crelu", 300.0, 1),  # accumulators that wrap around int16: still equal
    ("all", "perspective", "crelu", 1.0, 8),  # bullet's eight output buckets by material
    ("all+pv", "layered", "screlu", 1.0, 3),
]


def _kind(board: chess.Board, move: chess.Move) -> str | None:
    if board.is_castling(move):
        return "castling"
    if board.is_en_passant(move):
        return "en passant"
    if move.promotion:
        return "promotion"
    if board.piece_type_at(move.from_square) == chess.KING:
        return "king move"
    if board.is_capture(move):
        return "capture"
    return None


def _reference(q, position: Position) -> int:
    board = position.to_board()
    stm, nstm = reference_features(board, q.features)
    return max(-EVAL_LIMIT, min(EVAL_LIMIT, q.evaluate(stm, nstm, chess.popcount(board.occupied))))


def _rows_are_their_lists(q, params, acc) -> int:
    """Every filled row equals a refresh from the features it records (its mailbox's piece-square
    features and its board-wide list); returns how many were checked."""
    rows = acc[0]
    checked = 0
    for ply in range(rows.shape[0] - 1):
        for colour in range(2):
            features = row_features(params, acc, ply, colour)
            if features is not None:
                assert np.array_equal(rows[ply, colour], q.accumulator(features))
                checked += 1
    return checked


@pytest.mark.parametrize("features,arch,activation,factor,buckets", NETS)
def test_compiled_evaluation_equals_the_reference_at_every_node(features, arch, activation, factor, buckets):
    """Random walks that move down (moves and null moves) and back up as a search does, evaluating at
    some plies and skipping others: every evaluation equals the numpy quantised reference exactly
    (with output buckets, through the row of each position's material)."""
    net = random_nnue(features, arch, l1=16, l2=4, activation=activation, seed=11, buckets=buckets)
    net = FloatNNUE.from_arrays(dict(net.arrays, ft_weight=net.arrays["ft_weight"] * factor), net.meta)
    q = quantise(net)
    assert (q.accumulator_bound > 32767) == (factor > 1)
    params = pack(q)
    rng = np.random.default_rng(5)
    seen: dict[str, int] = {}
    rows_used: set[int] = set()
    evaluated = 0
    for fen in [SPECIAL, KIWIPETE, chess.STARTING_FEN, SPECIAL]:
        position = Position.from_fen(fen)
        root_ply = int(position.st[K.ST_PLY])
        acc = new_scratch(q.l1, q.features.max_active, MAX_PLY)
        evals.eval_root(evals.EVAL_NNUE, position.bb, position.sq, position.st, position.keys, params, acc)
        for _ in range(90):
            ply = int(position.st[K.ST_PLY]) - root_ply
            moves = position.legal_moves()
            r = rng.random()
            if (r < 0.6 and len(moves) and ply < 24) or ply == 0:
                if not len(moves):
                    break
                board = position.to_board()
                chess_moves = [move_to_chess(m) for m in moves]
                kinds = [_kind(board, m) for m in chess_moves]
                rare = [i for i, k in enumerate(kinds) if k in ("castling", "en passant", "promotion")]
                special = [i for i, k in enumerate(kinds) if k]
                passant = [i for i, k in enumerate(kinds) if k == "en passant"]
                if passant and rng.random() < 0.5:
                    i = passant[0]
                elif rare and rng.random() < 0.7:
                    i = int(rng.choice(rare))
                elif special and rng.random() < 0.5:
                    i = int(rng.choice(special))
                else:
                    i = int(rng.integers(len(moves)))
                kind = _kind(board, chess_moves[i])
                if kind:
                    seen[kind] = seen.get(kind, 0) + 1
                position.push(int(moves[i]))
            elif r < 0.66 and not position.in_check():
                K.make_null(position.st, position.keys, position.undo)
            else:
                position.pop()
            ply = int(position.st[K.ST_PLY]) - root_ply
            if rng.random() < 0.6:
                got = evals.evaluate(evals.EVAL_NNUE, position.bb, position.sq, position.st, position.keys, ply,
                                     params, acc)
                assert got == _reference(q, position), position.fen()
                rows_used.add(q.bucket(chess.popcount(position.to_board().occupied)))
                evaluated += 1
        assert _rows_are_their_lists(q, params, acc) > 0
    assert evaluated > 100
    assert len(rows_used) >= min(buckets, 3), rows_used  # the walks reach several buckets (12 to 32 men)
    assert {"castling", "en passant", "promotion", "king move", "capture"} <= set(seen), seen


def test_rows_stay_exact_through_a_real_search():
    """After node-limited searches with the compiled search's own pattern of evaluations, every row
    it left equals a refresh from its list, and the root row is the root's."""
    q = quantise(random_nnue("all+pv", "perspective", l1=16, seed=2))
    search = AlphaBeta(q, tt_mb=1)
    for fen in [KIWIPETE, SPECIAL]:
        search.search(chess.Board(fen), nodes=3000)
        assert _rows_are_their_lists(q, search.params, search.acc) > 10
        stm, nstm = reference_features(chess.Board(fen), q.features)
        white, black = (stm, nstm) if chess.Board(fen).turn == chess.WHITE else (nstm, stm)
        assert row_features(search.params, search.acc, 0, 0) == white
        assert row_features(search.params, search.acc, 0, 1) == black


@pytest.fixture(scope="module")
def nnue_path(tmp_path_factory):
    net = random_nnue("all", "perspective", l1=32, seed=4)
    path = tmp_path_factory.mktemp("nnue") / "trained.nnue"  # whatever name `nnue train --out` was given
    save_nnue(path, net.arrays, net.meta)
    return path


def test_nnue_search_plays_legal_moves_and_mates_in_one(nnue_path):
    from alphazero.judge.players import make_player
    from alphazero.search.ab_player import ABPlayer

    # A node limit, not a depth: a random net's evaluation is blind to material, so its quiescence
    # search wanders through every capture sequence (kiwipete to depth 3: 19 million nodes).
    player = make_player(f"ab:{nnue_path}?nodes=3000&hash=1")
    assert isinstance(player, ABPlayer) and player.name == f"ab:{nnue_path}?nodes=3000&hash=1"
    boards = [chess.Board(), chess.Board(KIWIPETE), chess.Board(SPECIAL)]
    moves = player.choose_moves(boards)
    assert all(move in board.legal_moves for move, board in zip(moves, boards))
    assert [board.fen() for board in boards] == [chess.STARTING_FEN, KIWIPETE, SPECIAL]
    move, info = AlphaBeta(str(nnue_path), tt_mb=1).search(chess.Board(MATE_IN_ONE), depth=4)
    assert move.uci() == "d1d8" and info.mate == 1
    _, info = AlphaBeta(str(nnue_path), tt_mb=1).search(chess.Board(), nodes=5000)
    assert info.nodes <= 5000 and info.score_cp is not None


def test_material_stays_the_default_evaluation():
    search = AlphaBeta("material", tt_mb=1)
    assert search.info[I_EVAL] == evals.EVAL_MATERIAL
    move, info = search.search(chess.Board(MATE_IN_ONE), depth=3)
    assert move.uci() == "d1d8" and info.mate == 1


def _policy_value_checkpoint(path):
    torch = pytest.importorskip("torch")
    from alphazero.config import NetworkConfig
    from alphazero.nets.network import PolicyValueNet, save_network

    torch.manual_seed(0)
    save_network(PolicyValueNet(NetworkConfig(blocks=1, channels=8)), path)


def test_bad_nnue_specs_are_one_clear_error(tmp_path, nnue_path):
    from alphazero.judge.players import make_player

    _policy_value_checkpoint(tmp_path / "net.pt")
    (tmp_path / "notes.txt").write_text("not a net\n")
    cases = [
        (f"ab:{tmp_path / 'missing.npz'}", "unknown evaluation"),
        (f"ab:{tmp_path / 'net.pt'}", "not an NNUE file"),
        (f"ab:{tmp_path / 'notes.txt'}", "not an NNUE file"),
        (f"ab:{nnue_path}?depth=x", "depth='x' is not a valid int"),
        (f"ab:{nnue_path}?nodes=0", "nodes must be a positive"),
        (f"ab:{nnue_path}?width=3", "unknown parameter 'width'"),
    ]
    for spec, message in cases:
        with pytest.raises(InputError) as error:
            make_player(spec)
        assert message in str(error.value) and "player spec" in str(error.value), spec
        assert "\n" not in str(error.value)


def test_cli_refuses_a_net_of_the_wrong_kind_with_exit_2_and_writes_nothing(tmp_path, capsys):
    from commands.main import main

    _policy_value_checkpoint(tmp_path / "net.pt")
    pgn = tmp_path / "games.pgn"
    code = main(["arena", f"ab:{tmp_path / 'net.pt'}?depth=1", "random", "--games", "2", "--pgn", str(pgn)])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and "not an NNUE file" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.pt"]


def test_an_evaluation_beyond_the_limit_is_clamped():
    net = random_nnue("all", "simple", l1=8)
    arrays = dict(net.arrays, out_bias=np.array([100.0], np.float32))  # 40000 cp: would read as a mate
    q = quantise(FloatNNUE.from_arrays(arrays, net.meta))
    position = Position.from_fen(chess.STARTING_FEN)
    params, acc = pack(q), new_scratch(q.l1, q.features.max_active, 4)
    got = evals.evaluate(evals.EVAL_NNUE, position.bb, position.sq, position.st, position.keys, 0, params, acc)
    assert got == EVAL_LIMIT


def test_the_nnue_bench_reports_a_rate():
    from alphazero.bench.alphabeta import ab_nnue_nodes_per_s

    assert ab_nnue_nodes_per_s(nodes=500) > 0


def test_a_repeated_position_is_answered_from_the_evaluation_cache_until_cleared():
    q = quantise(random_nnue("all", "perspective", l1=8, seed=4))
    search = AlphaBeta(q, tt_mb=1)
    position = Position.from_fen(KIWIPETE)
    params, acc = search.params, search.acc
    evals.eval_root(evals.EVAL_NNUE, position.bb, position.sq, position.st, position.keys, params, acc)
    exact = evals.evaluate(evals.EVAL_NNUE, position.bb, position.sq, position.st, position.keys, 0, params, acc)
    assert exact == _reference(q, position)
    cache_keys, cache_values = acc[3], acc[4]
    slot = int(position.keys[position.st[K.ST_PLY]] & np.uint64(len(cache_keys) - 1))
    assert cache_keys[slot] == position.keys[position.st[K.ST_PLY]] and cache_values[slot] == exact
    cache_values[slot] = exact + 7  # the next evaluation of this position must come from here
    assert evals.evaluate(evals.EVAL_NNUE, position.bb, position.sq, position.st, position.keys, 3, params, acc) == exact + 7
    search.clear()
    assert evals.evaluate(evals.EVAL_NNUE, position.bb, position.sq, position.st, position.keys, 3, params, acc) == exact
    with pytest.raises(ValueError, match="power of two"):
        new_scratch(8, 32, 4, cache=3)
