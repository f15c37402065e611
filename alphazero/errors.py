"""Errors a user can fix, as one family.

The ``alphazero`` command prints a ``UserError`` as one line and exits with status 2; any other
exception is a bug and keeps its traceback. Raise the most specific class that says whose input was
wrong: the config, an input file or argument, or the state of a run directory.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the person running the command can fix; the message says what and how."""


class ConfigError(UserError, ValueError):
    """A config file, a ``--set`` override or a config that cannot run on this machine."""


class InputError(UserError, ValueError):
    """A bad argument or input file: an illegal FEN, a player spec, a malformed data line, a corrupt file."""


class RunStateError(UserError):
    """A run directory that cannot be used as asked: locked by another driver, missing, or unwritable."""
