"""Settings every test process needs before anything in it touches Ray.

Ray reads its token-authentication mode once per process: a test that started Ray with the default
mode and a later one that set ``RAY_AUTH_MODE=disabled`` made every actor of the second Ray die
unstarted ("cancelled before it started running"). So the mode is fixed here, for the whole session
and for every subprocess the tests start.
"""

import os

import pytest

os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


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
