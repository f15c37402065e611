"""The `alphazero` command's wiring: bench prints its figures, uci serves, a user's error exits 2 with one
line, and any other exception keeps its traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import chess
import pytest
import torch

from alphazero.config import NetworkConfig
from alphazero.nets.inference import int8_pays, native_cpu_precision
from alphazero.nets.network import PolicyValueNet, save_network
from commands.main import main

TINY = ["--set", "network.blocks=1", "--set", "network.channels=8", "--set", "network.policy_channels=8",
        "--set", "network.value_hidden=16", "--set", "search.num_simulations=8", "--set", "selfplay.games_per_worker=4"]


def test_bench_json_has_every_figure(capsys) -> None:
    assert main(["bench", "--json", "--seconds", "0.05", *TINY]) == 0
    figures = json.loads(capsys.readouterr().out)
    for key in ("encode_per_s", "net_batch1_per_s", "net_batched_per_s", "search_batch1_sims_per_s",
                "search_batched_sims_per_s", "search_batched_sims_per_s_python",
                "search_overhead_us_per_sim", "perft_nodes_per_s", "ab_nodes_per_s", "ab_nnue_nodes_per_s",
                "net_batched_per_s_torch", "net_batched_per_s_onnx", "net_batched_per_s_onnx_int8",
                "nnue_train_positions_per_s_1t",
                "nnue_train_positions_per_s_2t", "learner_samples_per_s"):
        assert figures[key] > 0, key
    # The configured search (self-play's default: gumbel) and the other algorithm beside it.
    assert figures["search_algorithm"] == "gumbel" and figures["search_batched_sims_per_s_puct"] > 0
    assert figures["selfplay_batch"] == 4 and figures["threads"] == 1 and figures["search_implementation"] == "auto"
    # self-play's auto on the CPU: ONNX Runtime int8 where the CPU has VNNI, else OpenVINO bf16 where it computes
    # bf16, else ONNX Runtime fp32
    native = native_cpu_precision()
    assert figures["device"] == "cpu" and figures["inference"] == ("int8" if int8_pays() else native)
    assert figures["backend"] == ("openvino" if native == "bf16" and not int8_pays() else "onnx")
    # the learner as a run resolves train.precision auto: bf16 channels-last where the CPU computes bf16
    assert figures["learner_precision"] == ("bf16+cl" if native == "bf16" else "fp32")


def test_bench_json_with_int8_search_reports_the_int8_figure(capsys) -> None:
    assert main(["bench", "--json", "--seconds", "0.05", *TINY, "--set", "search.precision=int8"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["backend"], figures["inference"]) == ("onnx", "int8")
    assert figures["net_batched_per_s"] == figures["net_batched_per_s_onnx_int8"] > 0
    assert figures["net_batched_per_s_torch"] > 0 and figures["search_batched_sims_per_s"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: --device cuda runs")
@pytest.mark.parametrize("argv", [["bench", "--device", "cuda"], ["bench", "--selfplay", "2", "--device", "cuda"]],
                         ids=["suite", "selfplay"])
def test_bench_on_cuda_without_cuda_is_one_line_and_exit_2(argv, one_line_error) -> None:
    assert "--device cuda" in one_line_error(*argv) and "sees no CUDA device" in one_line_error(*argv)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_train_with_gpu_shares_on_a_machine_without_a_gpu_is_refused_before_anything_starts(tmp_path,
                                                                                        one_line_error) -> None:
    line = one_line_error("train", "--config", str(ROOT / "configs" / "gpu.yaml"), "--run-dir", str(tmp_path / "run"))
    assert "asks for 1 GPU (4 self-play x 0.15 + learner 0.3 + arena 0.1)" in line and "has 0 GPUs" in line
    assert not (tmp_path / "run").exists()


def test_bad_config_key_exits_2_naming_it(capsys) -> None:
    assert main(["bench", "--seconds", "0.05", "--set", "search.simulations=3"]) == 2
    assert "search.simulations" in capsys.readouterr().err


def test_uci_subcommand_plays_a_legal_move(tmp_path) -> None:
    torch.manual_seed(0)
    path = tmp_path / "net.pt"
    save_network(PolicyValueNet(NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)), path)
    script = "uci\nisready\nposition startpos moves e2e4 e7e5\ngo nodes 16\n"
    process = subprocess.Popen([sys.executable, "-m", "commands.main", "uci", "--checkpoint", str(path)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        process.stdin.write(script)
        process.stdin.flush()
        best = None
        for line in process.stdout:
            if line.startswith("bestmove"):
                best = line.split()[1]
                break
        process.stdin.write("quit\n")
        process.stdin.flush()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    board = chess.Board()
    board.push_uci("e2e4")
    board.push_uci("e7e5")
    assert chess.Move.from_uci(best) in board.legal_moves


def test_uci_with_missing_checkpoint_exits_2(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "commands.main", "uci", "--checkpoint", str(tmp_path / "none.pt")],
                            input="quit\n", capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "none.pt" in result.stderr


def test_diagnose_reports_data_and_held_out_losses(tmp_path, capsys) -> None:
    """A run directory made of real self-play shards: the report counts them and trains on 80%."""
    from alphazero.checkpoint import RunDirectory
    from alphazero.config import load_config
    from alphazero.learn.replay import write_shard
    from alphazero.nets.evaluator import UniformEvaluator
    from alphazero.search.selfplay import SelfPlayer

    config = load_config(None, ["network.blocks=1", "network.channels=8", "network.policy_channels=8",
                                "network.value_hidden=16", "train.batch_size=32", "train.window_positions=1000",
                                "selfplay.max_plies=30", "selfplay.games_per_worker=4",
                                # Every game stops at 30 plies: their results must count for the value head.
                                "train.value_from_unfinished=true"])
    run = RunDirectory(tmp_path / "run")
    run.write_config(config)
    player = SelfPlayer(UniformEvaluator(), config.search.__class__(num_simulations=4), config.selfplay, seed=1)
    total_games = total_positions = 0
    for number in range(5):
        games = player.play(2)
        total_games += len(games)
        total_positions += sum(g.num_positions for g in games)
        write_shard(run.replay_dir / f"shard-{number:08d}.npz", games)
    assert main(["diagnose", str(run.path), "--steps", "2", "--rounds", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["data"]["games"] == total_games and report["data"]["positions"] == total_positions
    assert abs(sum(report["data"]["terminations"].values()) - 1.0) < 0.01
    assert [row["step"] for row in report["generalisation"]] == [2, 4]


BAD_FEN_CSV = "fen,best_uci\nrnbqkbnr/pppppppp/8/8 w KQkq - 0 1,e2e4\n"


@pytest.mark.parametrize("case", ["bad FEN", "bad spec", "missing network", "missing run", "bad actor counts"])
def test_a_users_error_exits_2_with_one_line(case, tmp_path, capsys) -> None:
    (tmp_path / "bad.csv").write_text(BAD_FEN_CSV)
    argv, fault = {
        "bad FEN": (["puzzles", str(tmp_path / "bad.csv"), "--player", "random"], "bad FEN"),
        "bad spec": (["arena", "greedy", "mcts:", "--games", "2"], "missing network path"),
        "missing network": (["play", "--checkpoint", str(tmp_path / "none.pt")], "none.pt"),
        "missing run": (["diagnose", str(tmp_path / "no-run")], "is " + str(tmp_path / "no-run") + " a run directory"),
        "bad actor counts": (["bench", "--selfplay", "1,two"], "--selfplay"),
    }[case]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"alphazero {argv[0]}: error: ") and fault in err[0], err


ROOT = Path(__file__).resolve().parent.parent
LABELS = "fen,score_cp,mate,best_uci,wdl_win,wdl_draw,wdl_loss\n6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1,,1,a1a8,1000,0,0\n"


@pytest.mark.parametrize("argv", [
    ["arena", "greedy", "random", "--games", "2", "--pgn", "OUT/"],
    ["tournament", "greedy", "random", "--games", "2", "--out", "OUT"],
    ["label", "DATA", "--labeller", "uci:/usr/games/stockfish?depth=1", "--out", "OUT/"],
    ["nnue", "train", "--data", "DATA", "--out", "OUT", "--epochs", "1"],
    ["pretrain", "DATA", "--config", str(ROOT / "configs/smoke.yaml"), "--out", "OUT/"],
    ["export", "--onnx", str(ROOT / "docs/nets/default-1h.pt"), "--out", "OUT"],
    ["ratings", "RUN", "--plot", "OUT"],
], ids=lambda argv: argv[0])
def test_an_output_that_is_a_directory_is_refused_before_any_work(argv, tmp_path, one_line_error) -> None:
    """Checked first, so a long match or training never ends with nowhere to put its result."""
    (tmp_path / "OUT").mkdir()
    (tmp_path / "DATA").write_text(LABELS)
    before = sorted(tmp_path.rglob("*"))
    places = {"OUT": str(tmp_path / "OUT"), "OUT/": f"{tmp_path / 'OUT'}/", "DATA": str(tmp_path / "DATA"),
              "RUN": str(tmp_path / "RUN")}
    message = one_line_error(*(places.get(word, word) for word in argv))
    assert "OUT" in message and "is a directory; give a file name" in message
    assert sorted(tmp_path.rglob("*")) == before  # nothing read into a cache, trained, played or written


def test_a_multi_line_message_is_printed_on_one_line(monkeypatch, capsys) -> None:
    import commands.puzzles
    from alphazero.errors import InputError

    def fail(args):
        raise InputError("first line\n  second line")

    monkeypatch.setattr(commands.puzzles, "run", fail)
    assert main(["puzzles", "x.csv", "--player", "random"]) == 2
    assert capsys.readouterr().err == "alphazero puzzles: error: first line second line\n"


@pytest.mark.parametrize("bug", [ValueError("an internal ValueError"), KeyError("internal"), FileNotFoundError("/internal")])
def test_a_bug_is_not_swallowed(bug, monkeypatch, tmp_path) -> None:
    """Only a UserError becomes one line: a ValueError, KeyError or OSError from inside is a bug and keeps
    its traceback (here: it reaches the caller of main)."""
    import alphazero.judge.puzzles

    def broken(*args, **kwargs):
        raise bug

    monkeypatch.setattr(alphazero.judge.puzzles, "score_puzzles", broken)
    puzzles = tmp_path / "one.csv"
    puzzles.write_text("fen,best_uci\n" + chess.STARTING_FEN + ",e2e4\n")
    with pytest.raises(type(bug)):
        main(["puzzles", str(puzzles), "--player", "random"])


def test_a_bug_prints_its_traceback_from_the_command(tmp_path) -> None:
    # A corrupt network file is the user's (exit 2, one line); the same command with a bug in it is not.
    script = ("import sys, alphazero.serve.play as play\n"
              "def broken(*a, **k): raise KeyError('bug')\n"
              "play.play_human = broken\n"
              "from commands.main import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    result = subprocess.run([sys.executable, "-c", script, "play", "--checkpoint", "x.pt"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr and "KeyError: 'bug'" in result.stderr


def test_bench_selfplay_network_plays_that_network_in_its_own_shape(monkeypatch, capsys) -> None:
    """``--network`` hands the file's network to the actors and the config takes its shape (a 4x48 here
    while configs/default.yaml says 3x32); without ``--selfplay`` it is refused."""
    import workers.bench

    seen = []

    def fake(config, num_actors, seconds, device="cpu", net=None):
        seen.append((config.network, net))
        return {"positions_per_s": 1.0}

    monkeypatch.setattr(workers.bench, "selfplay_throughput", fake)
    assert main(["bench", "--selfplay", "1", "--seconds", "1", "--network", str(ROOT / "docs/nets/amx-2h.pt"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (network, net), = seen
    assert net is not None and network == net.config and (network.blocks, network.channels) == (4, 48)
    assert report["network"] == "4x48" and report["weights"].endswith("amx-2h.pt")
    assert main(["bench", "--selfplay", "1", "--seconds", "1", "--json"]) == 0
    assert seen[1][1] is None and json.loads(capsys.readouterr().out)["weights"] == "random"
    assert main(["bench", "--network", str(ROOT / "docs/nets/amx-2h.pt")]) == 2
    assert "--network goes with --selfplay" in capsys.readouterr().err
