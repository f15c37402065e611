"""The layout's floors: imports run one way, down.

The core package ``alphazero`` never reaches Ray, ``workers`` or the command line (``commands``), so a
core class runs, and is tested, without a cluster. Inside it the rooms stand on floors, ground up:
``errors``, ``fileio`` and ``config`` (every section config) < ``board`` < ``nets`` < ``checkpoint`` <
``search`` < ``judge`` < ``learn`` and ``serve`` (peers) < ``bench``, then ``workers`` < ``commands``. A
module may import its own room and the floors below it, never a floor above or another room on its own
floor. Every import counts, those inside functions too: a lazy import upward is still an upward dependency.

Also a house rule that reading finds: every attribute of an object is first set in its ``__init__``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import alphazero

ROOT = Path(alphazero.__file__).parent.parent
FORBIDDEN = ("ray", "workers", "commands")
# Room -> floor. A room is a package or a top-level module; the ground floor is one room.
FLOORS = {
    "alphazero": 0, "alphazero.errors": 0, "alphazero.fileio": 0, "alphazero.config": 0,
    "alphazero.board": 1,
    "alphazero.nets": 2,
    "alphazero.checkpoint": 3,
    "alphazero.search": 4,
    "alphazero.judge": 5,
    "alphazero.learn": 6,
    "alphazero.serve": 6,  # a peer of learn: neither imports the other
    "alphazero.bench": 7,
    "workers": 8,
    "commands": 9,
}
GROUND = {"alphazero", "alphazero.errors", "alphazero.fileio", "alphazero.config"}

PROBE = """
import importlib, json, pkgutil, sys
import alphazero
names = sorted(info.name for info in pkgutil.walk_packages(alphazero.__path__, "alphazero."))
for name in names:
    importlib.import_module(name)
forbidden = sorted(module for module in sys.modules if module.split(".")[0] in {forbidden!r})
print(json.dumps({{"imported": names, "forbidden": forbidden}}))
"""


def room(module: str) -> str | None:
    """The room of a project module (the longest prefix in ``FLOORS``; the ground is one room), else None."""
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        if prefix in FLOORS:
            return "ground" if prefix in GROUND else prefix
    return None


def floor(room_name: str) -> int:
    return 0 if room_name == "ground" else FLOORS[room_name]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in the file of ``module``, at any depth, relative ones resolved."""
    package = module.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found.append((node.lineno, target))
            # ``from alphazero import board`` imports the room ``alphazero.board``
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names
                      if room(f"{target}.{alias.name}") not in (None, room(target))]
    return found


def layering_violations() -> list[str]:
    problems = []
    for top in ("alphazero", "workers", "commands"):
        for path in sorted((ROOT / top).rglob("*.py")):
            importer = room(module_name(path))
            assert importer is not None, f"{path} is in no room of FLOORS"
            for line, target in imports(path, module_name(path)):
                imported = room(target)
                if imported is None or imported == importer:
                    continue
                if floor(imported) >= floor(importer):
                    problems.append(f"{path.relative_to(ROOT)}:{line} ({importer}, floor {floor(importer)}) imports "
                                    f"{target} ({imported}, floor {floor(imported)})")
    return problems


def test_imports_run_down_the_floors() -> None:
    assert layering_violations() == []


def test_the_floor_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: an import from a higher floor, even inside a function, is found."""
    source = tmp_path / "probe.py"
    source.write_text("import chess\n\ndef f():\n    from alphazero.learn.replay import write_shard\n"
                      "    from ..board import encoding\n    from alphazero import judge\n")
    found = [target for _, target in imports(source, "alphazero.search.probe")]
    assert found == ["chess", "alphazero.learn.replay", "alphazero.board", "alphazero", "alphazero.judge"]
    search = room("alphazero.search.probe")
    assert [room(target) for target in found] == [None, "alphazero.learn", "alphazero.board", "ground", "alphazero.judge"]
    assert floor(room("alphazero.learn.replay")) > floor(search) > floor(room("alphazero.board.encoding")) > 0
    assert room("alphazero.config") == room("alphazero.errors") == "ground"


def attributes_first_set_outside_init(source: str) -> list[str]:
    """``Class.attr (method:line)`` for every ``self.attr`` a method other than ``__init__`` assigns while
    neither ``__init__`` nor the class body does (dataclasses declare theirs in the body)."""
    found = []
    for cls in (node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)):
        declared = {target.id for node in cls.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(target, ast.Name)}
        first: dict[str, tuple[str, int]] = {}
        for method in (node for node in cls.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(method):
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                for target in (item for t in targets for item in (t.elts if isinstance(t, ast.Tuple) else [t])):
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                        if method.name == "__init__":
                            declared.add(target.attr)
                        else:
                            first.setdefault(target.attr, (method.name, node.lineno))
        found += [f"{cls.name}.{attr} ({method}:{line})" for attr, (method, line) in first.items() if attr not in declared]
    return found


def test_every_attribute_is_first_set_in_init() -> None:
    """A reader finds an object's whole state in its ``__init__`` (or its dataclass fields)."""
    problems = [f"{path.relative_to(ROOT)}: {found}" for top in ("alphazero", "workers", "commands")
                for path in sorted((ROOT / top).rglob("*.py")) for found in attributes_first_set_outside_init(path.read_text())]
    assert problems == []


def test_the_attribute_check_sees_a_late_attribute() -> None:
    source = ("class A:\n    x: int = 0\n    def __init__(self):\n        self.y, self.z = 1, 2\n"
              "    def go(self):\n        self.x = self.y = 3\n        self.late = 4\n")
    assert attributes_first_set_outside_init(source) == ["A.late (go:7)"]


def test_no_private_name_is_imported_from_another_module() -> None:
    """A leading underscore means "this module's own": no other module of the project imports it."""
    problems = []
    for top in ("alphazero", "workers", "commands"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and room(node.module or "alphazero") is not None:
                    problems += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}"
                                 for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert problems == []


def test_every_core_module_imports_without_ray_workers_or_commands() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE.format(forbidden=set(FORBIDDEN))],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    # The probe really walked the tree: every .py file under alphazero/ is one of the modules imported.
    root = Path(alphazero.__file__).parent
    files = {".".join(("alphazero", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
             for path in root.rglob("*.py")}
    assert files - {"alphazero"} <= set(report["imported"])
    assert report["forbidden"] == []
