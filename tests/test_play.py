"""`alphazero play` (``alphazero.serve.play``): a person plays a network; typed moves refused with a reason."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import chess
import chess.pgn
import pytest
import torch

from alphazero.config import NetworkConfig
from alphazero.errors import InputError
from alphazero.nets.network import PolicyValueNet, save_network
from alphazero.serve.play import parse_human_move
from commands.main import main

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)

torch.set_num_threads(1)


def _tiny_net(path: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    save_network(PolicyValueNet(TINY), path)
    return path


def test_human_move_reasons() -> None:
    board = chess.Board()
    for san in ("d4", "e5", "Nf3", "Bb4+"):
        board.push_san(san)
    with pytest.raises(InputError, match="ambiguous move Nd2: could be Nbd2 or Nfd2"):
        parse_human_move(board, "Nd2")
    with pytest.raises(InputError, match="you are in check"):
        parse_human_move(board, "e3")
    assert parse_human_move(board, "c3") == chess.Move.from_uci("c2c3")
    assert parse_human_move(board, "Nfd2") == parse_human_move(board, "f3d2")
    promotion = chess.Board("8/4P3/8/8/8/8/k7/4K3 w - - 0 1")
    with pytest.raises(InputError, match="e7e8q"):
        parse_human_move(promotion, "e7e8")
    assert parse_human_move(promotion, "e8=N").promotion == chess.KNIGHT
    pinned = chess.Board("4r1k1/8/8/8/8/8/4N3/4K3 w - - 0 1")
    with pytest.raises(InputError, match="leave your king in check"):
        parse_human_move(pinned, "Nc3")
    with pytest.raises(InputError, match="castling"):
        parse_human_move(chess.Board(), "O-O")
    with pytest.raises(InputError, match="e1 holds your own king"):
        parse_human_move(chess.Board(), "d1e1")


def test_play_through_standard_input(monkeypatch, capsys, tmp_path) -> None:
    net = _tiny_net(tmp_path / "tiny.pt", seed=0)
    pgn = tmp_path / "game.pgn"
    # an illegal move, a SAN move, a UCI move, an ambiguous move, nonsense, then quit
    monkeypatch.setattr(sys, "stdin", io.StringIO("e2e5\nd4\ng1f3\nNd2\nhello\nquit\n"))
    assert main(["play", "--checkpoint", str(net), "--sims", "4", "--pgn", str(pgn)]) == 0
    out = capsys.readouterr().out
    assert "illegal move e2e5: the pawn on e2 cannot move to e5" in out
    assert "ambiguous move Nd2: could be Nbd2 or Nfd2" in out
    assert "not a move: 'hello'" in out
    assert "8 | r n b q k b n r | 8" in out and "    a b c d e f g h" in out  # labelled, White at the bottom
    assert f"Game saved to {pgn}" in out
    game = chess.pgn.read_game(io.StringIO(pgn.read_text()))
    moves = [move.uci() for move in game.mainline_moves()]
    assert len(moves) == 4 and moves[0] == "d2d4" and moves[2] == "g1f3"
    assert game.headers["White"] == "human" and "alphazero" in game.headers["Black"]
    assert game.headers["Result"] == "*" and game.headers["Termination"] == "abandoned"


def test_play_as_black_ends_cleanly_at_end_of_input(tmp_path) -> None:
    net = _tiny_net(tmp_path / "tiny.pt", seed=1)
    result = subprocess.run([sys.executable, "-m", "commands.main", "play", "--checkpoint", str(net), "--sims", "4",
                             "--color", "black"], input="e5\n", capture_output=True, text=True, cwd=tmp_path,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    board_text = result.stdout
    assert "    h g f e d c b a" in board_text and board_text.index("\n1 | ") < board_text.index("\n8 | ")  # Black's side
    assert "8 | r n b k q b n r | 8" in board_text
    assert "End of input" in result.stdout
    saved = list(tmp_path.glob("game-*.pgn"))
    assert len(saved) == 1
    game = chess.pgn.read_game(io.StringIO(saved[0].read_text()))
    moves = [move.uci() for move in game.mainline_moves()]
    assert len(moves) == 3 and moves[1] == "e7e5" and game.headers["Black"] == "human"


def test_resign_scores_the_game_for_the_network(monkeypatch, capsys, tmp_path) -> None:
    net = _tiny_net(tmp_path / "tiny.pt", seed=2)
    pgn = tmp_path / "resigned.pgn"
    monkeypatch.setattr(sys, "stdin", io.StringIO("resign\n"))
    assert main(["play", "--checkpoint", str(net), "--sims", "2", "--pgn", str(pgn)]) == 0
    game = chess.pgn.read_game(io.StringIO(pgn.read_text()))
    assert game.headers["Result"] == "0-1" and game.headers["Termination"] == "resignation"
    assert main(["play", "--checkpoint", str(tmp_path / "missing.pt")]) == 2
    assert "no network file" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["dir/", "dir", "file.txt/game.pgn"])
def test_an_unwritable_pgn_path_stops_before_the_first_move(where, monkeypatch, capsys, tmp_path) -> None:
    """``--pgn`` naming a directory (or a path under a file) is one line and exit 2 before the game: no
    move is asked for or played, so no game is lost at the end."""
    net = _tiny_net(tmp_path / "tiny.pt", seed=3)
    (tmp_path / "dir").mkdir()
    (tmp_path / "file.txt").write_text("not a folder\n")
    typed = io.StringIO("d4\nquit\n")
    monkeypatch.setattr(sys, "stdin", typed)
    before = sorted(tmp_path.rglob("*"))
    pgn = str(tmp_path / where) + ("/" if where.endswith("/") else "")
    assert main(["play", "--checkpoint", str(net), "--sims", "2", "--pgn", pgn]) == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith("alphazero play: error: --pgn ") and "directory" in err[0], err
    assert captured.out == ""  # no board, no prompt, no move
    assert typed.read() == "d4\nquit\n"  # nothing was read from the player
    assert sorted(tmp_path.rglob("*")) == before


def test_play_any_player_spec(monkeypatch, capsys, tmp_path) -> None:
    """``--player SPEC`` plays any player, alpha-beta included; ``--checkpoint`` and ``--player`` are
    one or the other; a bad spec is one line and exit 2 before the first move."""
    pgn = tmp_path / "ab.pgn"
    # Scholar's mate, with the alpha-beta player to move as Black after each of ours
    monkeypatch.setattr(sys, "stdin", io.StringIO("e4\nBc4\nQh5\nquit\n"))
    assert main(["play", "--player", "ab:material?depth=3", "--pgn", str(pgn)]) == 0
    out = capsys.readouterr().out
    assert "against ab:material?depth=3" in out and "ab:material?depth=3 plays" in out
    game = chess.pgn.read_game(io.StringIO(pgn.read_text()))
    moves = [move.uci() for move in game.mainline_moves()]
    assert len(moves) == 6 and moves[0] == "e2e4" and game.headers["Black"] == "ab:material?depth=3"
    board = chess.Board()
    for move in moves:
        assert chess.Move.from_uci(move) in board.legal_moves
        board.push_uci(move)
    threat = chess.Move.from_uci("h5f7")  # Qxf7#, unless Black's last move saw it coming
    if threat in board.legal_moves:
        board.push(threat)
        assert not board.is_checkmate(), moves
    monkeypatch.setattr(sys, "stdin", io.StringIO("quit\n"))
    assert main(["play", "--player", "ab:nonsense", "--pgn", str(tmp_path / "x.pgn")]) == 2
    assert "unknown evaluation 'nonsense'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["play", "--player", "greedy", "--checkpoint", "net.pt"])
