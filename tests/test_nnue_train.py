"""`alphazero nnue train`: NNUE nets in torch, their losses, the cached training data and the trainer."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import chess
import numpy as np
import pytest
import torch

from alphazero.bench.nnue import nnue_train_positions_per_s
from alphazero.board import encoding
from alphazero.errors import InputError
from alphazero.learn.nnue_data import PositionData, PQRData, q_to_cp, read_source
from alphazero.learn.nnue_train import TrainOptions
from alphazero.learn.positions import split_held_out
from alphazero.learn.replay import write_shard
from alphazero.nets.features import batch_features, parse_features
from alphazero.nets.nnue import NNUEConfig, NNUENet, pqr_loss, sigmoid_mse_loss, target_score_loss
from alphazero.nets.nnue_file import load_nnue, output_bucket, save_nnue
from alphazero.search.records import GameRecord
from alphazero.search.selfplay import game_pgn
from commands.main import build_parser, main

EVALS = Path("/work/shared/data/evals-dev.csv")
# fen, score_cp, mate, best_uci, wdl_win, wdl_draw, wdl_loss (as `alphazero label` writes them)
LABEL_ROWS = [
    ("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", "-23", "", "c7c5", "3", "969", "28"),
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", "", "1", "a1a8", "1000", "0", "0"),
    ("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3", "65", "", "f1b5", "", "", ""),
    ("4k3/8/8/8/8/8/4q3/4K3 w - - 0 1", "", "-2", "e1e2", "", "", ""),
    ("rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2", "", "", "g1f3", "250", "500", "250"),
    ("8/8/8/8/8/8/8/K1k5 w - - 0 1", "", "", "a1a2", "", "", ""),  # no score at all
]
PGN = ('[Event "a"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n'
       '[Event "b"]\n[Result "1/2-1/2"]\n\n1. d4 d5 2. c4 c6 1/2-1/2\n\n'
       '[Event "c"]\n[Result "0-1"]\n\n1. f3 e5 2. g4 Qh4# 0-1\n\n'
       '[Event "d"]\n[Result "*"]\n\n1. e4 c5 *\n')
SMALL = ["--l1", "16", "--batch-size", "64", "--threads", "1", "--keep-noisy"]


def write_label_csv(path: Path, rows) -> None:
    path.write_text("fen,score_cp,mate,best_uci,wdl_win,wdl_draw,wdl_loss\n" + "".join(",".join(row) + "\n" for row in rows))


def evals_head(path: Path, count: int) -> Path:
    path.write_text("".join(EVALS.read_text().splitlines(keepends=True)[:count + 1]))
    return path


def nnue_train(capsys, *args: str) -> tuple[int, dict | None, str]:
    code = main(["nnue", "train", *args])
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1]) if code == 0 else None
    return code, summary, captured.out + captured.err


def features_of(board: chess.Board, spec: str = "all") -> tuple[torch.Tensor, ...]:
    batch = batch_features([board], parse_features(spec))
    return tuple(torch.from_numpy(a.astype(np.int64)) for a in (batch.stm_index, batch.stm_offsets,
                                                                    batch.nstm_index, batch.nstm_offsets))


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# ---- losses -----------------------------------------------------------------------------------


def test_sigmoid_mse_blends_score_and_result_as_the_formula() -> None:
    y = torch.tensor([0.3, -0.2, 1.0, 0.0, 0.5])
    nan = math.nan
    score = torch.tensor([120.0, math.inf, nan, -math.inf, nan])
    result = torch.tensor([1.0, -1.0, 0.0, nan, nan])  # the last row has no target at all
    lam = 0.7
    targets = [lam * sigmoid(120 / 400) + (1 - lam) * 1.0, lam * 1.0 + (1 - lam) * 0.0, 0.5, 0.0]
    expected = sum((sigmoid(float(v)) - t) ** 2 for v, t in zip(y[:4], targets)) / 4
    assert float(sigmoid_mse_loss(y, score, result, lam)) == pytest.approx(expected, rel=1e-6)
    # lambda 1: the score alone where there is one; lambda 0: the result alone where there is one.
    only_score = (sigmoid(0.3) - sigmoid(0.3)) ** 2
    assert float(sigmoid_mse_loss(torch.tensor([0.3]), torch.tensor([120.0]), torch.tensor([-1.0]), 1.0)) == pytest.approx(only_score)
    assert float(sigmoid_mse_loss(torch.tensor([0.3]), torch.tensor([120.0]), torch.tensor([-1.0]), 0.0)) == pytest.approx(sigmoid(0.3) ** 2)


def test_target_score_loss_is_the_thesis_formula() -> None:
    f = torch.tensor([100.0, -300.0, 0.0, 50.0])
    score = torch.tensor([250.0, -math.inf, math.nan, 40.0])
    terms = [abs(sigmoid(250 / 410) - sigmoid(100 / 361)) ** 2.6, abs(0.0 - sigmoid(-300 / 361)) ** 2.6,
             abs(sigmoid(40 / 410) - sigmoid(50 / 361)) ** 2.6]
    assert float(target_score_loss(f, score)) == pytest.approx(sum(terms) / 3, rel=1e-5)


def test_pqr_loss_is_the_thesis_formula_and_wants_r_above_q_and_p_equal_minus_q() -> None:
    p, q, r = torch.tensor([80.0, -20.0]), torch.tensor([-60.0, 30.0]), torch.tensor([200.0, -400.0])

    def w(x: float) -> float:
        return 2 * sigmoid(x / 400) - 1

    def nll(x: float) -> float:
        return -math.log(sigmoid(x))

    expected = sum(nll(w(ri) - w(qi)) + nll(w(pi) + w(qi)) + nll(-(w(pi) + w(qi)))
                   for pi, qi, ri in zip(p.tolist(), q.tolist(), r.tolist())) / 2
    assert float(pqr_loss(p, q, r)) == pytest.approx(expected, rel=1e-6)
    one = torch.tensor([100.0])
    assert float(pqr_loss(one, -one, torch.tensor([300.0]))) < float(pqr_loss(one, -one, torch.tensor([-300.0])))
    assert float(pqr_loss(one, -one, one)) < float(pqr_loss(one, one, one))  # f(P) = -f(Q) is the minimum
    r_var = torch.tensor([0.0], requires_grad=True)
    pqr_loss(one, -one, r_var).backward()
    assert r_var.grad is not None and float(r_var.grad[0]) < 0  # descending raises f(R) above f(Q)


# ---- the net and its file -----------------------------------------------------------------------


@pytest.mark.parametrize("arch, activation, buckets", [("simple", "crelu", 1), ("perspective", "screlu", 1),
                                                       ("layered", "crelu", 1), ("perspective", "crelu", 8),
                                                       ("layered", "screlu", 3)])
def test_the_torch_net_saved_and_loaded_evaluates_as_the_numpy_reference(tmp_path, arch, activation, buckets) -> None:
    fs = parse_features("all+pv")
    torch.manual_seed(1)
    net = NNUENet(NNUEConfig(features=fs.spec, num_features=fs.size, arch=arch, l1=8, l2=4, activation=activation,
                             buckets=buckets))
    with torch.no_grad():
        net.ft_bias.uniform_(0.0, 0.5)
    path = tmp_path / "net.npz"
    save_nnue(path, net.to_arrays(), {**net.config.meta(), "training": {}})
    loaded = load_nnue(path)
    assert loaded.buckets == buckets
    again = NNUENet.from_arrays(loaded.arrays, net.config)
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3")
    endgame = chess.Board("8/5k2/8/3p4/8/2K5/4R3/8 w - - 0 1")  # 4 men: bucket 0 of 8 or of 3
    rows = []
    for position in (board, board.mirror(), chess.Board(), endgame, endgame.mirror()):
        inputs = features_of(position, fs.spec)
        pieces = chess.popcount(position.occupied)
        bucket = torch.tensor([output_bucket(pieces, buckets)])
        with torch.no_grad():
            y = float(net(*inputs, bucket=bucket))
            assert float(again(*inputs, bucket=bucket)) == y
            rows.append([float(net(*inputs, bucket=torch.tensor([k]))) for k in range(buckets)])
        stm, nstm = batch_features([position], fs).position(0)
        assert loaded.logit(stm, nstm, pieces) == pytest.approx(y, abs=1e-5)
    if buckets > 1:
        assert len({round(y, 6) for y in rows[0]}) == buckets  # each row its own output, and the bucket picks one
        with pytest.raises(ValueError, match="bucket"):
            net(*features_of(board, fs.spec))
        with pytest.raises(ValueError, match="number of pieces"):
            loaded.logit(stm, nstm)


# ---- data ---------------------------------------------------------------------------------------


def test_pgn_positions_carry_the_result_for_the_side_to_move_and_split_by_game(tmp_path) -> None:
    games = tmp_path / "games.pgn"
    games.write_text(PGN)
    data = read_source(games, parse_features("all"))
    assert isinstance(data, PositionData)
    assert data.num_positions == 7 + 5 + 4 + 3  # every position with a legal move (mated final positions have none)
    assert list(data.result[data.groups == 2]) == [-1.0, 1.0, -1.0, 1.0]  # 0-1, from the side to move
    assert np.isnan(data.result[data.groups == 3]).all() and np.isnan(data.score_cp).all()
    assert list(data.result[data.groups == 1]) == [0.0] * 5
    board = chess.Board()
    expected = batch_features([board], parse_features("all")).position(0)
    assert list(data.features.stm_index[:data.features.stm_offsets[1]]) == list(expected[0])
    train, held = split_held_out(data, 0.25, seed=0)
    assert held is not None and set(held.groups).isdisjoint(set(train.groups))
    assert train.num_positions + held.num_positions == data.num_positions


def test_label_csv_scores_mates_wdl_and_missing(tmp_path) -> None:
    path = tmp_path / "labels.csv"
    write_label_csv(path, LABEL_ROWS)
    data = read_source(path, parse_features("all"))
    assert isinstance(data, PositionData)
    assert data.score_cp[0] == -23 and data.score_cp[1] == math.inf and data.score_cp[2] == 65
    assert data.score_cp[3] == -math.inf and data.score_cp[4] == pytest.approx(0.0) and math.isnan(data.score_cp[5])
    assert np.isnan(data.result).all() and list(data.groups) == [2, 3, 4, 5, 6, 7]  # the CSV line


def fools_mate_record() -> tuple[GameRecord, list[chess.Board]]:
    board = chess.Board()
    boards = []
    for uci in ("f2f3", "e7e5", "g2g4", "d8h4"):
        boards.append(board.copy())
        board.push_uci(uci)
    recorded = [boards[1], boards[3]]  # Black to move; the other plies were fast searches, not recorded
    record = GameRecord(
        planes=encoding.encode_packed(recorded), policy_offsets=np.array([0, 1, 2], np.int64),
        policy_actions=np.zeros(2, np.uint16), policy_counts=np.ones(2, np.uint16), z=np.array([1, 1], np.int8),
        root_values=np.array([0.5, 0.875], np.float16), result="0-1", termination="checkmate", network_version=0,
        pgn=game_pgn(board, {"Result": "0-1"}), plies=4)
    return record, boards


def capped_record() -> GameRecord:
    board = chess.Board()
    start = board.copy()
    board.push_uci("e2e4")
    board.push_uci("e7e5")
    return GameRecord(
        planes=encoding.encode_packed([start]), policy_offsets=np.array([0, 1], np.int64),
        policy_actions=np.zeros(1, np.uint16), policy_counts=np.ones(1, np.uint16), z=np.array([0], np.int8),
        root_values=np.array([-0.25], np.float16), result="1/2-1/2", termination="max length", network_version=0,
        pgn=game_pgn(board, {"Result": "1/2-1/2"}), plies=2)


def test_replay_targets_are_z_and_the_recorded_q(tmp_path) -> None:
    record, _ = fools_mate_record()
    write_shard(tmp_path / "run" / "replay" / "shard-00000000.npz", [record, capped_record()])
    data = read_source(tmp_path / "run", parse_features("all"))
    assert isinstance(data, PositionData) and data.kind == "replay"
    assert data.num_positions == 4 + 3  # fool's mate before each move; e4 e5 and its final position
    assert list(data.result[:4]) == [-1.0, 1.0, -1.0, 1.0]
    assert np.isnan(data.result[4:]).all()  # stopped at the length cap: no result
    assert math.isnan(data.score_cp[0]) and math.isnan(data.score_cp[2])  # played, not recorded
    assert data.score_cp[1] == pytest.approx(q_to_cp(0.5)) and data.score_cp[3] == pytest.approx(q_to_cp(0.875))
    assert sigmoid(data.score_cp[1] / 400) == pytest.approx(0.75)
    assert data.score_cp[4] == pytest.approx(q_to_cp(-0.25)) and np.isnan(data.score_cp[5:]).all()
    assert list(data.groups) == [0, 0, 0, 0, 1, 1, 1]


def test_replay_of_a_real_self_play_run_matches_every_recorded_position(tmp_path) -> None:
    from alphazero.config import SearchConfig, SelfPlayConfig
    from alphazero.learn.replay import read_shard
    from alphazero.nets.evaluator import UniformEvaluator
    from alphazero.search.selfplay import SelfPlayer

    player = SelfPlayer(UniformEvaluator(), SearchConfig(num_simulations=4),
                        SelfPlayConfig(games_per_worker=2, max_plies=24, random_opening_plies=2, full_search_fraction=0.5,
                                       fast_simulations=2), seed=5)
    path = tmp_path / "run" / "replay" / "shard-00000000.npz"
    path.parent.mkdir(parents=True)
    write_shard(path, player.play(2))
    shard = read_shard(path)
    data = read_source(tmp_path / "run", parse_features("all"))
    assert isinstance(data, PositionData)
    assert int((~np.isnan(data.score_cp)).sum()) == shard.num_positions  # every recorded position found, once
    assert data.num_positions > shard.num_positions


def test_pqr_triples_from_pgn(tmp_path) -> None:
    games = tmp_path / "games.pgn"
    games.write_text(PGN)
    fs = parse_features("all")
    data = read_source(games, fs, what="pqr", seed=3)
    again = read_source(games, fs, what="pqr", seed=3)
    assert isinstance(data, PQRData) and isinstance(again, PQRData)
    assert data.num_positions == 7 + 4 + 4 + 2  # every move played (none of these is forced)
    assert np.array_equal(data.r.stm_index, again.r.stm_index)  # seeded
    board = chess.Board()
    child = board.copy()
    child.push_uci("e2e4")
    assert list(data.p.stm_index[:data.p.stm_offsets[1]]) == list(batch_features([board], fs).position(0)[0])
    assert list(data.q.stm_index[:data.q.stm_offsets[1]]) == list(batch_features([child], fs).position(0)[0])
    others = []
    for move in board.legal_moves:
        if move != chess.Move.from_uci("e2e4"):
            other = board.copy()
            other.push(move)
            others.append(list(batch_features([other], fs).position(0)[0]))
    assert list(data.r.stm_index[:data.r.stm_offsets[1]]) in others


# ---- the command --------------------------------------------------------------------------------


def test_train_on_a_label_csv_writes_a_net_metrics_plot_and_a_cache(tmp_path, capsys) -> None:
    data = evals_head(tmp_path / "evals.csv", 200)
    out = tmp_path / "net.npz"
    code, summary, text = nnue_train(capsys, "--data", str(data), "--out", str(out), "--epochs", "4", "--lr", "3e-3", *SMALL)
    assert code == 0, text
    assert summary["positions"] == 200 and summary["train_positions"] == 180 and summary["held_out_positions"] == 20
    assert summary["final"]["train_loss"] < summary["initial"]["held_out_loss"]
    assert "epoch 4/4" in text and summary["cached"] is False
    metrics = [json.loads(line) for line in (tmp_path / "net.train" / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [0, 1, 2, 3, 4] and metrics[4]["train_loss"] < metrics[1]["train_loss"]
    assert (tmp_path / "net.train" / "losses.png").read_bytes()[:4] == b"\x89PNG"
    nnue = load_nnue(out)
    assert nnue.meta["arch"] == "perspective" and nnue.meta["features"] == "all" and nnue.meta["l1"] == 16
    assert nnue.meta["training"]["epochs"] == 4
    # The second run over the same file takes the cached features.
    code, summary, text = nnue_train(capsys, "--data", str(data), "--out", str(tmp_path / "other.npz"), "--epochs", "1",
                                     "--cache-dir", str(tmp_path / "nnue-cache"), *SMALL)
    assert code == 0 and summary["cached"] is True, text


def test_a_net_with_output_buckets_trains_and_plays(tmp_path, capsys) -> None:
    """--buckets 4: the trainer feeds each position's bucket (from its men), the file keeps the four
    rows, and the alpha-beta player searches with it (each row reached: the data spans the game)."""
    from alphazero.learn.nnue_data import count_pieces
    from alphazero.search.ab_player import make_ab_player

    data = evals_head(tmp_path / "evals.csv", 400)
    fens = [line.split(",", 1)[0] for line in data.read_text().splitlines()[1:]]
    assert len({output_bucket(count_pieces(fen), 4) for fen in fens}) == 4
    out = tmp_path / "net.npz"
    code, summary, text = nnue_train(capsys, "--data", str(data), "--out", str(out), "--epochs", "3", "--lr", "3e-3",
                                     "--buckets", "4", *SMALL)
    assert code == 0, text
    assert summary["final"]["train_loss"] < summary["initial"]["held_out_loss"]
    nnue = load_nnue(out)
    assert nnue.buckets == 4 and nnue.arrays["out_weight"].shape == (4, 32) and nnue.meta["format_version"] == 2
    assert "1 of 4 buckets" in summary["net"]
    endgame, middlegame = chess.Board("8/5k2/8/3p4/8/2K5/4R3/8 w - - 0 1"), chess.Board(LABEL_ROWS[2][0])
    player = make_ab_player(f"ab:{out}?depth=3")
    for board, move in zip((endgame, middlegame), player.choose_moves([endgame, middlegame])):
        assert move in board.legal_moves
    player.close()
    code, _, text = nnue_train(capsys, "--data", str(data), "--out", str(tmp_path / "bad.npz"), "--buckets", "0", *SMALL)
    assert code == 2 and "buckets must be between 1 and 32" in text


def test_train_from_label_columns_pgn_and_replay_together(tmp_path, capsys) -> None:
    labels, games = tmp_path / "labels.csv", tmp_path / "games.pgn"
    write_label_csv(labels, LABEL_ROWS)
    games.write_text(PGN)
    record, _ = fools_mate_record()
    write_shard(tmp_path / "run" / "replay" / "shard-00000000.npz", [record])
    code, summary, text = nnue_train(capsys, "--data", str(labels), "--data", str(games), "--data", str(tmp_path / "run"),
                                     "--out", str(tmp_path / "net.npz"), "--epochs", "2", "--wdl-lambda", "0.5",
                                     "--arch", "layered", "--l2", "4", "--activation", "screlu", *SMALL)
    assert code == 0, text
    # 6 + 19 + 4 positions; the CSV row without a score and the PGN game with result * have no target
    assert summary["positions"] == 29 and summary["train_positions"] + summary["held_out_positions"] == 29 - 1 - 3
    assert load_nnue(tmp_path / "net.npz").meta["l2"] == 4


def test_pqr_from_scratch_and_as_fine_tuning_of_a_score_trained_net(tmp_path, capsys) -> None:
    games = tmp_path / "games.pgn"
    games.write_text(PGN * 3)
    scored = tmp_path / "scored.npz"
    code, _, text = nnue_train(capsys, "--data", str(evals_head(tmp_path / "evals.csv", 100)), "--out", str(scored),
                               "--loss", "score", "--epochs", "1", *SMALL)
    assert code == 0, text
    code, summary, text = nnue_train(capsys, "--data", str(games), "--out", str(tmp_path / "pqr.npz"), "--loss", "pqr",
                                     "--epochs", "3", "--lr", "1e-2", "--held-out", "0", *SMALL)
    assert code == 0, text
    assert summary["final"]["held_out_loss"] < summary["initial"]["held_out_loss"]
    assert "held_out_r_above_q" in summary["final"]
    code, summary, text = nnue_train(capsys, "--data", str(games), "--out", str(tmp_path / "tuned.npz"), "--loss", "pqr",
                                     "--init", str(scored), "--epochs", "1", "--lr", "1e-4", "--batch-size", "64")
    assert code == 0, text
    tuned = load_nnue(tmp_path / "tuned.npz")
    assert tuned.l1 == 16 and tuned.meta["training"]["init"] == str(scored)
    # The fine-tuning started from the scored net: its initial loss is the scored net's on these triples.
    start = NNUENet.from_arrays(load_nnue(scored).arrays, NNUEConfig(l1=16))
    from alphazero.learn.nnue_train import evaluate

    triples = read_source(games, parse_features("all"), what="pqr", seed=0)
    _, held = split_held_out(triples, 0.1, 0)
    assert held is not None
    assert summary["initial"]["held_out_loss"] == pytest.approx(evaluate(start, held, "pqr", 1.0)["loss"], abs=1e-5)
    code, _, text = nnue_train(capsys, "--data", str(games), "--out", str(tmp_path / "bad.npz"), "--loss", "pqr",
                               "--init", str(scored), "--l1", "8", "--activation", "screlu")
    assert code == 2 and "--l1 8 (the net has 16)" in text and "--activation screlu (the net has crelu)" in text


@pytest.mark.parametrize("arch, buckets", [("perspective", 1), ("perspective", 4), ("simple", 1), ("layered", 1)])
def test_a_widened_net_computes_what_the_narrow_one_did(arch, buckets) -> None:
    from alphazero.learn.nnue_train import widen

    torch.manual_seed(3)
    narrow = NNUENet(NNUEConfig(arch=arch, l1=16, l2=8, buckets=buckets))
    with torch.no_grad():  # a trained net's output layer is far from zero: make every reader of L1 matter
        for parameter in narrow.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    arrays = {name: array for name, array in narrow.to_arrays().items()}
    wide_arrays = widen(arrays, arch, 40, seed=0)
    wide = NNUENet.from_arrays(wide_arrays, NNUEConfig(arch=arch, l1=40, l2=8, buckets=buckets))
    assert wide_arrays["ft_weight"].shape == (768, 40)
    assert np.array_equal(wide_arrays["ft_weight"][:, :16], arrays["ft_weight"])
    assert wide_arrays["ft_weight"][:, 16:].std() > 0.05  # the new units are random, not dead
    boards = [chess.Board(), chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3"),
              chess.Board("4k3/8/8/8/8/8/4q3/4K3 w - - 0 1")]
    for board in boards:
        inputs = features_of(board)
        bucket = torch.tensor([output_bucket(len(board.piece_map()), buckets)]) if buckets > 1 else None
        with torch.no_grad():
            assert float(wide(*inputs, bucket=bucket)) == pytest.approx(float(narrow(*inputs, bucket=bucket)), abs=1e-5)
    with pytest.raises(ValueError, match="not wider"):
        widen(arrays, arch, 16, seed=0)


def test_init_with_a_wider_l1_fine_tunes_the_grown_net_from_where_the_narrow_one_stood(tmp_path, capsys) -> None:
    data = evals_head(tmp_path / "evals.csv", 150)
    narrow = tmp_path / "narrow.npz"
    code, first, text = nnue_train(capsys, "--data", str(data), "--out", str(narrow), "--epochs", "2", *SMALL)
    assert code == 0, text
    code, summary, text = nnue_train(capsys, "--data", str(data), "--out", str(tmp_path / "wide.npz"), "--init",
                                     str(narrow), "--l1", "48", "--epochs", "1", "--lr", "1e-4", "--batch-size", "64",
                                     "--keep-noisy")
    assert code == 0, text
    assert load_nnue(tmp_path / "wide.npz").l1 == 48
    # Grown, it starts where the narrow net stopped: the same held-out rows, the same loss.
    assert summary["initial"]["held_out_loss"] == pytest.approx(first["final"]["held_out_loss"], abs=1e-6)


def test_init_with_king_buckets_added_starts_as_the_net_it_grew_from_and_learns_them(tmp_path, capsys) -> None:
    data = evals_head(tmp_path / "evals.csv", 150)
    plain = tmp_path / "plain.npz"
    code, first, text = nnue_train(capsys, "--data", str(data), "--out", str(plain), "--epochs", "2", *SMALL)
    assert code == 0, text
    code, summary, text = nnue_train(capsys, "--data", str(data), "--out", str(tmp_path / "kb.npz"), "--init", str(plain),
                                     "--features", "all+kb", "--epochs", "1", "--lr", "1e-3", "--batch-size", "64", "--keep-noisy")
    assert code == 0, text
    grown, start = load_nnue(tmp_path / "kb.npz"), load_nnue(plain)
    assert grown.features.spec == "all+kb" and grown.arrays["ft_weight"].shape == (768 * 5, 16)
    # It starts where the plain net stopped (the king rows are zero), and the king rows then learn.
    assert summary["initial"]["held_out_loss"] == pytest.approx(first["final"]["held_out_loss"], abs=1e-6)
    assert np.abs(grown.arrays["ft_weight"][768:]).max() > 0
    assert not np.array_equal(grown.arrays["ft_weight"][:768], start.arrays["ft_weight"])
    for spec in ("kb+all", "pv"):  # only blocks after the net's own may be added
        code, _, text = nnue_train(capsys, "--data", str(data), "--out", str(tmp_path / "bad.npz"), "--init", str(plain),
                                   "--features", spec)
        assert code == 2 and f"--features {spec} (the net has all)" in text


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, capsys) -> None:
    data = evals_head(tmp_path / "evals.csv", 120)
    common = ["--data", str(data), "--seed", "7", *SMALL]
    assert nnue_train(capsys, *common, "--out", str(tmp_path / "whole.npz"), "--epochs", "3")[0] == 0
    assert nnue_train(capsys, *common, "--out", str(tmp_path / "parts.npz"), "--epochs", "1")[0] == 0
    code, summary, text = nnue_train(capsys, *common, "--out", str(tmp_path / "parts.npz"), "--epochs", "3")
    assert code == 0 and "resuming" in text and "after epoch 1" in text
    whole, parts = load_nnue(tmp_path / "whole.npz"), load_nnue(tmp_path / "parts.npz")
    for name, array in whole.arrays.items():
        assert np.array_equal(array, parts.arrays[name]), name

    def losses(name: str) -> list:
        return [(m["epoch"], m["train_loss"], m["held_out_loss"])
                for m in map(json.loads, (tmp_path / name / "metrics.jsonl").read_text().splitlines())]

    assert losses("whole.train") == losses("parts.train")
    code, _, text = nnue_train(capsys, *common, "--out", str(tmp_path / "parts.npz"), "--epochs", "4", "--lr", "0.01")
    assert code == 2 and "other lr" in text and "--restart" in text


@pytest.mark.parametrize("line, message", [
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1,,1,a1a8,,", "6 fields, expected 7"),
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 x - - 0 1,,1,a1a8,,,", "illegal FEN"),
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1,twelve,,a1a8,,,", "bad score"),
])
def test_a_malformed_data_line_is_named_and_nothing_is_written(tmp_path, capsys, line, message) -> None:
    data = tmp_path / "labels.csv"
    write_label_csv(data, LABEL_ROWS[:2])
    data.write_text(data.read_text() + line + "\n" + ",".join(LABEL_ROWS[2]) + "\n")
    out = tmp_path / "out" / "net.npz"
    code, _, text = nnue_train(capsys, "--data", str(data), "--out", str(out), *SMALL)
    assert code == 2
    error = text.strip().splitlines()[-1]
    assert error.startswith("alphazero nnue: error: ") and f"{data}:4: " in error and message in error
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputError, match=re.escape(f"{data}:4: ")):
        read_source(data, parse_features("all"))


def test_a_bad_feature_spec_exits_2_and_writes_nothing(tmp_path, capsys) -> None:
    data = evals_head(tmp_path / "evals.csv", 10)
    code, _, text = nnue_train(capsys, "--data", str(data), "--out", str(tmp_path / "out" / "net.npz"), "--features", "all+pw")
    assert code == 2 and len(text.strip().splitlines()) == 1
    assert "alphazero nnue: error: feature set 'all+pw': unknown block 'pw'" in text
    assert not (tmp_path / "out").exists()


def test_the_help_quotes_the_trainers_defaults() -> None:
    train = build_parser()._subparsers._group_actions[0].choices["nnue"]._subparsers._group_actions[0].choices["train"]
    text = " ".join(train.format_help().split())
    defaults = TrainOptions(data=(), out="")
    for quoted in ("all", "perspective", defaults_l1 := "128", "32", "crelu", "10", "1e-3", "0.95", "4096", "0.1"):
        assert f"default {quoted}" in text, quoted
    assert (defaults.features, defaults.arch, defaults.activation) == (None, None, None)  # resolved in resolve_config
    from alphazero.learn import nnue_train as trainer

    assert (trainer.DEFAULT_FEATURES, trainer.DEFAULT_ARCH, str(trainer.DEFAULT_L1), trainer.DEFAULT_L2,
            trainer.DEFAULT_ACTIVATION) == ("all", "perspective", defaults_l1, 32, "crelu")
    assert (defaults.epochs, defaults.lr, defaults.lr_decay, defaults.batch_size, defaults.held_out, defaults.wdl_lambda,
            defaults.threads, defaults.seed, defaults.loss) == (10, 1e-3, 0.95, 4096, 0.1, 1.0, 1, 0, "sigmoid-mse")


def test_training_throughput_is_measured() -> None:
    assert nnue_train_positions_per_s(threads=1, batch_size=256, steps=3) > 0


def test_data_without_a_target_for_the_loss_is_refused_before_anything_is_written(tmp_path, capsys) -> None:
    games = tmp_path / "games.pgn"
    games.write_text(PGN)
    code, _, text = nnue_train(capsys, "--data", str(games), "--out", str(tmp_path / "out" / "net.npz"), "--loss", "score")
    assert code == 2 and "no positions with a target for --loss score" in text
    assert not (tmp_path / "out").exists()


def test_noisy_positions_are_left_out_unless_kept(tmp_path, capsys) -> None:
    # Quiet: nothing to take, not in check. Noisy: the best move takes; the side to move is in check.
    rows = ["fen,cp_stm,best_uci",
            "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1,100,e2e4",
            "4k3/8/8/3p4/4P3/8/8/4K3 w - - 0 1,120,e4d5",
            "4k3/8/8/8/8/8/4r3/4K3 w - - 0 1,-500,e1e2",
            "4k3/8/8/8/8/8/3P4/4K3 b - - 0 1,-90,e8d7"]
    data = tmp_path / "mixed.csv"
    data.write_text("\n".join(rows) + "\n")
    common = ["--data", str(data), "--epochs", "1", "--held-out", "0", "--l1", "8", "--batch-size", "2"]
    code, summary, text = nnue_train(capsys, *common, "--out", str(tmp_path / "quiet.npz"))
    assert code == 0, text
    assert summary["positions"] == 4 and summary["train_positions"] == 2  # the capture and the check left out
    assert ", 2 noisy dropped;" in text and "without a target" not in text  # said as what they are
    code, summary, text = nnue_train(capsys, *common, "--out", str(tmp_path / "all.npz"), "--keep-noisy")
    assert code == 0, text
    assert summary["train_positions"] == 4


def test_a_large_row_file_is_held_out_in_blocks_of_consecutive_rows(tmp_path, monkeypatch) -> None:
    import alphazero.learn.nnue_data as nnue_data

    lines = np.arange(2, 9_002)  # a 9,000-row CSV's line numbers (line 1 the header)
    assert np.array_equal(nnue_data.row_blocks(np.arange(2, 902)), np.arange(2, 902))  # under 1,000: by row
    blocks = nnue_data.row_blocks(lines)
    assert np.array_equal(blocks, lines // 9) and len(np.unique(blocks)) >= nnue_data.MIN_ROW_GROUPS
    assert len(np.unique(nnue_data.row_blocks(np.arange(2, 5_000_000)))) == 5_000_000 // nnue_data.ROW_BLOCK + 1
    # Through read_source (a smaller floor so that a small file is blocked): rows 3 at a time, a mirrored
    # copy in its original's block, and the split holds out whole blocks.
    monkeypatch.setattr(nnue_data, "MIN_ROW_GROUPS", 4)
    fens = [f"4k3/8/8/8/8/8/{i or ''}P{7 - i or ''}/4K3 w - - 0 1" for i in range(8)]  # a pawn on a2 .. h2
    path = tmp_path / "rows.csv"
    path.write_text("fen,cp_stm\n" + "".join(f"{fen},{10 * i}\n" for i, fen in enumerate(fens * 2)))
    data = read_source(path, parse_features("all"), mirror=True)
    assert data.num_positions == 32 and list(data.groups) == [line // 4 for line in range(2, 18) for _ in range(2)]
    train, held = split_held_out(data, 0.25, 0)
    assert held is not None and set(held.groups).isdisjoint(set(train.groups))
    assert all(np.sum(held.groups == g) == 2 * np.sum((np.arange(2, 18) // 4) == g) for g in set(held.groups))


def test_mirroring_adds_each_position_without_castling_rights_flipped_in_its_own_group(tmp_path, capsys) -> None:
    rows = ["fen,cp_stm,best_uci",
            "4k3/8/8/8/8/8/1P6/4K3 w - - 0 1,100,b2b4",  # no castling rights: flipped
            "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2,40,e5d6",  # en passant on d6: flipped to e6
            "r3k3/8/8/8/8/8/8/4K2R w Kq - 0 1,10,e1g1"]  # castling rights: kept as it is
    path = tmp_path / "sym.csv"
    path.write_text("\n".join(rows) + "\n")
    fs = parse_features("all+pv")
    plain = read_source(path, fs)
    mirrored = read_source(path, fs, mirror=True)
    assert plain.num_positions == 3 and mirrored.num_positions == 5
    assert list(mirrored.groups) == [2, 2, 3, 3, 4] and list(mirrored.score_cp) == [100, 100, 40, 40, 10]
    # The flipped rows are the features of python-chess's own horizontal flip of each position.
    for row, fen in ((1, rows[1]), (3, rows[2])):
        flipped = chess.Board(fen.split(",")[0]).transform(chess.flip_horizontal)
        expected = batch_features([flipped], fs).position(0)
        got = mirrored.features.take(np.array([row]))
        assert list(got.stm_index) == list(expected[0]) and list(got.nstm_index) == list(expected[1])
        assert list(expected[0]) != list(batch_features([chess.Board(fen.split(",")[0])], fs).position(0)[0])
    games = tmp_path / "games.pgn"  # games give python-chess boards: the same rule
    games.write_text(PGN + '\n[Event "e"]\n[SetUp "1"]\n[FEN "4k3/8/8/8/8/8/1P6/4K3 w - - 0 1"]\n[Result "*"]\n\n1. b4 Ke7 *\n')
    assert read_source(games, fs, mirror=True).num_positions == read_source(games, fs).num_positions + 3
    common = ["--data", str(path), "--epochs", "1", "--held-out", "0", "--l1", "8", "--batch-size", "2", "--keep-noisy"]
    code, summary, text = nnue_train(capsys, *common, "--out", str(tmp_path / "m.npz"), "--mirror")
    assert code == 0, text
    assert summary["positions"] == 5 and summary["train_positions"] == 5
    code, summary, text = nnue_train(capsys, *common, "--out", str(tmp_path / "p.npz"))  # the same cache dir
    assert code == 0, text
    assert summary["positions"] == 3
