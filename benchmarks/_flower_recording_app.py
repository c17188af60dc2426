"""fedforest's ServerApp behind a Grid that keeps every message it pushes and pulls.

An honest-but-curious server: the same ServerApp (``fedforest.transport.flower.serverapp``),
whose Grid writes down each request and reply as Flower hands it over: its metadata, its
config and metric records (JSON), its arrays (``.npy`` without pickle) and its content's
size as Flower sends it (its objects and their deflated bytes), into
``recorded/`` beside the run's ``model-path``. ``benchmarks/attack_flower_real.py`` copies
this file into a Flower app of its own (as ``recording_app.py``) and reads the files back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

from fedforest.transport.flower import serverapp as fedforest_serverapp

app = ServerApp()


class RecordingGrid(Grid):
    """Delivers everything through ``inner``; keeps a copy of every message in ``out``."""

    def __init__(self, inner: Grid, out: Path) -> None:
        self.inner, self.out, self.count = inner, out, 0
        out.mkdir(parents=True, exist_ok=True)

    def _keep(self, side: str, msg: Message) -> None:
        self.count += 1
        stem = f"{self.count:06d}"
        entry: dict[str, Any] = {
            "side": side,
            "metadata": {k.lstrip("_"): v for k, v in vars(msg.metadata).items()},
            "has_error": msg.has_error(),
        }
        if msg.has_error():
            entry["error"] = {"code": msg.error.code, "reason": msg.error.reason}
        else:
            content = msg.content
            objects = get_all_nested_objects(content)  # as Flower sends it: content-addressed
            entry["objects"] = len(objects)
            entry["bytes"] = sum(len(o.deflate()) for o in objects.values())
            entry["config_records"] = {k: dict(v) for k, v in content.config_records.items()}
            entry["metric_records"] = {k: dict(v) for k, v in content.metric_records.items()}
            entry["array_records"] = {k: list(v) for k, v in content.array_records.items()}
            for key, record in content.array_records.items():
                for name, array in record.items():
                    path = self.out / f"{stem}-{key}-{name}.npy"
                    np.save(path, array.numpy(), allow_pickle=False)
        (self.out / f"{stem}.json").write_text(json.dumps(entry, default=str))

    def set_run(self, run_id: int) -> None:
        self.inner.set_run(run_id)

    @property
    def run(self) -> Any:
        return self.inner.run

    def create_message(self, *args: Any, **kwargs: Any) -> Message:
        return self.inner.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return self.inner.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        ids = list(self.inner.push_messages(messages))
        for msg in messages:
            self._keep("request", msg)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        replies = list(self.inner.pull_messages(message_ids))
        for msg in replies:
            self._keep("reply", msg)
        return replies

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        return self.inner.send_and_receive(messages, timeout=timeout)


@app.main()
def main(grid: Grid, context: Context) -> None:
    out = Path(str(context.run_config["model-path"])).parent / "recorded"
    fedforest_serverapp.main(RecordingGrid(grid, out), context)
