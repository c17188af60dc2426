"""The package's layout: imports run one way, no cycle, small modules, public names intact."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedforest"

#: Where a module may not import from (prefix -> forbidden prefixes): data flows from the
#: clients through the protocol to the server and the fitted trees, with the estimators,
#: swarm and studies above them.
FORBIDDEN = {
    "fedforest._common": ("fedforest.",),
    "fedforest.tree": (
        "fedforest.federated", "fedforest.forest", "fedforest.transport", "fedforest.swarm",
        "fedforest.datasets", "fedforest.experiments", "fedforest.diagnostics",
        "fedforest.simulate", "fedforest.cli", "fedforest._io", "fedforest._inputs",
    ),
    "fedforest.federated": (
        "fedforest.forest", "fedforest.transport", "fedforest.swarm", "fedforest.datasets",
        "fedforest.experiments", "fedforest.diagnostics", "fedforest.simulate", "fedforest.cli",
        "fedforest._io", "fedforest._inputs",
    ),
    "fedforest.datasets": (
        "fedforest.federated", "fedforest.tree", "fedforest.forest", "fedforest.transport",
        "fedforest.swarm", "fedforest.experiments", "fedforest.diagnostics", "fedforest.cli",
    ),
    "fedforest.swarm": ("fedforest.experiments", "fedforest.cli", "fedforest.simulate"),
    "fedforest.forest": ("fedforest.experiments", "fedforest.cli", "fedforest.swarm"),
}  # fmt: skip
FORBIDDEN_ANYWHERE_BUT = {"fedforest.cli": ("fedforest.cli",)}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every fedforest module ``name`` imports, at module level or inside a function.

    ``if TYPE_CHECKING:`` blocks are skipped (they never run). ``from pkg import mod``
    counts as importing ``pkg.mod`` when that is a module.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "fedforest":
                    found.add(target)
                    for alias in child.names:
                        if f"{target}.{alias.name}" in known:
                            found.add(f"{target}.{alias.name}")
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.split(".")[0] == "fedforest")
            visit(child)

    visit(tree)
    # Importing a.b.c first runs the __init__ of every package above it that is not
    # already being imported (the importer's own packages are).
    mine = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
    out: set[str] = set()
    for target in found:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            up = ".".join(parts[:i])
            if up in known and up not in mine:
                out.add(up)
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := dfs(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := dfs(node)) is not None:
            return cycle
    return None


def test_no_import_cycle() -> None:
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_finds_a_cycle() -> None:
    # The oracle for the test above: a hand-made graph with a cycle through three modules.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_function_level_imports_are_seen(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from fedforest.forest import X\n"
        "def f():\n    from fedforest.tree import arrays\n    import fedforest.cli\n"
    )
    known = {"fedforest", "fedforest.tree", "fedforest.tree.arrays", "fedforest.cli"}
    assert _imports("fedforest.m", src, known) == known - {"fedforest"}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_run_one_way(layer: str) -> None:
    graph = _graph()
    bad = [
        f"{name} imports {target}"
        for name, targets in graph.items()
        if name == layer or name.startswith(layer + ".")
        for target in targets
        if any(target == f or target.startswith(f) for f in FORBIDDEN[layer])
        and not (target == layer or target.startswith(layer + "."))
    ]
    assert not bad, bad


def test_nothing_imports_the_command_line() -> None:
    """Only ``python -m fedforest`` (the package's __main__) starts the command line.

    Nor does anything outside the ``fedforest.cli`` package import one of its modules.
    """
    graph = _graph()
    bad = [
        n
        for n, targets in graph.items()
        if any(t == "fedforest.cli" or t.startswith("fedforest.cli.") for t in targets)
        and n != "fedforest.__main__"
        and not n.startswith("fedforest.cli")
    ]
    assert not bad, bad


def test_modules_are_small_and_the_top_is_short() -> None:
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 800
    }
    assert not long, long
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top


@pytest.mark.parametrize(
    "module",
    [
        "fedforest",
        "fedforest.datasets",
        "fedforest.swarm",
        "fedforest.swarm.routing",
        "fedforest.transport",
        "fedforest.experiments.paper",
    ],
)
def test_public_names_resolve(module: str) -> None:
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"
