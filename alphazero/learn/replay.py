"""The versioned on-disk shard format of game records, and the sampling window.

A shard is one ``.npz`` file (no pickles; ``allow_pickle=False`` on read) holding several finished
games, written atomically (temp file + rename) under ``RUN/replay/``. Per position it stores the packed
planes (``alphazero.board.encoding``, 122 bytes), the search's visit counts over the moves it visited as a
sparse list of ``(action uint16, count uint16)``, and ``z`` (int8, the final result for the side to
move). Per game: the network version that played it, its result and its PGN. Measured size is in
the README (well under 256 bytes per position with compression).

``ReplayWindow`` keeps the newest ``window_positions`` positions in memory (packed) and samples
uniformly from them, expanding to dense training tensors only for the sampled batch. It also derives
each position's material target (``material_targets``: the material balance ``material_horizon``
plies later in the same game, read from the stored planes), so that target needs nothing new on disk.
The moves-left head's target (plies from each position to the game's end, -1 where the game did not
finish) is stored per position as ``moves_left`` (int16); a shard written before it existed reads as
all unknown.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple, Sequence

import numpy as np

from alphazero.board import encoding
from alphazero.board.game import MAX_LENGTH
from alphazero.errors import InputError
from alphazero.fileio import atomic_write
from alphazero.search.records import GameRecord

SHARD_FORMAT_VERSION = 1
# Material target: tanh(balance in pawns / MATERIAL_SCALE), so a pawn is 0.2, a knight 0.54, a rook 0.76.
MATERIAL_SCALE = 5.0
# Bytes of the packed planes (alphazero.board.encoding): the constant planes follow the 14 bitboards.
_TURN_BYTE = 14 * 8 + encoding.CONSTANT_PLANES.index(12)
_BALANCE_BYTE = 14 * 8 + encoding.CONSTANT_PLANES.index(15)
_PLY_BYTE = 14 * 8 + encoding.CONSTANT_PLANES.index(23)
_SHARD_NAME = re.compile(r"^shard-(\d{8})\.npz$")


def write_shard(path: str | os.PathLike, games: Sequence[GameRecord]) -> None:
    """Write ``games`` as one compressed shard, atomically."""
    if not games:
        raise ValueError("a shard needs at least one game")
    position_counts = np.array([g.num_positions for g in games], dtype=np.int64)
    policy_lengths = np.concatenate([np.diff(g.policy_offsets) for g in games]).astype(np.int64)
    meta = {
        "results": [g.result for g in games],
        "terminations": [g.termination for g in games],
        "pgns": [g.pgn for g in games],
        "plies": [g.plies for g in games],
        "extra": [g.extra for g in games],
    }
    arrays: dict[str, np.ndarray] = {
        "format_version": np.array([SHARD_FORMAT_VERSION], dtype=np.int32),
        "encoding_version": np.array([encoding.ENCODING_VERSION], dtype=np.int32),
        "game_positions": position_counts,
        "network_versions": np.array([g.network_version for g in games], dtype=np.int32),
        "planes": np.concatenate([g.planes for g in games]).astype(np.uint8),
        "policy_lengths": policy_lengths.astype(np.uint16),
        "policy_actions": np.concatenate([g.policy_actions for g in games]).astype(np.uint16),
        "policy_counts": np.concatenate([g.policy_counts for g in games]).astype(np.uint16),
        "z": np.concatenate([g.z for g in games]).astype(np.int8),
        "root_values": np.concatenate([g.root_values for g in games]).astype(np.float16),
        "moves_left": np.concatenate([np.full(g.num_positions, -1, np.int16) if g.moves_left is None
                                      else g.moves_left for g in games]).astype(np.int16),
        "meta": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
    }
    # numpy's stub checks **arrays against savez_compressed's allow_pickle keyword
    atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))  # type: ignore[arg-type]


@dataclass
class Shard:
    """A shard as loaded: flat per-position arrays plus per-game metadata."""

    path: Path
    planes: np.ndarray  # uint8 [P, 122]
    policy_offsets: np.ndarray  # int64 [P + 1]
    policy_actions: np.ndarray  # uint16
    policy_counts: np.ndarray  # uint16
    z: np.ndarray  # int8 [P]
    root_values: np.ndarray  # float16 [P]
    game_positions: np.ndarray  # int64 [G]
    network_versions: np.ndarray  # int32 [G]
    results: list[str]
    terminations: list[str]
    pgns: list[str]
    plies: list[int]
    moves_left: np.ndarray  # int16 [P]: plies to the game's end, -1 where unknown
    known: np.ndarray | None = None  # cached result_known, set by ReplayWindow.add
    material: np.ndarray | None = None  # cached material_targets, set by ReplayWindow.add

    @property
    def num_positions(self) -> int:
        return int(self.planes.shape[0])

    @property
    def result_known(self) -> np.ndarray:
        """``bool [P]``: False for positions of games stopped at the length limit (no real result)."""
        finished = np.array([t != MAX_LENGTH for t in self.terminations], dtype=bool)
        return np.repeat(finished, self.game_positions)

    @property
    def num_games(self) -> int:
        return int(self.game_positions.shape[0])


def read_shard(path: str | os.PathLike) -> Shard:
    """Load a shard; a truncated, corrupt or foreign file raises ``InputError`` naming it."""
    path = Path(path)
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive")
        with loaded as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, zlib.error) as error:
        raise InputError(f"replay shard {path} is unreadable or corrupt: {error}") from None
    try:
        version = int(arrays["format_version"][0])
        if version != SHARD_FORMAT_VERSION:
            raise InputError(f"replay shard {path}: format_version {version}, expected {SHARD_FORMAT_VERSION}")
        if int(arrays["encoding_version"][0]) != encoding.ENCODING_VERSION:
            raise InputError(f"replay shard {path}: made with another encoding version")
        meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
        lengths = arrays["policy_lengths"].astype(np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        shard = Shard(
            path=path,
            planes=arrays["planes"],
            policy_offsets=offsets,
            policy_actions=arrays["policy_actions"],
            policy_counts=arrays["policy_counts"],
            z=arrays["z"],
            root_values=arrays["root_values"],
            game_positions=arrays["game_positions"].astype(np.int64),
            network_versions=arrays["network_versions"],
            results=list(meta["results"]),
            terminations=list(meta["terminations"]),
            pgns=list(meta["pgns"]),
            plies=list(meta["plies"]),
            moves_left=(arrays["moves_left"] if "moves_left" in arrays
                        else np.full(len(arrays["z"]), -1, dtype=np.int16)),
        )
    except (KeyError, json.JSONDecodeError, UnicodeDecodeError, IndexError) as error:
        raise InputError(f"replay shard {path} is missing data: {error}") from None
    total = int(shard.game_positions.sum())
    if not (shard.planes.shape == (total, encoding.PACKED_SIZE) and len(shard.z) == len(shard.moves_left) == total
            and len(lengths) == total and offsets[-1] == len(shard.policy_actions) == len(shard.policy_counts)):
        raise InputError(f"replay shard {path} is inconsistent (array sizes disagree)")
    return shard


def shard_paths(replay_dir: str | os.PathLike) -> list[Path]:
    """Shards in ``replay_dir`` in sequence order (temporary files of interrupted writes are ignored)."""
    replay_dir = Path(replay_dir)
    if not replay_dir.is_dir():
        return []
    return sorted(p for p in replay_dir.iterdir() if _SHARD_NAME.match(p.name))


def next_shard_path(replay_dir: str | os.PathLike) -> Path:
    """The path of the shard after the last one in ``replay_dir`` (lists the directory: slow with many shards)."""
    paths = shard_paths(replay_dir)
    last = _SHARD_NAME.match(paths[-1].name) if paths else None  # shard_paths lists only names that match
    number = int(last.group(1)) + 1 if last else 0
    return Path(replay_dir) / f"shard-{number:08d}.npz"


def following_shard_path(path: str | os.PathLike) -> Path:
    """The path of the shard numbered one after ``path`` (a shard's name), in the same directory."""
    match = _SHARD_NAME.match(Path(path).name)
    if match is None:
        raise ValueError(f"{path} is not a shard's name")
    return Path(path).with_name(f"shard-{int(match.group(1)) + 1:08d}.npz")


def material_targets(planes: np.ndarray, game_positions: np.ndarray, horizon: int) -> np.ndarray:
    """``float32 [P]``: for each stored position, ``tanh(balance / MATERIAL_SCALE)`` where balance is the
    material difference (P=1, N=B=3, R=5, Q=9, the encoder's plane 15) for the side to move at that
    position, taken at the first stored position of the same game at least ``horizon`` plies later
    (the game's last stored position when it ends sooner). Games that stopped at the length limit
    count too: unlike z, the balance is known for every game.
    """
    turn_white = planes[:, _TURN_BYTE].astype(bool)
    mover_balance = planes[:, _BALANCE_BYTE].astype(np.float32) - 128.0
    white_balance = np.where(turn_white, mover_balance, -mover_balance)
    if horizon == 0:
        return np.tanh(mover_balance / MATERIAL_SCALE).astype(np.float32)
    ply = planes[:, _PLY_BYTE].astype(np.int64)  # min(ply, 255): increasing within a game below 255
    later = np.empty(len(planes), dtype=np.int64)
    start = 0
    for count in game_positions.tolist():
        end = start + count
        found = np.searchsorted(ply[start:end], ply[start:end] + horizon, side="left")
        later[start:end] = start + np.minimum(found, count - 1)
        start = end
    balance = np.where(turn_white, white_balance[later], -white_balance[later])
    return np.tanh(balance / MATERIAL_SCALE).astype(np.float32)


class Batch(NamedTuple):
    """A uniform sample of the window (``ReplayWindow.sample``)."""

    planes: np.ndarray  # uint8 [B, 24, 8, 8]
    pi: np.ndarray  # float32 [B, 4672]: the search's visit distribution
    z: np.ndarray  # float32 [B]: game result for the side to move
    q: np.ndarray  # float32 [B]: root search value for the side to move
    known: np.ndarray  # bool [B]: False where the game was stopped at the length limit
    material: np.ndarray  # float32 [B]: material_targets
    moves_left: np.ndarray  # float32 [B]: plies to the game's end, -1 where unknown


class ReplayWindow:
    """The newest ``capacity`` positions of a run, sampled uniformly for training.

    ``add(shard)`` appends a loaded shard and drops the oldest shards that fall entirely outside
    the window; ``sample(batch, rng)`` returns dense training arrays for a uniform sample.
    """

    def __init__(self, capacity: int, material_horizon: int = 8) -> None:
        self.capacity = capacity
        self.material_horizon = material_horizon
        self.shards: list[Shard] = []
        self._starts = np.zeros(1, dtype=np.int64)

    @property
    def num_positions(self) -> int:
        return int(min(self.capacity, sum(s.num_positions for s in self.shards)))

    def add(self, shard: Shard) -> None:
        shard.known = shard.result_known
        shard.material = material_targets(shard.planes, shard.game_positions, self.material_horizon)
        self.shards.append(shard)
        total = sum(s.num_positions for s in self.shards)
        while self.shards and total - self.shards[0].num_positions >= self.capacity:
            total -= self.shards.pop(0).num_positions
        self._starts = np.concatenate(([0], np.cumsum([s.num_positions for s in self.shards])))

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """A uniform sample of the window (fields in ``Batch``)."""
        total = int(self._starts[-1])
        if total == 0:
            raise ValueError("the replay window is empty")
        window = min(total, self.capacity)
        flat = rng.integers(total - window, total, size=batch_size)  # newest `window` positions
        shard_index = np.searchsorted(self._starts, flat, side="right") - 1
        packed = np.empty((batch_size, encoding.PACKED_SIZE), dtype=np.uint8)
        pi = np.zeros((batch_size, encoding.NUM_ACTIONS), dtype=np.float32)
        z = np.empty(batch_size, dtype=np.float32)
        q = np.empty(batch_size, dtype=np.float32)
        known = np.empty(batch_size, dtype=bool)
        material = np.empty(batch_size, dtype=np.float32)
        moves_left = np.empty(batch_size, dtype=np.float32)
        for row, (s, position) in enumerate(zip(shard_index, flat - self._starts[shard_index])):
            shard = self.shards[s]
            packed[row] = shard.planes[position]
            z[row] = shard.z[position]
            q[row] = shard.root_values[position]
            known[row] = shard.known[position]
            material[row] = shard.material[position]
            moves_left[row] = shard.moves_left[position]
            lo, hi = shard.policy_offsets[position], shard.policy_offsets[position + 1]
            counts = shard.policy_counts[lo:hi].astype(np.float32)
            pi[row, shard.policy_actions[lo:hi]] = counts / counts.sum()
        return Batch(encoding.unpack_planes(packed), pi, z, q, known, material, moves_left)


INFLIGHT_FORMAT_VERSION = 1


def write_inflight(path: str | os.PathLike, slots: Sequence[Sequence[dict]]) -> None:
    """Save the self-play games in flight of every actor slot (``SelfPlayer.snapshot`` each), atomically.

    One ``.npz``: the policy targets of all games concatenated (uint16), everything else as JSON.
    Written by the driver after each play call and before that call's finished games go into a
    shard, so a game is never both in flight and finished on disk.
    """
    games = [dict(game, slot=slot) for slot, slot_games in enumerate(slots) for game in slot_games]
    meta = [{key: value for key, value in game.items() if key not in ("target_actions", "target_counts")}
            for game in games]
    arrays: dict[str, np.ndarray] = {
        "format_version": np.array([INFLIGHT_FORMAT_VERSION], dtype=np.int32),
        "target_actions": np.concatenate([g["target_actions"] for g in games] or [np.zeros(0)]).astype(np.uint16),
        "target_counts": np.concatenate([g["target_counts"] for g in games] or [np.zeros(0)]).astype(np.uint16),
        "meta": np.frombuffer(json.dumps({"num_slots": len(slots), "games": meta}, separators=(",", ":")).encode("utf-8"),
                              dtype=np.uint8),
    }
    # Rewritten after every pass over finished play calls, for every actor: the fastest compression (a
    # third the time of savez_compressed's level 6, a file twice the size; measured in docs/RESULTS.md).
    atomic_write(path, lambda handle: _save_npz(handle, arrays, compresslevel=1))


def _save_npz(handle: IO[bytes], arrays: dict[str, np.ndarray], compresslevel: int) -> None:
    """``np.savez_compressed``'s archive (one ``NAME.npy`` per array, deflated), at ``compresslevel``."""
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def read_inflight(path: str | os.PathLike) -> list[list[dict]]:
    """The games in flight per actor slot (empty if there is no file); a damaged file raises ``InputError``."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        with np.load(path, allow_pickle=False) as data:
            if int(data["format_version"][0]) != INFLIGHT_FORMAT_VERSION:
                raise ValueError(f"format_version {int(data['format_version'][0])}, expected {INFLIGHT_FORMAT_VERSION}")
            meta = json.loads(data["meta"].tobytes().decode("utf-8"))
            actions, counts = data["target_actions"], data["target_counts"]
        slots: list[list[dict]] = [[] for _ in range(meta["num_slots"])]
        start = 0
        for game in meta["games"]:
            end = start + int(sum(game["target_lengths"]))
            slots[game.pop("slot")].append(dict(game, target_actions=actions[start:end], target_counts=counts[start:end]))
            start = end
        if start != len(actions) or len(actions) != len(counts):
            raise ValueError("policy targets do not add up")
        return slots
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, zlib.error, json.JSONDecodeError) as error:
        raise InputError(f"games in flight {path} are unreadable or corrupt: {error}") from None
