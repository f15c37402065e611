"""Settings every test process needs before anything in it touches Ray, and the one warm-up compile.

Ray reads its token-authentication mode once per process: a test that started Ray with the default
mode and a later one that set ``RAY_AUTH_MODE=disabled`` made every actor of the second Ray die
unstarted ("cancelled before it started running"). So the mode is fixed here, for the whole session
and for every subprocess the tests start.

``compiled_search``: the compiled search (numba) that self-play and arena actors run, compiled once in
this process, or loaded from numba's cache, before a test starts actors. In a fresh clone every actor
would otherwise compile it at the same time, each for tens of seconds on the same two cores.

``one_line_error``: a command run in-process that must fail as a user's mistake does (exit 2, one line).

Under pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``) every test marked ``ray`` goes to one
worker, one after another (``pytest_collection_modifyitems``): two Ray clusters at once on two cores would
slow each other's actors past the tests' waits, and a module's shared cluster is started once. The other
tests share out over both workers beside them.
"""

import os
from dataclasses import replace
from pathlib import Path

import pytest

os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

SMOKE = Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session")
def compiled_search() -> None:
    import chess

    from alphazero.config import load_config
    from alphazero.judge.players import MCTSPlayer
    from alphazero.nets.evaluator import NetworkEvaluator
    from alphazero.nets.network import PolicyValueNet
    from alphazero.search.selfplay import SelfPlayer

    config = load_config(SMOKE)
    net = PolicyValueNet(config.network)
    player = SelfPlayer(NetworkEvaluator(net, backend=config.search.backend), config.search, config.selfplay, seed=0)
    player.play(1, max_seconds=30.0)
    arena = replace(config.search, num_simulations=config.arena.num_simulations)
    MCTSPlayer(net, arena).choose_moves([chess.Board(), chess.Board("4k3/8/8/8/8/8/8/R3K3 w Q - 0 1")])


@pytest.fixture()
def one_line_error(capsys):
    """``one_line_error(*argv)`` runs ``alphazero ARGV`` in this process, asserts that it exits with status 2
    and prints exactly one line, ``alphazero CMD: error: ...``, on stderr (no traceback), and returns it."""
    from commands.main import main

    def run(*argv: str) -> str:
        code = main(list(argv))
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"alphazero {argv[0]}: error: "), captured
        return lines[0]

    return run
