"""The import rules of the layout: the core package ``alphazero`` never reaches Ray, ``workers`` or the
command line (``commands``), so a core class runs, and is tested, without a cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import alphazero

FORBIDDEN = ("ray", "workers", "commands")

PROBE = """
import importlib, json, pkgutil, sys
import alphazero
names = sorted(info.name for info in pkgutil.walk_packages(alphazero.__path__, "alphazero."))
for name in names:
    importlib.import_module(name)
forbidden = sorted(module for module in sys.modules if module.split(".")[0] in {forbidden!r})
print(json.dumps({{"imported": names, "forbidden": forbidden}}))
"""


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

