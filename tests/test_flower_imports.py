"""What a Flower ClientApp process imports (issue 14: a SuperNode of Flower 1.42 starts one
per message, so every import is paid on every message; docs/flower.md, "Timings").

Each test runs in a fresh interpreter: this one has long imported everything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

REPO = Path(__file__).resolve().parents[1]

#: Never on a ClientApp's path: scikit-learn and the SciPy modules fedforest used to pull
#: in there (numba imports SciPy's top package, and ``scipy.linalg`` when it loads a
#: cached kernel: numba's, not ours).
HEAVY = ("sklearn", "scipy.sparse", "scipy.special", "scipy.stats", "scipy.optimize")

#: fedforest's server side, the estimators and the other transports.
SERVER_SIDE = (
    "fedforest.forest",
    "fedforest.federated.server",
    "fedforest.federated.federation",
    "fedforest.transport.local",
    "fedforest.transport.dask",
    "fedforest.transport.flower.serverapp",
    "fedforest.transport.flower.federation",
    "fedforest.datasets.partition",
    "fedforest.datasets.real",
    "fedforest.datasets.synthetic",
)

CHECK = """
import sys
def loaded(prefixes):
    return sorted(m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in prefixes))
HEAVY, SERVER_SIDE = {heavy!r}, {server!r}
"""

#: The end-of-fit message: the ClientApp module alone (no numba, pandas or SciPy).
MODULE_ONLY = """
import fedforest.transport.flower.clientapp
bad = loaded(HEAVY + SERVER_SIDE + ("numba", "pandas", "scipy", "fedforest.federated.client"))
assert not bad, f"importing the ClientApp module imports {{bad}}"
"""

#: A protocol message: the client built from its data file (CSV read, columns checked),
#: its state written and read back (what every round does in a fresh process).
ANSWER = """
from flwr.app import RecordDict
from fedforest.transport.flower import clientapp
from fedforest.transport.flower._codec import from_records, to_records
from fedforest.transport.flower._data import client_from_node_config
from fedforest.transport.flower._state import load_state, save_state
import fedforest.federated.client_secure, fedforest.federated.client_grid
client = client_from_node_config({{"data-path": sys.argv[1], "target": "y", "name": "site-a"}})
state = RecordDict()
save_state(client, state, 1)
assert load_state(client_from_node_config({{"data-path": sys.argv[1], "target": "y"}}), state) == 1
assert "numba" in sys.modules and "pandas" in sys.modules  # the client side did load
bad = loaded(HEAVY + SERVER_SIDE)
assert not bad, f"a ClientApp message imports {{bad}}"
"""


def _run(code: str, *args: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    body = CHECK.format(heavy=HEAVY, server=SERVER_SIDE) + code.format()
    done = subprocess.run(
        [sys.executable, "-c", body, *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


def test_clientapp_module_imports_no_client_side() -> None:
    _run(MODULE_ONLY)


def test_clientapp_message_imports_no_scikit_learn_nor_scipy_modules(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    path = tmp_path / "site-a.csv"
    rows = ["x0,x1,y"] + [f"{a:.6f},{b:.6f},{a - b:.6f}" for a, b in rng.normal(size=(50, 2))]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    _run(ANSWER, str(path))


def test_lazy_packages_keep_their_public_names() -> None:
    """``fedforest.transport`` and ``fedforest.datasets`` load names on first use: every
    name of ``__all__`` resolves, is listed by ``dir()``, and an unknown one is an
    ``AttributeError``."""
    import importlib

    for name in ("fedforest.transport", "fedforest.datasets", "fedforest.transport.flower"):
        module = importlib.import_module(name)
        assert set(module.__all__) <= set(dir(module)), name
        for attr in module.__all__:
            assert getattr(module, attr) is not None, f"{name}.{attr}"
        with pytest.raises(AttributeError, match="no_such_name"):
            module.no_such_name  # noqa: B018
