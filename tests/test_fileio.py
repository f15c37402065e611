"""Tests for ``alphazero.fileio``: atomic writes that name the file when they fail, JSON lines on a
full device, and the one-writer lock (released by the kernel when its holder is killed)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alphazero.errors import InputError
from alphazero.fileio import (
    DirectoryLock,
    LockedError,
    append_jsonl,
    atomic_write,
    atomic_write_text,
    input_file,
    output_file,
    read_jsonl,
    text_lines,
)


def test_failed_atomic_write_names_the_file_and_keeps_the_previous_version(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write_text(target, "old")

    def full_disk(handle) -> None:
        handle.write(b"half of the new")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as caught:
        atomic_write(target, full_disk)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert str(target) in str(caught.value) and "No space left" in str(caught.value)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temp file left behind


def test_atomic_write_into_a_path_that_cannot_be_a_directory_names_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError) as caught:
        atomic_write_text(tmp_path / "file" / "state.json", "new")
    assert caught.value.filename == str(tmp_path / "file" / "state.json")


def test_append_to_a_full_device_raises_enospc_naming_it() -> None:
    # /dev/full answers every write with ENOSPC: a real full disk, from the kernel.
    with pytest.raises(OSError) as caught:
        append_jsonl("/dev/full", {"event": "x"})
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == "/dev/full"


def test_read_jsonl_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append_jsonl(path, {"n": 1})
    with open(path, "a") as handle:
        handle.write('{"n": 2, "tor')
    append_jsonl(path, {"n": 3})
    assert read_jsonl(path) == [{"n": 1}, {"n": 3}]


_HOLDER = """
import sys, time
from alphazero.fileio import DirectoryLock
lock = DirectoryLock(sys.argv[1], "train").acquire()
print("locked", flush=True)
time.sleep(120)
"""


def test_lock_admits_one_holder_and_a_sigkill_releases_it(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(directory)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[1])
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockedError) as caught:
            DirectoryLock(directory, "train").acquire()
        message = str(caught.value)
        assert str(directory) in message and f"pid {holder.pid}" in message and socket.gethostname() in message
        # Another kind of writer has a lock of its own.
        DirectoryLock(directory, "ratings").acquire().release()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    deadline = time.time() + 10
    while True:  # the kernel drops the lock with the dead process: no stale lock to clean
        try:
            lock = DirectoryLock(directory, "train").acquire()
            break
        except LockedError:
            assert time.time() < deadline, "the lock of a killed process was not released"
            time.sleep(0.1)
    assert f"pid {os.getpid()}" in lock.path.read_text()
    lock.release()
    with DirectoryLock(directory, "train"):  # released: free again
        pass


def test_atomic_writes_get_the_mode_a_plain_open_gives(tmp_path: Path) -> None:
    # mkstemp makes 0600 files; a PGN or a network written atomically must be as readable as one written plainly.
    previous = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "atomic.txt", "x")
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(previous)
    assert (tmp_path / "atomic.txt").stat().st_mode & 0o777 == (tmp_path / "plain.txt").stat().st_mode & 0o777 == 0o644


def test_an_output_that_is_a_directory_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--pgn .* is a directory"):
        output_file(tmp_path, "--pgn")
    with pytest.raises(InputError, match="is a directory"):
        output_file(f"{tmp_path / 'new'}/", "--out")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="is not a directory"):
        output_file(tmp_path / "file" / "x.pgn", "--pgn")
    assert output_file(tmp_path / "a" / "b" / "games.pgn") == tmp_path / "a" / "b" / "games.pgn"  # folders are made later


def test_text_lines_name_the_line_that_is_not_text_and_inputs_must_be_files(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes("\ufefffen,best_uci\r\nx,é\n".encode() + b"\x89PNG\n")  # a BOM, CRLF, UTF-8, then binary
    lines = text_lines(path, "puzzle file")
    assert [next(lines), next(lines)] == ["fen,best_uci\r\n", "x,é\n"]
    with pytest.raises(InputError, match=f"{path}:3: not a text file .*0x89.*the puzzle file must be text"):
        next(lines)
    path.write_bytes(b"\xef\xbb\xbfab\xff\n")  # after a byte-order mark the bad byte is still the one named
    with pytest.raises(InputError, match="data.csv:1: not a text file .byte 0xff"):
        list(text_lines(path))
    with pytest.raises(InputError, match="opening file .* does not exist"):
        input_file(tmp_path / "none.epd", "opening file")
    with pytest.raises(InputError, match="opening file .* is a directory"):
        next(text_lines(tmp_path, "opening file"))
