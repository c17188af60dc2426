"""numba's disk cache of a kernel goes stale when a module it inlines from changes."""

from __future__ import annotations

import ast
import hashlib
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from fedforest.federated import (
    client_buckets,
    client_grid,
    client_increments,
    client_kernels,
    client_sketch,
    client_sorted,
    client_words,
    kernel_views,
)
from fedforest.federated.kernel_cache import cache_depends_on


def _digest(module: object) -> bytes:
    return hashlib.sha256(Path(module.__file__).read_bytes()).digest()  # type: ignore[attr-defined]


def test_the_client_kernels_are_stamped_with_the_modules_they_inline() -> None:
    stamp = client_sketch.sketch_pairs_ranked._cache._cache_file._source_stamp
    assert stamp[1:] == (_digest(client_sorted), _digest(client_kernels), _digest(kernel_views))
    stamp = client_increments.left_increments_ranked._cache._cache_file._source_stamp
    assert stamp[1:] == (_digest(client_kernels), _digest(client_buckets), _digest(kernel_views))
    stamp = client_kernels.left_stats_ranked._cache._cache_file._source_stamp
    assert stamp[1:] == (_digest(client_words), _digest(client_buckets), _digest(kernel_views))
    stamp = client_grid.left_stats_coded._cache._cache_file._source_stamp
    assert stamp[1:] == (_digest(client_kernels),)
    stamp = client_grid.grid_increments._cache._cache_file._source_stamp
    assert stamp[1:] == (_digest(client_kernels), _digest(kernel_views))


def test_an_edit_of_a_dependency_makes_the_cached_kernel_stale(tmp_path, monkeypatch) -> None:
    dep = tmp_path / "ffcache_dep.py"
    dep.write_text("import numba\n\n@numba.njit(inline='always')\ndef step(x):\n    return x + 1\n")
    (tmp_path / "ffcache_kernel.py").write_text(
        textwrap.dedent(
            """
            import numba
            from ffcache_dep import step

            @numba.njit(cache=True)
            def kernel(a):
                return step(a[0])
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import ffcache_dep
    import ffcache_kernel

    try:
        cache_depends_on(ffcache_kernel.kernel, ffcache_dep)
        assert ffcache_kernel.kernel(np.ones(1)) == 2.0  # compiled and written to the cache
        assert ffcache_kernel.kernel._cache._cache_file._load_index()  # fresh

        # Another process importing the same files: the cache is fresh.
        again = importlib.reload(ffcache_kernel)
        cache_depends_on(again.kernel, ffcache_dep)
        assert again.kernel._cache._cache_file._load_index()

        # The dependency changed (the kernel's own file did not): the cached code is stale.
        dep.write_text(dep.read_text().replace("x + 1", "x + 2"))
        changed = importlib.reload(ffcache_kernel)
        cache_depends_on(changed.kernel, ffcache_dep)
        assert changed.kernel._cache._cache_file._load_index() == {}
    finally:
        sys.modules.pop("ffcache_dep", None)
        sys.modules.pop("ffcache_kernel", None)


def test_an_inner_kernel_compiles_without_entry_point_into_a_cached_caller(
    tmp_path, monkeypatch
) -> None:
    """The caller's answer, its disk cache whole (another process compiles nothing)."""
    (tmp_path / "ffinner.py").write_text(
        textwrap.dedent(
            """
            import numba
            from fedforest.federated.kernel_cache import inner_kernel

            @inner_kernel
            def _twice(pair, i):
                return pair[0][i] * 2.0 + pair[1][i]

            @numba.njit(cache=True)
            def kernel(a, b):
                return _twice((a, b), 1)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import ffinner

    try:
        assert ffinner.kernel(np.arange(3.0), np.ones(3)) == 3.0
        (compiled,) = ffinner._twice.overloads.values()
        # no Python entry point was compiled (a plain njit helper has one)
        wrapper = compiled.fndesc.llvm_cpython_wrapper_name
        assert compiled.library.get_pointer_to_function(wrapper) == 0
        assert ffinner._twice.targetoptions["no_cpython_wrapper"]
    finally:
        sys.modules.pop("ffinner", None)
    probe = textwrap.dedent(
        """
        import numpy as np
        from numba.core import event
        import ffinner
        seen = []
        class Watch(event.Listener):
            def on_start(self, ev):
                seen.append(ev.data["dispatcher"].py_func.__name__)
            def on_end(self, ev):
                pass
        with event.install_listener("numba:compile", Watch()):
            print(ffinner.kernel(np.arange(3.0), np.ones(3)), seen)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["3.0", "[]"]  # loaded from the cache: nothing compiled


def _jitted(fn: ast.FunctionDef) -> bool:
    return any(
        "njit" in ast.unparse(d) or "inner_kernel" in ast.unparse(d) for d in fn.decorator_list
    )


def _python_references(tree: ast.Module, bare: set[str], inner: set[str]) -> list[int]:
    """Lines outside numba functions loading ``bare`` names or ``module.<inner>`` (not py_func)."""
    lines: list[int] = []

    def visit(node: ast.AST, in_jit: bool, parent: ast.AST | None) -> None:
        if isinstance(node, ast.FunctionDef):
            in_jit = in_jit or _jitted(node)
        loaded = isinstance(getattr(node, "ctx", None), ast.Load) and not in_jit
        py_func = isinstance(parent, ast.Attribute) and parent.attr == "py_func"
        if loaded and not py_func:
            if (isinstance(node, ast.Name) and node.id in bare) or (
                isinstance(node, ast.Attribute)
                and node.attr in inner
                and ast.unparse(node.value) not in ("self", "cls")  # methods of the same name
            ):
                lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, in_jit, node)

    visit(tree, False, None)
    return lines


def test_no_python_code_calls_an_inner_kernel() -> None:
    """Python calling one would crash: only numba functions may name them (or their py_func)."""
    root = Path(__file__).resolve().parents[1]
    files = [
        p
        for d in ("fedforest", "tests", "benchmarks", "examples")
        for p in (root / d).rglob("*.py")
    ]
    trees = {p: ast.parse(p.read_text()) for p in files}
    defined = {
        p: {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and any(ast.unparse(d) == "inner_kernel" for d in node.decorator_list)
        }
        for p, tree in trees.items()
    }
    inner = set().union(*defined.values())
    assert len(inner) > 30
    found = []
    for path, tree in trees.items():
        imported = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.name in inner
        }
        for line in _python_references(tree, defined[path] | imported, inner):
            found.append(f"{path.name}:{line}")
    assert found == []
