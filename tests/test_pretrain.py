"""`alphazero pretrain` from a label CSV and from PGN games, and `train --init` from its network."""

from __future__ import annotations

import json
import math
from pathlib import Path

import chess
import numpy as np
import pytest
import torch

from alphazero.board import encoding
from alphazero.config import NetworkConfig, load_config
from alphazero.learn.pretrain import (
    _row_value,
    first_learner,
    load_init_network,
    read_pgn_data,
    split_held_out,
)
from alphazero.nets.network import PolicyValueNet, load_network, save_network
from commands.main import main

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"
TINY = ["--config", str(SMOKE), "--set", "network.blocks=1", "--set", "network.channels=8", "--set", "network.policy_channels=8",
        "--set", "network.value_channels=2", "--set", "network.value_hidden=16", "--set", "train.optimizer=adamw",
        "--set", "train.learning_rate=0.01", "--set", "train.batch_size=8"]
TINY_OVERRIDES = [item for item in TINY[2:] if item != "--set"]

# fen, score_cp, mate, best_uci, wdl_win, wdl_draw, wdl_loss (as `alphazero label` writes them)
ROWS = [
    ("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", "-23", "", "c7c5", "3", "969", "28"),
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", "", "1", "a1a8", "1000", "0", "0"),
    ("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3", "65", "", "f1b5", "", "", ""),
    ("4k3/8/8/8/8/8/4q3/4K3 w - - 0 1", "", "", "e1e2", "", "", ""),  # no score: trains the policy only
    ("rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2", "30", "", "g1f3", "", "", ""),
]
PGN = ('[Event "a"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n'
       '[Event "b"]\n[Result "1/2-1/2"]\n\n1. d4 d5 2. c4 c6 1/2-1/2\n\n'
       '[Event "c"]\n[Result "0-1"]\n\n1. f3 e5 2. g4 Qh4# 0-1\n\n'
       '[Event "d"]\n[Result "*"]\n\n1. e4 c5 *\n')


def write_csv(path, rows) -> None:
    path.write_text("fen,score_cp,mate,best_uci,wdl_win,wdl_draw,wdl_loss\n" + "".join(",".join(row) + "\n" for row in rows))


def pretrain(capsys, *args: str) -> tuple[int, dict | None, str]:
    code = main(["pretrain", *args])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out.strip().splitlines()[-1]) if code == 0 else None), captured.out + captured.err


def move_probability(net: PolicyValueNet, fen: str, uci: str) -> float:
    board = chess.Board(fen)
    net.eval()
    with torch.no_grad():
        logits, _ = net(torch.from_numpy(encoding.encode_boards([board])))
    return torch.softmax(logits[0], dim=0)[encoding.move_to_action(board, chess.Move.from_uci(uci))].item()


def test_value_targets_from_wdl_mate_and_centipawns() -> None:
    column = {name: index for index, name in enumerate(["fen", "score_cp", "mate", "best_uci", "wdl_win", "wdl_draw", "wdl_loss"])}
    assert _row_value(["f", "50", "", "m", "500", "400", "100"], column, "x") == pytest.approx(0.4)  # WDL wins over cp
    assert _row_value(["f", "", "-3", "m", "", "", ""], column, "x") == -1.0
    assert _row_value(["f", "", "2", "m", "", "", ""], column, "x") == 1.0
    assert _row_value(["f", "400", "", "m", "", "", ""], column, "x") == pytest.approx(2 / (1 + math.exp(-0.00368208 * 400)) - 1)
    assert _row_value(["f", "", "", "m", "", "", ""], column, "x") is None
    # value_from "cp": the centipawns even where the row has WDL; a mate is still +-1.
    assert _row_value(["f", "400", "", "m", "990", "10", "0"], column, "x", "cp") == pytest.approx(math.tanh(0.00184104 * 400))
    assert _row_value(["f", "", "-3", "m", "0", "0", "1000"], column, "x", "cp") == -1.0
    with pytest.raises(ValueError, match="x: bad score"):
        _row_value(["f", "12.5cp", "", "m", "", "", ""], column, "x")


def test_pretrain_csv_moves_the_policy_toward_the_labels(tmp_path, capsys) -> None:
    data, out = tmp_path / "labels.csv", tmp_path / "net.pt"
    write_csv(data, ROWS)
    code, summary, text = pretrain(capsys, str(data), "--out", str(out), "--epochs", "30", "--held-out", "0", *TINY)
    assert code == 0, text
    assert "epoch 30/30" in text and summary["train_positions"] == 5 and summary["held_out_positions"] == 0
    net = load_network(out)  # the safe format: weights_only, no code
    config = load_config(SMOKE, TINY_OVERRIDES)
    torch.manual_seed(config.seed)  # the network pretraining started from
    start = PolicyValueNet(config.network)
    for row in ROWS:
        assert move_probability(net, row[0], row[3]) > 2 * move_probability(start, row[0], row[3])
    assert summary["final"]["train_policy_loss"] < summary["initial"]["policy_loss"]
    # What the players and the UCI engine load: the raw policy now plays the labelled move.
    from alphazero.judge.players import make_player

    player = make_player(f"policy:{out}")
    assert player.choose_moves([chess.Board(ROWS[1][0])]) == [chess.Move.from_uci("a1a8")]
    assert make_player(f"mcts:{out}?sims=4").choose_moves([chess.Board()])[0] in chess.Board().legal_moves


def test_pretrain_pgn_holds_out_whole_games(tmp_path, capsys) -> None:
    games, out = tmp_path / "games.pgn", tmp_path / "net.pt"
    games.write_text(PGN)
    data = read_pgn_data(games)
    assert data.num_positions == 7 + 4 + 4 + 2  # positions before a move (final mates have none)
    white_first = data.values[data.groups == 2]
    assert list(white_first) == [-1.0, 1.0, -1.0, 1.0]  # 0-1, from the side to move
    assert not data.known[data.groups == 3].any() and data.known[data.groups != 3].all()  # result *: policy only
    train, held = split_held_out(data, 0.25, seed=load_config(SMOKE).seed)  # the split the command makes
    assert held is not None and set(held.groups).isdisjoint(set(train.groups))
    assert train.num_positions + held.num_positions == data.num_positions
    code, summary, text = pretrain(capsys, str(games), "--out", str(out), "--epochs", "2", "--held-out", "0.25", *TINY)
    assert code == 0, text
    assert summary["kind"] == "pgn" and summary["held_out_positions"] == held.num_positions
    assert "held-out p" in text and summary["final"]["held_out"]["policy_loss"] > 0
    assert load_network(out).config == load_config(SMOKE, TINY_OVERRIDES).network


@pytest.mark.parametrize("line, message", [
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1,,1,a1a9,,,", "best_uci 'a1a9'"),
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1,,1,a1a8,,", "6 fields, expected 7"),
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 x - - 0 1,,1,a1a8,,,", "illegal FEN"),
    ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1,twelve,,a1a8,,,", "bad score"),
])
def test_a_malformed_data_line_is_named(tmp_path, capsys, line, message) -> None:
    data = tmp_path / "labels.csv"
    write_csv(data, ROWS[:2])
    data.write_text(data.read_text() + line + "\n" + ",".join(ROWS[2]) + "\n")
    code, _, text = pretrain(capsys, str(data), "--out", str(tmp_path / "net.pt"), *TINY)
    assert code == 2
    error = text.strip().splitlines()[-1]
    assert error.startswith("alphazero pretrain: error: ") and f"{data}:4: " in error and message in error
    assert not (tmp_path / "net.pt").exists()


def test_a_malformed_pgn_game_is_named(tmp_path, capsys) -> None:
    games = tmp_path / "games.pgn"
    games.write_text(PGN + '\n[Event "e"]\n[Result "1-0"]\n\n1. e4 e5 2. Ke3 1-0\n')
    code, _, text = pretrain(capsys, str(games), "--out", str(tmp_path / "net.pt"), *TINY)
    assert code == 2 and f"{games}:24: " in text and "starting at line 21" in text and "Ke3" in text


def test_train_init_refuses_a_network_of_another_shape(tmp_path, capsys) -> None:
    other = tmp_path / "other.pt"
    save_network(PolicyValueNet(NetworkConfig(blocks=2, channels=8, policy_channels=8, value_channels=2, value_hidden=16)), other)
    run_dir = tmp_path / "run"
    code = main(["train", "--config", str(SMOKE), "--run-dir", str(run_dir), "--init", str(other), "--oversubscribe"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "2x8 (blocks=2" in err and "1x16 (blocks=1" in err and str(other) in err  # both shapes named
    assert not (run_dir / "state.json").exists()


@pytest.mark.parametrize("ema_decay", [0.0, 0.99])
def test_init_network_becomes_the_learners_and_generation_zero(tmp_path, ema_decay: float) -> None:
    """What a new run from ``train --init`` starts from: generation 0 and learner.pt are the network (with the
    weights' moving average on too: it starts from the network, not from the seed's), and the learner actor
    that loads learner.pt trains those weights."""
    from alphazero.checkpoint import RunDirectory
    from alphazero.nets.network import net_to_payload
    from workers.actors import LearnerWorker

    config = load_config(SMOKE, [f"train.ema_decay={ema_decay}"])
    torch.manual_seed(123)
    init = PolicyValueNet(config.network)
    path = tmp_path / "init.pt"
    save_network(init, path)
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    first = first_learner(config, load_init_network(path, config.network))
    save_network(first.candidate_network(), run.network_path(0), {"generation": 0})
    torch.save(first.state_dict(), run.learner_path)
    saved = load_network(run.network_path(0)).state_dict()
    for key, value in init.state_dict().items():
        assert torch.equal(saved[key], value), key
    assert np.isclose(move_probability(load_network(run.network_path(0)), chess.STARTING_FEN, "e2e4"),
                      move_probability(init, chess.STARTING_FEN, "e2e4"))
    learner = LearnerWorker(str(run.path), config)
    assert learner.learner.step == 0
    for key, value in net_to_payload(learner.learner.candidate_network())["state_dict"].items():
        assert torch.equal(value, init.state_dict()[key]), key
    seeded = first_learner(config).candidate_network().state_dict()  # no --init: the seed's network
    assert not all(torch.equal(seeded[key], value) for key, value in init.state_dict().items())
    torch.manual_seed(config.seed)
    assert all(torch.equal(seeded[key], value) for key, value in PolicyValueNet(config.network).state_dict().items())
