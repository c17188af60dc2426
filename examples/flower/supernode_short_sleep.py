"""``flower-supernode`` with its fixed sleeps capped: an experiment, not a deployment.

    python examples/flower/supernode_short_sleep.py --cap 0.2 -- <flower-supernode options>

Flower 1.42's SuperNode sleeps 3 s whenever it pulls no message from the SuperLink and
polls for the ClientApp's reply every 0.5 s (``flwr/supernode/start_client_internal.py``,
lines 263 and 470); no option or environment variable changes either. This script
replaces ``time`` **inside that Flower module** with a copy whose ``sleep`` waits at most
``--cap`` seconds, then runs Flower's own ``flower-supernode`` entry point. It patches
Flower's code: it refuses any Flower but 1.42.0, and an idle SuperNode then asks the
SuperLink for work every ``--cap`` seconds instead of every 3 s (more requests to the
SuperLink). ``measure.py --supernode-sleep-cap`` uses it to measure what the sleeps cost
(docs/flower.md, "Timings"); fedforest's package does not ship or use it.
"""

from __future__ import annotations

import argparse
import sys
import time
import types
from importlib.metadata import version


def main() -> None:
    """Patch the SuperNode module's sleeps, then hand the rest of the line to Flower."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--cap", type=float, default=0.2, help="longest sleep, seconds")
    parser.add_argument(
        "supernode_args", nargs=argparse.REMAINDER,
        help="flower-supernode's options, after --",
    )  # fmt: skip
    args = parser.parse_args()
    if version("flwr") != "1.42.0":
        sys.exit(f"this patch is written for Flower 1.42.0, not {version('flwr')}")
    import flwr.supernode.start_client_internal as module
    from flwr.supernode.cli import flower_supernode

    cap = args.cap

    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, cap))

    patched = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if k[0] != "_"})
    patched.sleep = sleep
    module.time = patched  # type: ignore[assignment]
    rest = args.supernode_args[1:] if args.supernode_args[:1] == ["--"] else args.supernode_args
    sys.argv = ["flower-supernode", *rest]
    flower_supernode()


if __name__ == "__main__":
    main()
