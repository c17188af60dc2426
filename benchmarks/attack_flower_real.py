"""A real Flower deployment recorded at the server, and the suite's attacks on it.

Starts a SuperLink and three SuperNodes on 127.0.0.1 as ``tests/test_flower.py`` does
(its ``Deployment``: its three site files, ``--isolation process`` with ``fedforest
flower-worker`` by default), runs fedforest's ServerApp behind a Grid that keeps every
request and reply (``benchmarks/_flower_recording_app.py``, in a Flower app of its own
made in the output folder), and stops every process it started. Then prints what the
replies carry (metadata fields, records and entries, data values in headers) and runs the
union's attacks (``tests/_attack_union.py``, without the slow ones) on the decoded
messages and the saved model, and each reply's age (``created_at`` less its request's).
``--unlike`` (red team 19) runs on site files that differ in every way their data can
(``tests/test_privacy_red19.unlike_site_files``: 60, 110 and 200 rows, missing values at
one, a level two rows of another hold) and also prints the rounds whose replies differ
in size between clients (as Flower sends them) and every data value or rare level found
in what the server's side keeps: the ServerApp's log as ``flwr run --stream`` shows it
(the SuperLink's copy), the SuperLink's log, the metrics JSON and the model file.

Usage (from the repository root, which holds the test suite's deployment)::

    python benchmarks/attack_flower_real.py --out /tmp/ff-real --privacy secure none
    python benchmarks/attack_flower_real.py --out /tmp/ff-unlike --unlike
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import fedforest as ff  # noqa: E402
from fedforest.federated.codec import unpack_arrays  # noqa: E402
from fedforest.federated.protocol import Message  # noqa: E402
from tests._attack_union import all_claims, union  # noqa: E402
from tests.test_flower import Deployment, _run_config, _wait, write_site_files  # noqa: E402
from tests.test_privacy_red19 import RARE_LEVEL, unlike_site_files  # noqa: E402


def make_app(folder: Path) -> Path:
    """The example app with the recording ServerApp in place of fedforest's own."""
    folder.mkdir(parents=True)
    text = (REPO / "examples" / "flower" / "pyproject.toml").read_text()
    text = text.replace('name = "fedforest-app"', 'name = "fedforest-recording-app"')
    text = re.sub(r'serverapp = "[^"]*"', 'serverapp = "recording_app:app"', text)
    (folder / "pyproject.toml").write_text(text)
    shutil.copy(REPO / "benchmarks" / "_flower_recording_app.py", folder / "recording_app.py")
    return folder


def run(root: Path, privacy: str, isolation: str, unlike: bool = False) -> None:
    """One deployment, one recorded run (every process stopped at the end)."""
    root.mkdir(parents=True)
    paths = unlike_site_files(root) if unlike else write_site_files(root)
    dep = Deployment(root / "deployment", False, paths, isolation)
    try:
        dep.start_superlink()
        for (name, path), port in zip(dep.paths.items(), dep.node_ports, strict=True):
            dep.start_node(name, path, port)
        for name in dep.paths:
            dep.node_listening(name)
        config = _run_config(dep, **{"round-timeout": 300.0, "privacy": privacy})
        proc = dep.run_app(config, app=make_app(root / "app"))
        output = _wait(proc, dep, timeout=900)
        if not (dep.root / "model.ffm").exists():
            raise RuntimeError(f"no model written\n{output}\n{dep.logs()}")
    finally:
        dep.stop()


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return []


def read_back(root: Path) -> dict[str, Any]:
    """The recording: per reply its fields and records, the rounds as protocol messages."""
    rec = root / "deployment" / "recorded"
    entries = []
    for path in sorted(rec.glob("*.json")):
        entry = json.loads(path.read_text())
        entry["stem"] = path.stem
        entries.append(entry)

    def decode(e: dict[str, Any]) -> Message:
        config = e["config_records"]["fedforest"]
        packed = rec / f"{e['stem']}-fedforest.arrays-packed.npy"
        buffer = np.load(packed, allow_pickle=False) if packed.exists() else np.zeros(0, np.uint8)
        layout = json.loads(config["layout"])
        return Message(
            config["kind"], json.loads(config["header"]), unpack_arrays(layout, buffer, "x")
        )

    names = {
        e["metadata"]["src_node_id"]: decode(e).header["name"]
        for e in entries
        if e["side"] == "reply" and e["metadata"]["group_id"] == "discovery"
    }
    # The suite's attacks call the client of the k-th site file (sorted) "site{k}".
    alias = {name: f"site{k}" for k, name in enumerate(sorted(names.values()))}
    rounds: dict[int, tuple[dict[str, Message], dict[str, Message]]] = {}
    requests = {e["metadata"]["message_id"]: e for e in entries if e["side"] == "request"}
    fields: Counter[str] = Counter()
    records: Counter[str] = Counter()
    ages, headers = [], []
    sizes: dict[str, dict[str, tuple[int, int]]] = {}
    for e in entries:
        meta = e["metadata"]
        if e["side"] == "reply" and "bytes" in e:
            name = alias[names[meta["src_node_id"]]]
            sizes.setdefault(meta["group_id"], {})[name] = (e["objects"], e["bytes"])
        if e["side"] == "reply":
            fields.update(list(meta))
            ages.append(
                meta["created_at"] - requests[meta["reply_to_message_id"]]["metadata"]["created_at"]
            )
            if not e["has_error"]:
                for kind in ("config_records", "metric_records", "array_records"):
                    records.update(f"{kind}:{k}.{x}" for k, v in e[kind].items() for x in v)
                headers.append(json.loads(e["config_records"]["fedforest"]["header"]))
        if meta["group_id"] in ("discovery", "finish") or e["has_error"]:
            continue
        pair = rounds.setdefault(int(meta["group_id"]), ({}, {}))
        node = meta["dst_node_id"] if e["side"] == "request" else meta["src_node_id"]
        pair[e["side"] == "reply"][alias[names[node]]] = decode(e)
    return {
        "rounds": [rounds[k] for k in sorted(rounds)],
        "fields": fields,
        "records": records,
        "ages": np.array(ages),
        "headers": headers,
        "sizes": sizes,
    }


def values_in(text: str, values: set[float]) -> list[Any]:
    """The rare level, and every number of six or more significant digits that equals a
    data value to its digits (a log's ports, byte counts and times have fewer)."""
    found: list[Any] = [RARE_LEVEL] if RARE_LEVEL in text else []
    known = np.array(sorted(abs(v) for v in values))
    for token in re.findall(r"-?\d+\.?\d*(?:[eE][-+]?\d+)?", text):
        digits = len(re.sub(r"[^0-9]", "", re.split(r"[eE]", token)[0]).lstrip("0"))
        if digits >= 6:
            printed = np.array([float(f"{v:.{digits}g}") for v in known])
            found += known[printed == abs(float(token))].tolist()
    return found


def attack(root: Path, got: dict[str, Any]) -> None:
    files = sorted(root.glob("site-*.csv"))
    frames = [pd.read_csv(p) for p in files]
    X = pd.concat([f.drop(columns="y") for f in frames], ignore_index=True)
    text = [c for c in X if not pd.api.types.is_numeric_dtype(X[c])]
    X[text] = X[text].astype("category")
    y = np.concatenate([f["y"].to_numpy(dtype=np.float64) for f in frames])
    h = np.concatenate([np.full(len(f), k) for k, f in enumerate(frames)])
    numeric = X.drop(columns=text).to_numpy(dtype=np.float64).ravel()
    values = set(numeric[np.isfinite(numeric)].tolist()) | set(y.tolist())
    differ = {g: s for g, s in got["sizes"].items() if len(set(s.values())) > 1}
    print("rounds whose replies differ in Flower's size (objects, bytes):", differ)
    kept = root / "deployment"
    server_side = [kept / "run.log", kept / "superlink.log", kept / "metrics.json"]
    for path in server_side:
        found = values_in(path.read_text(errors="replace"), values)
        print(f"{path.name}: {path.stat().st_size} bytes, data values or rare level: {found}")
    saved = ff.load(kept / "model.ffm")
    print("the model's categories_ hold the rare level:", RARE_LEVEL in str(saved.categories_))
    print("reply metadata fields:", dict(got["fields"]))
    print("reply records and entries:", dict(got["records"]))
    in_headers = sum(x in values for hd in got["headers"] for x in _numbers(hd))
    print("header numbers equal to a training value or target:", in_headers)
    ages = got["ages"]
    print(f"reply ages (created_at less the request's): {ages.min():.2f} to {ages.max():.2f} s")
    model = ff.load(root / "deployment" / "model.ffm")
    fed = SimpleNamespace(rounds=got["rounds"], clients={})
    claims = all_claims(fed, model, X, y, h, slow=False)
    print(
        "attacks (target rows, feature rows):",
        {k: (int(t.sum()), int(f.sum())) for k, (t, f) in claims.items()},
    )
    print("union:", union(claims))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="an empty folder for the runs")
    parser.add_argument(
        "--privacy",
        nargs="+",
        default=["secure", "none"],
        choices=["secure", "none"],
        help="privacy levels run (none: the control, where the attacks find rows)",
    )
    parser.add_argument(
        "--unlike",
        action="store_true",
        help="site files of unlike data (red team 19) in place of tests/test_flower.py's",
    )
    parser.add_argument(
        "--isolation",
        default="worker",
        choices=["worker", "subprocess"],
        help="worker: fedforest flower-worker per SuperNode; subprocess: Flower's own",
    )
    args = parser.parse_args()
    print("command: python", " ".join(sys.argv))
    print("load average at start:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    for privacy in args.privacy:
        root = args.out / privacy
        start = time.perf_counter()
        run(root, privacy, args.isolation, args.unlike)
        print(f"== privacy={privacy}: the run took {time.perf_counter() - start:.0f} s")
        attack(root, read_back(root))
    print("load average at end:", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
