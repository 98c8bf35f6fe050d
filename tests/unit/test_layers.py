"""The harness's layers stay true: each package imports only the packages below it, and no import circle.

harness/ is built in floors, lowest first; a package may import its own floor's modules and any floor below.
Packages that share a floor (a tuple) are independent rooms: they import none of each other. A function-level
import counts like any other (it is how a circle hides). `python tests/unit/test_layers.py` prints every arrow that
breaks a rule.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"
# record/ sits low on purpose: it renders what the run collected (run/collect.py) and queries nothing itself.
LAYERS: tuple[str | tuple[str, ...], ...] = (
    ("core", "sample"), "criteria", ("config", "record"), "cluster", "jobs", "sim", "targets", "backends",
    ("serving", "setup"), "scenarios", "run", "cli")
TOP = {"__init__": "core", "plugin": "run"}  # harness/__init__.py (the version); the plugin, the door to run/
DOORS = {"sim": ("targets",)}  # a package reached only through these (the sim is one target among others)
KNOWN: set[tuple[str, str]] = set()  # (importer, imported) arrows allowed while a move is under way: none left


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> set[str]:
    """The harness modules (or packages) `path` imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(root.name):
            module = node.module or ""
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                is_module = (root.parent / Path(*candidate.split("."))).with_suffix(".py").exists() or \
                    (root.parent / Path(*candidate.split(".")) / "__init__.py").exists()
                found.add(candidate if is_module else module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(root.name)}
    return found


def graph(root: Path = HARNESS) -> dict[str, set[str]]:
    return {module_name(p, root): imports(p, root) for p in sorted(root.rglob("*.py"))}


def floor_of(module: str) -> tuple[int, str]:
    """(floor, package) of a harness module: its first package under harness/."""
    parts = module.split(".")
    package = parts[1] if len(parts) > 1 else "__init__"
    package = TOP.get(package, package)
    for index, layer in enumerate(LAYERS):
        if package == layer or (isinstance(layer, tuple) and package in layer):
            return index, package
    raise AssertionError(f"{module}: package {package!r} is on no floor: add it to LAYERS in {__file__}")


def forbidden(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Arrows that go up a floor, across to another room of the same floor, or past a package's door."""
    bad = []
    for importer, targets in edges.items():
        low, room = floor_of(importer)
        for imported in targets:
            if imported == "harness":
                continue
            high, other = floor_of(imported)
            behind_door = other in DOORS and room != other and room not in DOORS[other]
            if high > low or (high == low and room != other) or behind_door:
                bad.append((importer, imported))
    return sorted(bad)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Import circles between modules (strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_arrow_goes_up_a_floor_or_across_a_floor() -> None:
    new = [edge for edge in forbidden(graph()) if edge not in KNOWN]
    assert not new, "imports against the layers (harness/ floors in tests/unit/test_layers.py):\n" + "\n".join(
        f"  {a} -> {b}" for a, b in new)


def test_known_exceptions_are_still_needed() -> None:
    stale = KNOWN - set(forbidden(graph()))
    assert not stale, f"arrows listed as known that are gone: drop them from KNOWN: {sorted(stale)}"


def test_no_import_circle() -> None:
    assert not circles(graph()), f"import circles: {circles(graph())}"


def test_the_check_fails_on_a_planted_circle_and_an_upward_arrow(tmp_path: Path) -> None:
    root = tmp_path / "harness"
    for package in ("core", "cluster"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "core" / "errors.py").write_text("from harness.cluster import seam\n")
    (root / "cluster" / "seam.py").write_text("def f() -> None:\n    from harness.core import errors\n")
    edges = graph(root)
    assert circles(edges) == [["harness.cluster.seam", "harness.core.errors"]]
    assert forbidden(edges) == [("harness.core.errors", "harness.cluster.seam")]


SUITES = HARNESS.parent / "suites"
# Where the sim is named: its own package, the targets (the sim is one of them) and the CLI (`gpupoc sim ...`).
SIM_SIDE = ("harness/sim/", "harness/targets/", "harness/cli/")
TARGET_KINDS = {"sim", "kubeconfig", "in-cluster"}
KIND_QUESTIONS = {"targets_sim", "on_sim", "is_the_sim"}  # how else a module would ask "is this the sim?"


def outside_the_sim_side() -> list[Path]:
    return [p for p in [*HARNESS.rglob("*.py"), *SUITES.rglob("*.py")]
            if not str(p.relative_to(HARNESS.parent)).startswith(SIM_SIDE)]


def asks_the_kind(tree: ast.AST) -> list[int]:
    """Lines that compare something's kind with a target kind, or ask one of KIND_QUESTIONS."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            kinds = any(isinstance(o, ast.Constant) and o.value in TARGET_KINDS for o in operands)
            named = any(isinstance(o, ast.Attribute) and o.attr == "kind" or isinstance(o, ast.Name) and
                        o.id.endswith("kind") for o in operands)
            if kinds and named:
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in KIND_QUESTIONS and \
                not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            lines.append(node.lineno)
    return lines


def test_only_the_targets_and_the_cli_reach_the_sim() -> None:
    """Code is handed the target; what the sim does (its processes, nodes, namespaces, Slurm) is the target's."""
    reach = [f"{p.relative_to(HARNESS.parent)}: {name}" for p in outside_the_sim_side()
             for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, (ast.Import, ast.ImportFrom))
             for name in ([node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                          if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
             if name in ("harness.targets.sim", "harness.sim") or name.startswith("harness.sim.")]
    assert not reach, "imports of the sim outside harness/targets/ and harness/cli/:\n" + "\n".join(reach)


def test_no_module_outside_the_targets_asks_what_kind_of_target_it_has() -> None:
    """What differs between the sim, a kubeconfig cluster and in-cluster is decided in harness/targets/ (Target's
    features and operations); harness/config/ defines the configured kind and may name it."""
    asked = [f"{p.relative_to(HARNESS.parent)}:{line}" for p in outside_the_sim_side()
             if not str(p.relative_to(HARNESS.parent)).startswith("harness/config/")
             for line in asks_the_kind(ast.parse(p.read_text()))]
    assert not asked, "asks the target's kind (ask target.features or a Target operation):\n" + "\n".join(asked)


def test_the_kind_check_finds_a_planted_question() -> None:
    planted = ast.parse('if target.kind == "sim":\n    pass\nif cfg.targets_sim or x == "exact":\n    pass\n')
    assert asks_the_kind(planted) == [1, 3]


@pytest.mark.parametrize("package", [p.name for p in HARNESS.iterdir() if (p / "__init__.py").exists()])
def test_every_package_is_on_a_floor(package: str) -> None:
    floor_of(f"harness.{package}")


if __name__ == "__main__":
    for a, b in forbidden(graph()):
        print(f"{a} -> {b}")
    for circle in circles(graph()):
        print("circle:", " -> ".join(circle))
