"""Writes that matter: atomic replacement, appended JSON lines, and the lock of a directory's writer; and
the checks on the files a user names (an input that is a file of text, an output that can be written).

Every file the project writes (replay shards, checkpoints, state, plots, PGN) goes through
``atomic_write``: a temp file in the same directory, fsync, rename. A kill at any moment leaves the
previous version. A write that fails (a full disk, an I/O error, a read-only mount) raises
``OSError`` naming the file it was meant for (not the temp file), so the run can stop with one line
that says which file and why; the temp file is removed and the previous version stays.

``DirectoryLock`` is the one-writer rule: an exclusive ``flock`` held for the life of the process,
released by the kernel when the process dies (a SIGKILL leaves no stale lock).

``input_file`` and ``text_lines`` read what a user hands in: a path that is not a file, or text that
is not UTF-8 (a binary file given where text was meant), raises ``InputError`` naming the file and the
line, as ``output_file`` does for an output path. This module knows nothing of runs or torch.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import socket
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Generator

from alphazero.errors import InputError, RunStateError


def _named(error: OSError, path: Path) -> OSError:
    """The same error, naming ``path`` (the file the caller meant to write)."""
    return OSError(error.errno or errno.EIO, error.strerror or str(error), str(path))


@functools.cache
def _new_file_mode() -> int:
    """The mode ``open`` gives a new file under this process's umask (0644 under the usual 022)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write(handle)`` on a temp file beside ``path``, fsync it, and rename it over ``path``. The
    file gets the mode a plain ``open`` would give it (``mkstemp``'s own 0600 would hide it from others)."""
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as error:
        raise _named(error, path) from error
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def output_file(path: str | os.PathLike, what: str = "output") -> Path:
    """``path`` as a file the caller may write later, checked now, before any work: not a directory (nor
    named like one, ``out/``), and its folder, if it exists, is a folder. Raises ``InputError`` naming
    ``what`` (e.g. ``--pgn``) so that a long job never finishes only to find nowhere to put its result."""
    text = os.fspath(path)
    resolved = Path(text)
    if text.endswith(os.sep) or resolved.is_dir():
        raise InputError(f"{what} {text} is a directory; give a file name")
    parent = resolved.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # atomic_write creates missing folders
    if not parent.is_dir():
        raise InputError(f"{what} {text}: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{what} {text}: {parent} is not writable")
    return resolved


def input_file(path: str | os.PathLike, what: str = "input file") -> Path:
    """``path`` as a file to read, checked: it exists and is not a directory. Raises ``InputError`` naming
    ``what`` (e.g. ``opening file``)."""
    resolved = Path(path)
    if resolved.is_dir():
        raise InputError(f"{what} {os.fspath(path)} is a directory; give a file")
    if not resolved.is_file():
        raise InputError(f"{what} {os.fspath(path)} does not exist")
    return resolved


def text_lines(path: str | os.PathLike, what: str = "input file") -> Generator[str, None, None]:
    """The lines of the UTF-8 text file ``path``, line ends kept (so ``csv.reader`` may read them, as from a
    file opened with ``newline=""``). A line that is not UTF-8 raises ``InputError`` naming the file and
    the line (a binary file given as text stops at its first line, not with a ``UnicodeDecodeError``). A
    byte-order mark before the first line (a CSV saved by a spreadsheet) is dropped."""
    with open(input_file(path, what), "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise InputError(f"{os.fspath(path)}:{number}: not a text file (byte 0x{error.object[error.start]:02x} is not "
                                 f"UTF-8); the {what} must be text") from None


def read_text(path: str | os.PathLike, what: str = "input file") -> str:
    """The whole UTF-8 text of ``path``, checked as ``text_lines`` checks it (``InputError`` naming the line)."""
    return "".join(text_lines(path, what))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def append_jsonl(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Append one JSON line. A torn last line left by a kill is closed first (and skipped by
    ``read_jsonl``), so the new record never merges into it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+b") as handle:
            if handle.tell() > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
            handle.write((json.dumps(record) + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        raise _named(error, path) from error


def read_jsonl(path: str | os.PathLike, what: str = "JSON-lines file") -> list[dict[str, Any]]:
    """Every complete JSON line of ``path`` (none if it does not exist); torn lines are skipped. A file that is
    not text (``append_jsonl`` writes ASCII) raises ``InputError`` naming it as the ``what`` it should be."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in text_lines(path, what):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class LockedError(RunStateError):
    """Another live process holds the lock; the message names the directory, host and PID."""


class DirectoryLock:
    """An exclusive lock on ``directory`` for one kind of writer (``what``: "train", "ratings").

    The lock file (``directory/.NAME.lock``) holds the holder's host and PID, for the message a
    second writer gets. ``flock`` locks belong to the open file: the kernel drops them when the
    process ends, however it ends, so there is never a stale lock to clean up. (On a network file
    system flock may be local to one host: run one driver per run directory there by hand.)
    """

    def __init__(self, directory: str | os.PathLike, what: str) -> None:
        self.directory = Path(directory)
        self.what = what
        self.path = self.directory / f".{what}.lock"
        self._handle: IO[str] | None = None

    def acquire(self) -> "DirectoryLock":
        """Take the lock or raise ``LockedError``; creates the directory if needed."""
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown process"
            handle.close()
            raise LockedError(f"{self.directory} is in use by another {self.what} ({holder}); "
                              "one writer per directory") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"host {socket.gethostname()} pid {os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file drops the flock
            self._handle = None

    def __enter__(self) -> "DirectoryLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
