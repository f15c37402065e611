"""Players from spec strings: every kind picks legal moves for a batch; bad specs say what is wrong."""

from __future__ import annotations

import shutil

import chess
import pytest
import torch

from alphazero.board import encoding
from alphazero.board.game import MATE_CP
from alphazero.config import NetworkConfig
from alphazero.judge.players import make_player
from alphazero.nets.network import PolicyValueNet, load_network, save_network
from commands.main import main

# Installed by .ci/run (apt-get install stockfish); a missing engine fails these tests, never skips them.
STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_net(tmp_path_factory) -> str:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("net") / "tiny.pt"
    save_network(PolicyValueNet(NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16)), path)
    return str(path)


def _positions() -> list[chess.Board]:
    boards = [chess.Board()]
    board = chess.Board()
    for san in ("e4", "e5", "Bc4", "Nc6", "Qh5", "Nf6"):  # White mates with Qxf7#
        board.push_san(san)
    boards.append(board)
    boards.append(chess.Board("4k3/8/8/8/8/8/3q4/4K3 w - - 0 1"))  # White must take the queen or move
    return boards


@pytest.mark.parametrize("kind", ["random", "greedy", "policy", "mcts", "gumbel"])
def test_every_kind_plays_legal_moves_in_a_batch(kind, tiny_net) -> None:
    spec = {"policy": f"policy:{tiny_net}", "mcts": f"mcts:{tiny_net}?sims=8&cpuct=1.5",
            "gumbel": f"mcts:{tiny_net}?sims=8&algorithm=gumbel"}.get(kind, kind)
    player = make_player(spec, seed=0)
    boards = _positions()
    fens = [board.fen() for board in boards]
    moves = player.choose_moves(boards)
    player.close()
    assert len(moves) == len(boards)
    for board, move, fen in zip(boards, moves, fens):
        assert move in board.legal_moves
        assert board.fen() == fen  # boards are read, never changed
    assert player.name == spec


def test_greedy_mates_in_one_and_takes_the_most_material() -> None:
    player = make_player("greedy", seed=0)
    boards = _positions()
    mate, capture = player.choose_moves(boards[1:])
    assert mate.uci() == "h5f7"
    assert capture.uci() == "e1d2"


def test_uci_player_with_options_and_depth_finds_the_mate() -> None:
    player = make_player(f"uci:{STOCKFISH}?Skill Level=20&Hash=16&depth=6")
    try:
        assert player.choose_moves([_positions()[1]]) == [chess.Move.from_uci("h5f7")]
        assert player.last_scores == [MATE_CP - 1]  # its mate in one, as python-chess and the adjudication count it
    finally:
        player.close()


def test_engines_report_their_scores_for_the_side_to_move() -> None:
    """What the arena's adjudication reads: Stockfish's and our alpha-beta's scores of a queen up, from
    either side's view; players without a score report none."""
    up = chess.Board("4k3/8/8/8/8/8/3Q4/4K3 w - - 0 1")  # White a queen up
    down = up.copy()
    down.turn = chess.BLACK
    for spec in (f"uci:{STOCKFISH}?depth=6", "ab:material?depth=4"):
        player = make_player(spec)
        try:
            player.choose_moves([up, down])
            white_view, black_view = player.last_scores
            assert white_view > 600 and black_view < -600, (spec, player.last_scores)
        finally:
            player.close()
    assert getattr(make_player("greedy"), "last_scores", None) is None


@pytest.mark.parametrize("spec, words", [
    ("bogus", ["unknown kind 'bogus'", "mcts, policy, random, greedy, uci"]),
    ("random:5", ["random takes no"]),
    ("mcts:/no/such/net.pt?sims=4", ["mcts:/no/such/net.pt?sims=4", "no network file", "/no/such/net.pt"]),
    ("mcts:", ["missing network path"]),
    ("uci:/no/such/engine", ["could not be started", "/no/such/engine"]),
    ("uci:", ["missing engine command"]),
])
def test_bad_spec_names_what_is_wrong(spec, words) -> None:
    with pytest.raises(ValueError) as error:
        make_player(spec)
    for word in words:
        assert word in str(error.value)


def test_bad_network_parameter_is_named(tiny_net) -> None:
    with pytest.raises(ValueError, match="unknown parameter 'simz'"):
        make_player(f"mcts:{tiny_net}?simz=4")
    with pytest.raises(ValueError, match="sims='many' is not a valid int"):
        make_player(f"mcts:{tiny_net}?sims=many")
    with pytest.raises(ValueError, match="policy takes no parameters"):
        make_player(f"policy:{tiny_net}?sims=4")
    with pytest.raises(ValueError, match="algorithm must be puct or gumbel, got 'mcts'"):
        make_player(f"mcts:{tiny_net}?algorithm=mcts")
    with pytest.raises(ValueError, match="mates must be 0 or 1, got 'yes'"):
        make_player(f"mcts:{tiny_net}?mates=yes")
    assert make_player(f"mcts:{tiny_net}?mates=0").mcts.config.mate_in_one is False  # type: ignore[attr-defined]
    assert make_player(f"mcts:{tiny_net}").mcts.config.mate_in_one is True  # type: ignore[attr-defined]


def test_network_players_take_the_inference_settings(tiny_net) -> None:
    """``precision``, ``channels_last`` and ``backend`` reach the search's config (and so its evaluator),
    so two players of one network at two precisions can meet in an arena; a bad value or pairing is named
    before the network is read."""
    player = make_player(f"mcts:{tiny_net}?sims=8&precision=bf16&channels_last=1")
    config = player.mcts.config  # type: ignore[attr-defined]
    assert (config.precision, config.channels_last) == ("bf16", True)
    assert player.choose_moves([chess.Board()])[0] in chess.Board().legal_moves
    with pytest.raises(ValueError, match="search.precision must be auto, fp32, fp16, bf16 or int8, got 'fp8'"):
        make_player("mcts:/no/such/net.pt?precision=fp8")
    with pytest.raises(ValueError, match="run in the torch backend"):
        make_player(f"mcts:{tiny_net}?backend=onnx&precision=bf16")
    with pytest.raises(ValueError, match="channels_last must be 0 or 1"):
        make_player(f"mcts:{tiny_net}?channels_last=yes")


def test_a_network_players_policy_temperature_reaches_its_evaluator(tiny_net) -> None:
    player = make_player(f"mcts:{tiny_net}?sims=8&pst=1.6")
    assert player.mcts.config.policy_temperature == 1.6  # type: ignore[attr-defined]
    assert player.evaluator.policy_temperature == 1.6  # type: ignore[attr-defined]
    assert player.choose_moves([chess.Board()])[0] in chess.Board().legal_moves
    with pytest.raises(ValueError, match="pst must be positive"):
        make_player(f"mcts:{tiny_net}?pst=0")


def test_a_network_players_fpu_reaches_its_search(tiny_net) -> None:
    """``fpu=F`` is the first-play urgency the search gives an unvisited move (its parent's value less F);
    0 and below are values, as lc0's are; outside (-1, 2) or not a number is named."""
    for fpu in (-0.2, 0.0, 0.6):
        player = make_player(f"mcts:{tiny_net}?sims=8&pst=2&fpu={fpu}")
        assert player.mcts.config.fpu_reduction == fpu  # type: ignore[attr-defined]
        assert player.choose_moves([chess.Board()])[0] in chess.Board().legal_moves
    for bad in ("-1", "2", "x"):
        with pytest.raises(ValueError, match="fpu must be in \\(-1, 2\\)"):
            make_player(f"mcts:{tiny_net}?fpu={bad}")


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_a_network_player_with_reuse_searches_on_from_the_kept_subtree(tiny_net, algorithm) -> None:
    """``reuse=1``: after the opponent's reply the subtree under it is the root, and the search adds its
    simulations to the visits it already had (PUCT); Gumbel's statistics start afresh, but the kept
    evaluations spare network calls. Without it (the default) every move is a fresh search of N."""
    rows = {}
    visits = {}
    for reuse in (0, 1):
        player = make_player(f"mcts:{tiny_net}?sims=48&algorithm={algorithm}&reuse={reuse}")
        searched: list[int] = []
        search, forward = player.mcts.search, player.evaluator.forward  # type: ignore[attr-defined]

        def spy(trees, *args, **kwargs):
            results = search(trees, *args, **kwargs)
            searched.extend(int(result.visit_counts.sum()) for result in results)
            return results

        calls = []

        def counting_forward(planes, *args, **kwargs):
            calls.append(len(planes))
            return forward(planes, *args, **kwargs)

        player.mcts.search = spy  # type: ignore[attr-defined]
        player.evaluator.forward = counting_forward  # type: ignore[attr-defined]
        board = chess.Board()
        board.push(player.choose_moves([board])[0])
        reply = next(iter(board.legal_moves))  # a reply the search may or may not have explored
        board.push(reply)
        move = player.choose_moves([board])[0]
        assert move in board.legal_moves
        other = chess.Board("4k3/8/8/8/8/8/3q4/4K3 w - - 0 1")  # another game: no kept tree, a fresh search
        player.choose_moves([other])
        rows[reuse], visits[reuse] = sum(calls), searched
        player.close()
    if algorithm == "puct":
        assert visits[0][1] == 48 and visits[0][2] == 48
        assert visits[1][1] > 48  # the reply's subtree kept its visits
        assert visits[1][2] == 48
    else:
        assert rows[1] < rows[0]  # kept evaluations: fewer network rows for the same searches
    with pytest.raises(ValueError, match="reuse must be 0 or 1"):
        make_player(f"mcts:{tiny_net}?reuse=2")


def test_a_network_players_mu_sets_the_material_heads_share_of_the_value(tiny_net) -> None:
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    heads_net = load_network(tiny_net).eval()
    planes = torch.from_numpy(encoding.planes_from_features([encoding.board_features(board)]))
    with torch.no_grad():
        heads = heads_net.forward_training(planes, soft_policy=False)
    v, m = float(heads.value[0]), float(heads.material[0])
    assert abs(v - m) > 1e-3  # the two heads differ, so the share shows in the value
    for mu in (0.0, 0.3, 1.0):
        player = make_player(f"mcts:{tiny_net}?sims=8&mu={mu}")
        value = player.evaluator.policy([board])[0][2]  # type: ignore[attr-defined]
        assert value == pytest.approx((1 - mu) * v + mu * m, abs=1e-4)
        assert player.choose_moves([board])[0] in board.legal_moves
    for bad in ("1.5", "-0.1", "x"):
        with pytest.raises(ValueError, match="mu must be in \\[0, 1\\]"):
            make_player(f"mcts:{tiny_net}?mu={bad}")


def test_mu_needs_a_material_head(tmp_path) -> None:
    path = tmp_path / "plain.pt"
    save_network(PolicyValueNet(NetworkConfig(blocks=1, channels=8, policy_channels=8, value_hidden=16, material_head=False,
                                              material_utility=0.0)), path)
    with pytest.raises(ValueError, match="mu needs a network with a material head"):
        make_player(f"mcts:{path}?mu=0.5")
    assert make_player(f"mcts:{path}?sims=4&mu=0").choose_moves([chess.Board()])[0] in chess.Board().legal_moves


@pytest.mark.parametrize("query, key", [("sims=1&sims=2", "sims"), ("sims=1&nodes=2", "nodes"), ("cpuct=1&c_puct=2", "c_puct")])
def test_a_repeated_network_parameter_is_named(tiny_net, query, key) -> None:
    with pytest.raises(ValueError, match=f"{key} is given twice"):
        make_player(f"mcts:{tiny_net}?{query}")


@pytest.mark.parametrize("spec, key", [("ab:material?depth=3&depth=4", "depth"),
                                       ("uci:/usr/games/stockfish?movetime=1&movetime=2", "movetime"),
                                       ("uci:/usr/games/stockfish?Hash=16&hash=32", "hash")])
def test_a_repeated_spec_key_is_one_line_naming_it(one_line_error, spec, key) -> None:
    """Which of two values a player would take is a guess; the spec is refused before any game."""
    assert f"{key} is given twice" in one_line_error("arena", spec, "random", "--games", "2")


def test_run_directory_without_state_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ValueError, match="state.json: missing"):
        make_player(f"mcts:{tmp_path}")


def test_bad_uci_option_name_and_value_are_named() -> None:
    with pytest.raises(ValueError, match="has no option 'Skil Level'") as error:
        make_player(f"uci:{STOCKFISH}?Skil Level=3")
    assert "Skill Level" in str(error.value)  # the engine's real options are listed
    with pytest.raises(ValueError, match="Skill Level"):
        make_player(f"uci:{STOCKFISH}?Skill Level=strong")
    with pytest.raises(ValueError, match="movetime must be positive"):
        make_player(f"uci:{STOCKFISH}?movetime=0")


def test_bad_spec_on_the_command_line_exits_2(capsys) -> None:
    assert main(["arena", "bogus", "random", "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert "alphazero arena: error" in err and "unknown kind 'bogus'" in err
    assert main(["puzzles", "/work/shared/data/puzzles-dev.csv", "--player", "mcts:/no/such.pt"]) == 2
    assert "no network file" in capsys.readouterr().err
