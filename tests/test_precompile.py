"""The kernels compiled ahead (fedforest.federated.precompile) are those a default fit calls.

If a kernel's argument types drift (an int32 offset becoming int64, say), the list would
compile a signature nobody calls and the first fit would compile the real one itself:
still correct, but the first run would be slow again. So a fresh process fits and
predicts a default ``FedForestRegressor`` and reports which listed signatures its kernels
were called with (a fresh process holds only the signatures it dispatched).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fedforest.federated import precompile

REPO = Path(__file__).resolve().parents[1]

#: A default fit and prediction at ``fedforest simulate``'s clients, rows and depth (its
#: timed fit's kernels, e.g. the server's ``gather_rows``, which a smaller fit does not
#: call), fewer trees.
_DEFAULT_FIT = """
from fedforest import FedForestRegressor
from fedforest.datasets import make_paper_synthetic

data = make_paper_synthetic("covariate-shift", n_clients=10, n_per_client=200,
                            n_features=20, random_state=0)
model = FedForestRegressor(n_estimators=10, max_depth=8, min_samples_leaf=5,
                           max_features=1 / 3, random_state=0)
model.fit(data.X_train, data.y_train, client_ids=data.h_train)
model.predict(data.X_test)
"""

_FIT = (
    "import json\nfrom fedforest.federated.precompile import ELSEWHERE, HERE\n"
    + _DEFAULT_FIT
    + """
called = {k.py_func.__qualname__: tuple(args) in k.overloads for k, args in HERE + ELSEWHERE}
print(json.dumps(called))
"""
)


def test_listed_signatures_are_the_ones_a_default_fit_calls() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _FIT], env=env, capture_output=True, text=True, check=True,
        cwd=REPO,
    )  # fmt: skip
    called = json.loads(done.stdout.splitlines()[-1])
    assert len(called) == len(precompile.HERE) + len(precompile.ELSEWHERE)
    assert all(called.values()), {name for name, hit in called.items() if not hit}


_UNLISTED = (
    """
import gc, json
from numba.core.registry import CPUDispatcher
from fedforest.federated.precompile import ELSEWHERE, HERE, compile_share

def overloads():
    return {(d.py_func.__module__ + "." + d.py_func.__qualname__, str(s))
            for d in gc.get_objects() if isinstance(d, CPUDispatcher)
            and d.py_func.__module__.startswith("fedforest") for s in d.overloads}

compile_share(HERE + ELSEWHERE)  # (and their helpers, on a cold cache)
before = overloads()
"""
    + _DEFAULT_FIT
    + """
print(json.dumps(sorted(overloads() - before)))
"""
)


def test_a_default_fit_calls_no_kernel_the_lists_leave_out() -> None:
    """Any other kernel or signature would compile in the fit, after the two processes.

    There it is on the first run's critical path (``fedforest simulate``'s tiny warm-up
    fit, or its timed fit): once ``ancestors_kept`` for a C-ordered ``out`` of one row
    and the server's ``gather_rows``, which only a fit of that size calls.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _UNLISTED], env=env, capture_output=True, text=True,
        check=True, cwd=REPO,
    )  # fmt: skip
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_cached_share_compiles_nothing_and_starts_no_process() -> None:
    precompile.compile_share(precompile.HERE)  # compiled or loaded: now in this process
    assert precompile.compile_kernels() is False


_EARLY = """
import json
from numba.core import event
from fedforest.federated import precompile as p

before = [p.is_cached(k, a) for k, a in p.ELSEWHERE]
started = p.start_early()
ahead = p.Ahead()  # adopts the process started early rather than starting another
early = ahead.started_early
compiled = ahead.wait()  # the second process alone: nothing compiled here
after = [p.is_cached(k, a) for k, a in p.ELSEWHERE]
again = p.start_early()
seen = []

class Watch(event.Listener):
    def on_start(self, ev):
        seen.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass

with event.install_listener("numba:compile", Watch()):
    p.compile_share(p.ELSEWHERE)  # loaded from what the second process cached
print(json.dumps([before, started, early, compiled, after, again, seen]))
"""


def test_a_cold_cache_starts_the_second_process_early_and_it_fills_the_cache(tmp_path) -> None:
    """start_early reads the cache index as numba does: missing, then there and loadable."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _EARLY], env=env, capture_output=True, text=True, check=True,
        cwd=REPO,
    )  # fmt: skip
    before, started, early, compiled, after, again, seen = json.loads(done.stdout.splitlines()[-1])
    assert before == [False] * len(precompile.ELSEWHERE)
    assert started is True and early is True and compiled is True
    assert after == [True] * len(precompile.ELSEWHERE)
    assert again is False  # a cached run starts nothing
    assert seen == []  # what is_cached called cached, numba loads without compiling


_FAIL = """
import sys
from fedforest.federated import precompile as p

assert p.start_early()
ahead = p.Ahead()  # adopted, as fedforest simulate's warm-up does
print(ahead._other.process.pid, flush=True)
raise SystemExit("the command failed before waiting for it")
"""


def test_a_second_process_does_not_outlive_a_command_that_fails(tmp_path) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _FAIL], env=env, capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1 and "failed before waiting" in done.stderr
    status = Path(f"/proc/{int(done.stdout.split()[0])}/status")
    # Killed and reaped by the command at its exit (gone), or at most a zombie left to an
    # init that does not reap: never still compiling.
    assert not status.exists() or "\nState:\tZ" in status.read_text()


#: A fresh-cache compile of the kernels named (their helpers compile with them): the
#: fedforest dispatchers left with a ``Literal`` signature, and which of the left
#: statistics' shared helpers compiled as functions of their own.
_FRESH = """
import gc, json
from numba.core.registry import CPUDispatcher
from fedforest.federated import client_kernels, client_words
from fedforest.federated import precompile as p

names = ("ancestors_kept", "both_rules", "left_stats_ranked", "left_stats_kept")
for kernel, args in p.HERE + p.ELSEWHERE:
    if kernel.py_func.__qualname__ in names:
        kernel.compile(args)
literal = {d.py_func.__qualname__: [str(s) for s in d.signatures]
           for d in gc.get_objects() if isinstance(d, CPUDispatcher)
           and d.py_func.__module__.startswith("fedforest")
           and any("Literal" in str(s) for s in d.signatures)}
shared = {f.py_func.__qualname__: len(f.signatures) for f in (
    client_kernels.pair_bins, client_kernels.gather_node, client_kernels.add_to_bins,
    client_words.packed_words, client_words.whole_words, client_words.row_words)}
print(json.dumps([literal, shared]))
"""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _FRESH], env=env, capture_output=True, text=True, check=True,
        cwd=REPO,
    )  # fmt: skip
    result: list[dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_kernel_compiles_its_helpers_for_no_literal_types(fresh) -> None:
    """A helper called with a variable that starts as a literal (``n = 0``, later ``n = m``).

    numba's type inference resolves the call before it unifies the variable's types, and
    compiles the helper for ``Literal[int](0)`` as well: another whole compile of it, on the
    first run's critical path, that no call uses.
    """
    assert fresh[0] == {}


def test_the_left_statistics_helpers_compile_once_not_inlined(fresh) -> None:
    """Their own functions (one compile per argument types), not copied into each kernel.

    ``inline="always"`` would type and lower them again inside every kernel calling them
    (they never compile on their own then): about 3 s more compile CPU on a first run.
    """
    assert all(n >= 1 for n in fresh[1].values()), fresh[1]
