"""A long-lived ClientApp worker for a SuperNode in ``--isolation process`` mode.

Flower 1.42 runs every message of a run in a new ``flwr-clientapp`` process: its SuperExec
acquires the message's task from the SuperNode's Runtime API and starts a process that
imports Flower (1 to 1.5 CPU s), then the ClientApp (fedforest's client side, numba's
cached kernels: 0.6 to 1.9 CPU s), answers in about 10 ms and exits (docs/flower.md,
"Timings"). This worker takes the SuperExec's place for ClientApp tasks: it acquires them
from the same API and runs each one **in this process**, with Flower's own functions
(``pull_task_input``'s calls, the FAB install, ``get_load_client_app_fn``,
``push_message``, ``push_task_output``, the task heartbeat): what ``flwr-clientapp``
does, minus the process.
Flower, fedforest and numba are imported once per worker, not once per message.

Run it next to a SuperNode started with ``--isolation process``::

    flower-supernode --insecure --isolation process --port 9094 ... &
    fedforest flower-worker --runtime-api-address 127.0.0.1:9094 --insecure

A task whose ClientApp raises is answered as ``flwr-clientapp`` answers it (an error
reply with Flower's error code and reason, the task marked failed), except that the
reason quotes the exception's text only for a refusal of fedforest's own
(:mod:`fedforest.federated.client_errors`), and the worker goes on with the next task.
Tasks run one at a time (the SuperNode hands out one message at a time). The live client
of a run stays in this process between messages (``clientapp._LIVE``), so a message does
not even rebuild it from its data file; the state checkpoint in ``Context.state`` is still
written, as in any process.

The worker drives Flower internals that change between releases: it refuses to start on
a Flower other than :data:`TESTED_FLOWER` (``--allow-untested-flower`` overrides it).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
import time
from collections.abc import Sequence
from importlib.metadata import version
from logging import ERROR, INFO, WARNING
from typing import Any

__all__ = ["TESTED_FLOWER", "TaskInterrupted", "check_flower_version", "main", "run_task", "serve"]

#: The Flower release this worker was written against and is tested with.
TESTED_FLOWER = "1.42.0"

#: What the worker imports before it serves (what a ClientApp message needs).
PRELOAD = (
    "fedforest.transport.flower.clientapp",
    "fedforest.transport.flower._codec",
    "fedforest.transport.flower._data",
    "fedforest.transport.flower._state",
    "fedforest.federated.client",
    "fedforest.federated.client_secure",
    "fedforest.federated.client_grid",
)


def check_flower_version(allow_untested: bool = False) -> str:
    """The installed Flower's version; a ``RuntimeError`` unless it is :data:`TESTED_FLOWER`."""
    found = version("flwr")
    if found != TESTED_FLOWER and not allow_untested:
        raise RuntimeError(
            f"fedforest's ClientApp worker drives Flower {TESTED_FLOWER}'s internal task API, "
            f"and this environment has Flower {found}: run the SuperNode with its default "
            f"--isolation subprocess instead (or install flwr=={TESTED_FLOWER}; "
            "--allow-untested-flower runs the worker anyway, at your own risk)."
        )
    return found


def _runtime_client(
    address: str, interceptors: list[Any], root_certificates: str | None
) -> tuple[Any, Any]:
    """A Runtime API client as Flower's SuperExec and ``flwr-clientapp`` build it.

    Returns the client and its retry invoker.
    """
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.runtime.tracing import RuntimeTracingInterceptor
    from flwr.supercore.tls import validate_and_resolve_root_certificates

    retry = make_simple_http_retry_invoker()
    client = RuntimeHttpClient.from_server_address(
        server_address=address,
        insecure=root_certificates is None,
        root_certificates=validate_and_resolve_root_certificates(
            root_certificates, root_certificates is None
        ),
        interceptors=[RuntimeTracingInterceptor(), *interceptors],
        retry_invoker=retry,
    )
    return client, retry


def _heartbeat_fn(client: Any) -> Any:
    """Flower's task heartbeat function (``make_task_heartbeat_fn_http``), but logging.

    Flower's raises SIGINT when the SuperNode no longer accepts the task (which ends a
    ``flwr-clientapp`` process); here that would end the worker, not only the task.
    """
    import httpx
    from flwr.proto.runtime_pb2 import SendTaskHeartbeatRequest
    from flwr.supercore import log

    def fn() -> bool:
        try:
            res = client.SendTaskHeartbeat(SendTaskHeartbeatRequest())
        except httpx.TransportError:
            return False
        except httpx.HTTPStatusError as err:
            if err.response.status_code in (503, 504):
                return False
            raise
        if not res.success:
            log(WARNING, "fedforest worker: the SuperNode no longer accepts this task's output")
        return True

    return fn


def run_task(address: str, token: str, root_certificates: str | None = None) -> bool:
    """Run one acquired ClientApp task in this process, as ``flwr-clientapp`` does.

    The body of Flower 1.42's ``flwr.supernode.runtime.run_clientapp.run_clientapp``
    without its process handling (signal handlers, exit code, parent monitor, runtime
    dependency installation, which fedforest's deployment keeps off). Returns whether the
    ClientApp answered (``False``: it raised, and the reply says so).
    """
    from flwr.app import Message
    from flwr.app.error import Error
    from flwr.cli.install import install_from_fab
    from flwr.clientapp.client_app import LoadClientAppError
    from flwr.clientapp.utils import get_load_client_app_fn
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supercore import log
    from flwr.supercore.heartbeat import HeartbeatSender
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

    from ...federated.client_errors import error_text

    client, retry = _runtime_client(
        address,
        [
            RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
            RuntimeTokenHttpInterceptor(token),
        ],
        root_certificates,
    )
    heartbeat = HeartbeatSender(_heartbeat_fn(client))
    message = reply = context = None
    sub_status, details = SubStatus.FAILED, "ClientApp task failed due to unknown reason"
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _interrupt_task) if main_thread else None
    try:
        heartbeat.start()
        message, context, run, fab = _pull_task_input(client)
        if fab.hash_str not in _INSTALLED:
            install_from_fab(fab.content, skip_prompt=True)
            _INSTALLED.add(fab.hash_str)
        load = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)
        client_app = load(run.fab_id, run.fab_version, fab.hash_str)
        reply = client_app(message=message, context=context)
        sub_status, details = SubStatus.COMPLETED, ""
    except Exception as ex:
        # Flower's reason quotes the exception's text, which reaches the server: fedforest's
        # own refusals keep theirs, anything else its type only (logged in full below).
        text = error_text(ex, "the ClientApp task", log=False)
        code, reason = ErrorCode.CLIENT_APP_RAISED_EXCEPTION, f"{type(ex)}:<'{text}'>"
        if isinstance(ex, LoadClientAppError):
            code = ErrorCode.LOAD_CLIENT_APP_EXCEPTION
            reason = "An exception was raised when attempting to load `ClientApp`"
        log(ERROR, "ClientApp raised an exception", exc_info=ex)
        details = reason
        if message is not None:
            reply = Message(Error(code=code, reason=reason), reply_to=message)
    finally:
        try:
            if reply is not None and context is not None:
                try:
                    push_message(client, reply, context)
                except Exception as ex:
                    log(ERROR, "Failed to push reply message", exc_info=ex)
            retry.max_tries = 1  # as flwr-clientapp: do not block on exit
            push_task_output(client=client, context=context, sub_status=sub_status, details=details)
        finally:
            if heartbeat.is_running:
                heartbeat.stop()
            client.close()
            if main_thread:
                signal.signal(signal.SIGINT, previous)
    return sub_status == SubStatus.COMPLETED


class TaskInterrupted(Exception):
    """SIGINT while a task runs: it ends that task (as a failure), not the worker."""


def _interrupt_task(signum: int, frame: Any) -> None:
    """End the task under way (SIGINT's handler while a task runs).

    Flower's HTTP retries send SIGINT to their own process when the SuperNode refuses the
    task's token (HTTP 401: the task expired or was cancelled), to end a
    ``flwr-clientapp``; here that ends the task, not the worker. SIGTERM stops the worker.
    """
    raise TaskInterrupted(
        "the task was interrupted by SIGINT (Ctrl-C, or Flower's HTTP retries when the "
        "SuperNode refused the task's token)"
    )


def _pull_task_input(client: Any) -> tuple[Any, Any, Any, Any]:
    """Flower 1.42's ``run_clientapp.pull_task_input``, with a shorter pull backoff.

    The SuperNode hands out a message's task before it has pulled the message's objects
    from the SuperLink; the first pull that finds one missing waits Flower's initial
    backoff of 1 s. A ``flwr-clientapp`` process starts later than that, this worker
    right away: it retries after 0.02 s instead (doubling up to 1 s). Otherwise the same
    calls in the same order.
    """
    from flwr.app import Message
    from flwr.common.serde import context_from_proto, fab_from_proto, run_from_proto
    from flwr.proto.node_pb2 import Node
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest, PullTaskInputRequest
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_confirm_message_received_fn_protobuf,
        make_pull_object_fn_protobuf,
    )
    from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree
    from flwr.supercore.task_identity import TaskIdentity

    res = client.PullTaskInput(PullTaskInputRequest())
    TaskIdentity.task_id = res.task_id
    TaskIdentity.run_id = res.run.run_id
    TaskIdentity.node_id = res.context.node_id
    context = context_from_proto(res.context)
    run = run_from_proto(res.run)
    fab = fab_from_proto(res.fab)
    pulled = client.PullMessages(PullAppMessagesRequest())
    if not pulled.messages_list:
        raise RuntimeError("No messages received from Runtime API")
    node = Node(node_id=context.node_id)
    tree = pulled.message_object_trees[0]
    message = pull_and_inflate_object_from_tree(
        tree,
        make_pull_object_fn_protobuf(client.PullObject, node, context.run_id),
        make_confirm_message_received_fn_protobuf(
            client.ConfirmMessageReceived, node, context.run_id
        ),
        return_type=Message,
        initial_backoff=0.02,
        backoff_cap=1.0,
    )
    message.metadata.__dict__["_message_id"] = tree.object_id
    return message, context, run, fab


#: FABs installed by this worker (by hash): a run's FAB is installed at its first task.
_INSTALLED: set[str] = set()


def serve(
    address: str,
    root_certificates: str | None = None,
    auth_secret: bytes | None = None,
    poll_interval: float = 0.05,
    max_tasks: int | None = None,
) -> int:
    """Acquire ClientApp tasks from the SuperNode's Runtime API at ``address`` and run them.

    Polls every ``poll_interval`` seconds while idle (Flower's SuperExec: 1 s by default,
    ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``). Waits for a SuperNode that is not up yet and
    for one that restarts (Flower's HTTP retries). Returns after ``max_tasks`` tasks
    (``None``: never); the number of tasks run.
    """
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore import log
    from flwr.supercore.constant import TaskType
    from flwr.supercore.interceptors import (
        RuntimeVersionHttpInterceptor,
        SuperExecAuthHttpInterceptor,
    )

    interceptors: list[Any] = [RuntimeVersionHttpInterceptor(component_name="SuperExec")]
    if auth_secret:
        interceptors.append(
            SuperExecAuthHttpInterceptor(
                master_secret=auth_secret,
                protected_methods=frozenset({"/flwr.proto.Runtime/AcquireTask"}),
            )
        )
    from . import clientapp

    clientapp.LONG_LIVED = True  # its discovery reply asks the server to keep the node awake
    client, _ = _runtime_client(address, interceptors, root_certificates)
    request = AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
    done = 0
    log(
        INFO, "fedforest ClientApp worker: serving the Runtime API at %s (%.2f CPU s so far)",
        address, time.process_time(),
    )  # fmt: skip
    try:
        while max_tasks is None or done < max_tasks:
            res = client.AcquireTask(request)
            if res.HasField("task") and res.token:
                if res.task.type != TaskType.CLIENT_APP:  # pragma: no cover - not requested
                    log(ERROR, "fedforest worker: skipped a %s task", res.task.type)
                    continue
                wall, cpu = time.perf_counter(), time.process_time()
                answered = run_task(address, res.token, root_certificates)
                done += 1
                log(
                    INFO, "fedforest worker: task %d %s in %.3f s (%.3f CPU s)", done,
                    "answered" if answered else "failed",
                    time.perf_counter() - wall, time.process_time() - cpu,
                )  # fmt: skip
                continue  # the next message may already be waiting
            time.sleep(poll_interval)
    finally:
        client.close()
    return done


def build_parser(prog: str = "fedforest flower-worker") -> argparse.ArgumentParser:
    """The worker's command line (``fedforest flower-worker`` and ``python -m``)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Serve a Flower SuperNode's ClientApp tasks in one long-lived process (the "
            "SuperNode runs with --isolation process; docs/flower.md)."
        ),
    )
    parser.add_argument(
        "--runtime-api-address", required=True, metavar="HOST:PORT",
        help="the SuperNode's Runtime API (its --host and --port)",
    )  # fmt: skip
    tls = parser.add_mutually_exclusive_group(required=True)
    tls.add_argument("--insecure", action="store_true", help="the Runtime API without TLS")
    tls.add_argument(
        "--root-certificates", metavar="CA_PEM",
        help="CA certificate that verifies the Runtime API's TLS certificate",
    )  # fmt: skip
    parser.add_argument(
        "--superexec-auth-secret-file", metavar="PATH",
        help="the secret the SuperNode was given with the same option (SuperExec auth)",
    )  # fmt: skip
    parser.add_argument(
        "--poll-interval", type=float, default=0.05, metavar="SECONDS",
        help="how often an idle worker asks for a task (default: 0.05)",
    )  # fmt: skip
    parser.add_argument(
        "--allow-untested-flower", action="store_true",
        help=f"run on a Flower other than {TESTED_FLOWER} (untested)",
    )  # fmt: skip
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "fedforest flower-worker") -> int:
    """Parse the command line, check Flower's version, preload, serve until stopped."""
    args = build_parser(prog).parse_args(argv)
    try:
        check_flower_version(args.allow_untested_flower)
    except RuntimeError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if not 0.01 <= args.poll_interval <= 60:
        print(f"{prog}: error: --poll-interval must be within 0.01 and 60 s", file=sys.stderr)
        return 2
    secret = None
    if args.superexec_auth_secret_file:
        from flwr.supercore.auth.superexec_secret import load_superexec_auth_secret

        secret = load_superexec_auth_secret(secret_file=args.superexec_auth_secret_file)
    for name in PRELOAD:
        importlib.import_module(name)
    # SIGTERM ends the worker (and a task under way, which still reports its end); Ctrl-C
    # too, except during a task, which it ends alone (see _interrupt_task).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        serve(args.runtime_api_address, args.root_certificates, secret, args.poll_interval)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line
    sys.exit(main(prog="python -m fedforest.transport.flower.worker"))
