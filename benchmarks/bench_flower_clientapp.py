"""The cost of one Flower ClientApp process, without a deployment (docs/flower.md, "Timings").

    python benchmarks/bench_flower_clientapp.py [--rows 1000] [--repeats 3]

A SuperNode of Flower 1.42 starts a new ``flwr-clientapp`` process for every message.
This fits the forest of ``examples/flower/measure.py`` (three sites, 50 trees of depth 6,
the default ``privacy="secure"``) through an in-memory Grid that runs fedforest's ClientApp
in this process, and keeps site-a's messages with their contexts (its checkpointed state)
as Flower's protobufs. Then, for one message of each kind, it starts fresh processes
that import what ``flwr-clientapp`` imports, then fedforest's ClientApp module, and
answer that message; each prints its CPU seconds (user + sys) for the three steps. CPU
time, unlike wall-clock time, hardly depends on what else runs on the machine; the
minimum over ``--repeats`` processes is printed.

The ``fedforest`` imported is the one next to this file (its repository).
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: Run in a fresh process: argv = [dump file, message index]. Prints three CPU times.
CHILD = """
import pickle, resource, sys
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0 = cpu()
import flwr.supernode.cli.flwr_clientapp, flwr.supernode.runtime.run_clientapp
from flwr.common.serde import context_from_proto, message_from_proto
from flwr.proto.message_pb2 import Context as ProtoContext, Message as ProtoMessage
from flwr.supercore.task_identity import TaskIdentity
c1 = cpu()
from fedforest.transport.flower.clientapp import app
c2 = cpu()
raw_msg, raw_ctx = pickle.load(open(sys.argv[1], "rb"))[int(sys.argv[2])]
pm, pc = ProtoMessage(), ProtoContext()
pm.ParseFromString(raw_msg)
pc.ParseFromString(raw_ctx)
msg, ctx = message_from_proto(pm), context_from_proto(pc)
for name, value in (("_run_id", ctx.run_id), ("_node_id", ctx.node_id), ("_task_id", 1)):
    setattr(TaskIdentity, name, value)
c3 = cpu()
app(message=msg, context=ctx)
print(c1 - c0, c2 - c1, cpu() - c3)
"""


class _Grid:
    """A Grid whose nodes answer in this process; site-a's messages are kept."""

    def __init__(self, paths: list[Path], sites: Iterable[str]) -> None:
        from flwr.app import Context, RecordDict

        self.contexts = {
            1000 + k: Context(
                run_id=1,
                node_id=1000 + k,
                node_config={"data-path": str(p), "target": "y", "name": name},
                state=RecordDict(),
                run_config={},
            )
            for k, (name, p) in enumerate(zip(sites, paths, strict=True))
        }
        self.inbox: dict[str, Any] = {}
        self.kept: list[tuple[str, bytes, bytes]] = []

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Any]) -> list[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            self.inbox[msg.metadata.message_id] = msg
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Any]:
        from flwr.common.serde import context_to_proto, message_to_proto

        from fedforest.transport.flower import clientapp

        replies = []
        for mid in message_ids:
            msg = self.inbox.pop(mid)
            context = self.contexts[msg.metadata.dst_node_id]
            if msg.metadata.dst_node_id == 1000:
                self.kept.append(
                    (
                        str(msg.content.config_records["fedforest"]["kind"]),
                        message_to_proto(msg).SerializeToString(),
                        context_to_proto(context).SerializeToString(),
                    )
                )
            clientapp._LIVE.clear()  # a fresh process per message, as on a SuperNode
            replies.append(clientapp.app(message=msg, context=context))
        return replies


def record(work: Path, rows: int) -> list[tuple[str, bytes, bytes]]:
    """site-a's (kind, message, context) of every message of the fit, in order."""
    sys.path.insert(0, str(REPO / "examples" / "flower"))
    from flwr.supercore.task_identity import TaskIdentity
    from make_data import SITES, write_sites

    import fedforest as ff
    from fedforest.transport.flower import FlowerFederation

    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        setattr(TaskIdentity, name, value)
    grid = _Grid(write_sites(work / "data", rows, 10), SITES)
    fed = FlowerFederation(grid, min_nodes=3, poll_interval=0.0)  # type: ignore[arg-type]
    ff.FedForestRegressor(n_estimators=50, max_depth=6, random_state=0).fit_federated(fed)
    fed.close()
    return grid.kept


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1000, help="rows per site")
    parser.add_argument("--repeats", type=int, default=3, help="processes per message")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        kept = record(Path(tmp), args.rows)
        dump = Path(tmp) / "messages.pkl"
        dump.write_bytes(pickle.dumps([(m, c) for _, m, c in kept]))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        first = {}  # the first message of each kind
        for index, (kind, _, _) in enumerate(kept):
            first.setdefault(kind, index)
        print(
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; CPU seconds, "
            f"min of {args.repeats} fresh processes (site-a's {len(kept)} messages)"
        )
        header = ("message", "Flower", "fedforest import", "answer", "all")
        print("{:>16}  {:>7}  {:>16}  {:>7}  {:>6}".format(*header))
        for kind, index in first.items():
            runs = []
            for _ in range(args.repeats):
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(dump), str(index)],
                    env=env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                runs.append([float(v) for v in out.stdout.split()[-3:]])
            best = [min(r[i] for r in runs) for i in range(3)]
            print(
                f"{index:>3} {kind:>12}  {best[0]:7.2f}  {best[1]:16.2f}  {best[2]:7.2f}  "
                f"{sum(best):6.2f}"
            )
        print(f"(load average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main()
