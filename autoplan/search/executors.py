"""How batches of plans are evaluated: in this process, or as Ray tasks (embedded or on a cluster).

Ray lives here and nowhere else. A trial takes milliseconds and a Ray task about one, so plans travel in
batches and several batches stay in flight (``ray.wait``) to keep every worker busy.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Callable, Iterable, Iterator, Protocol, Sequence, runtime_checkable

from autoplan.errors import SpecError
from autoplan.sim.simulate import Evaluation, evaluate
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy


def failed(s: Strategy, what: str, err: BaseException) -> Evaluation:
    """The record of a plan whose evaluation raised: no metrics, and the error as its violation."""
    message = (str(err).strip().splitlines() or [""])[0]
    return Evaluation(strategy=s, metrics=None, violations=(f"{what}: {type(err).__name__}: {message}",))


def evaluate_one(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> Evaluation:
    """``evaluate``, with an unexpected exception recorded against the plan instead of raised."""
    try:
        return evaluate(model, cluster, s)
    except Exception as err:  # noqa: BLE001 - one broken trial must not end a search
        return failed(s, "simulator error", err)


def evaluate_batch(model: ModelSpec, cluster: ClusterSpec, plans: Sequence[Strategy]) -> list[Evaluation]:
    """Evaluate plans one after another; an exception inside one becomes that plan's violation."""
    return [evaluate_one(model, cluster, s) for s in plans]


@runtime_checkable
class Executor(Protocol):
    """Evaluates batches of plans, yielding each batch's results in submission order; a plan whose evaluation
    raises comes back as a failed Evaluation (no metrics, the error as its violation), never as an exception.
    Every implementation passes tests/search/test_executors.py."""

    workers: int

    def map(self, model: ModelSpec, cluster: ClusterSpec,
            batches: Iterable[Sequence[Strategy]]) -> Iterator[list[Evaluation]]: ...

    def close(self) -> None: ...


class SerialExecutor:
    """Everything in this process (``--workers 0``)."""

    workers = 1

    def map(self, model: ModelSpec, cluster: ClusterSpec,
            batches: Iterable[Sequence[Strategy]]) -> Iterator[list[Evaluation]]:
        for batch in batches:
            yield evaluate_batch(model, cluster, batch)

    def close(self) -> None:
        return None


class RayExecutor:
    """Batches as Ray tasks: an embedded local Ray with ``workers`` CPUs, or an existing cluster at ``address``."""

    RETRIES = 3
    """Times a batch whose worker died is run again before its plans are recorded as failed."""

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        address = address or os.environ.get("RAY_ADDRESS")
        if address:
            _pass_token_through()
        import ray

        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            if address and address != "auto":
                _check_reachable(address)
                _check_authenticated(address)
            try:
                if address:
                    # attaching: the cluster decides its resources, so num_cpus is never passed
                    ray.init(address=address, log_to_driver=False, include_dashboard=False)
                else:
                    # "local": always a fresh embedded instance, never a stray cluster another process left running
                    ray.init(address="local", num_cpus=workers or os.cpu_count() or 1, log_to_driver=False,
                             include_dashboard=False)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise SpecError(f"cannot reach the Ray cluster at {address!r}: {err}") from None
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # a worker process that dies (killed, out of memory, a node lost) takes its batch with it: Ray runs the
        # batch again elsewhere, up to RETRIES times; exceptions inside a plan never reach Ray (evaluate_one)
        self._task = ray.remote(max_retries=self.RETRIES, retry_exceptions=False)(evaluate_batch)

    def map(self, model: ModelSpec, cluster: ClusterSpec,
            batches: Iterable[Sequence[Strategy]]) -> Iterator[list[Evaluation]]:
        ray = self._ray
        model_ref, cluster_ref = ray.put(model), ray.put(cluster)
        pending: list = []
        done: dict = {}
        order: list = []
        plans: dict = {}
        it = iter(batches)
        exhausted = False
        while True:
            while not exhausted and len(pending) < 2 * self.workers:
                batch = next(it, None)
                if batch is None:
                    exhausted = True
                    break
                ref = self._task.remote(model_ref, cluster_ref, list(batch))
                pending.append(ref)
                order.append(ref)
                plans[ref] = list(batch)
            if not order:
                return
            ready, pending = ray.wait(pending, num_returns=1) if pending else ([], pending)
            for ref in ready:
                try:
                    done[ref] = ray.get(ref)
                except ray.exceptions.RayError as err:
                    # retries exhausted: every plan of the batch is recorded as failed and the search goes on
                    done[ref] = [failed(s, "worker failed", err) for s in plans[ref]]
            while order and order[0] in done:
                ref = order.pop(0)
                del plans[ref]
                yield done.pop(ref)

    def close(self) -> None:
        if self._owned and self._ray.is_initialized():
            self._ray.shutdown()


SWITCH_TO_RAY_AFTER_S = 10.0
"""Serial seconds before ``--workers auto`` starts Ray: about what an embedded Ray takes to start on a 2-core
machine (8.7 s measured, benchmarks/bench_search.py). Rent-or-buy: never more than twice the better choice's
time spent before the switch (Karlin et al. 1988, ski rental)."""


class AutoExecutor:
    """Evaluates in this process, and moves the rest of the work to an embedded Ray with ``workers`` CPUs once
    it has simulated serially for as long as Ray takes to start (short searches never pay for Ray)."""

    def __init__(self, workers: int, switch_after: float = SWITCH_TO_RAY_AFTER_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.workers = 1
        self._ray_workers = workers
        self._switch_after = switch_after
        self._clock = clock
        self._ray: RayExecutor | None = None
        self.serial_seconds = 0.0
        """Time spent simulating in this process so far (what Ray could have shared out)."""

    def map(self, model: ModelSpec, cluster: ClusterSpec,
            batches: Iterable[Sequence[Strategy]]) -> Iterator[list[Evaluation]]:
        if self._ray is not None:
            yield from self._ray.map(model, cluster, batches)
            return
        it = iter(batches)
        for batch in it:
            t0 = self._clock()
            results = evaluate_batch(model, cluster, batch)
            self.serial_seconds += self._clock() - t0
            yield results
            if self._ray_workers > 1 and self.serial_seconds >= self._switch_after:
                break
        else:
            return
        following = next(it, None)
        if following is None:
            return
        it = itertools.chain([following], it)
        self._ray = RayExecutor(self._ray_workers)
        self.workers = self._ray.workers
        yield from self._ray.map(model, cluster, it)

    def close(self) -> None:
        if self._ray is not None:
            self._ray.close()


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail in seconds, in one line, when no Ray cluster answers at an address: ray.init would retry for a minute
    or more, printing Ray's warnings (22 lines) before its error."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            pass
        if "://" not in address:       # a GCS (ray:// is the Ray Client server, another service)
            _ask_gcs(f"{host or '127.0.0.1'}:{port}", timeout)
    except (OSError, ValueError) as err:
        raise SpecError(f"cannot reach the Ray cluster at {address[:200]!r} ({err}); start one with `ray start "
                        "--head` or leave --ray-address and RAY_ADDRESS unset to use an embedded Ray") from None


def _ask_gcs(hostport: str, timeout: float) -> None:
    """ConnectionError unless a Ray GCS answers there: its cluster ID (any answer from Ray, a refusal of
    credentials included, passes; what ray.init makes of it is its own)."""
    import grpc

    with grpc.insecure_channel(hostport) as channel:
        ask = channel.unary_unary("/ray.rpc.NodeInfoGcsService/GetClusterId",
                                  request_serializer=lambda _: b"", response_deserializer=bytes)
        try:
            ask(None, timeout=timeout)
        except grpc.RpcError as err:
            if err.code() not in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise ConnectionError(f"no Ray cluster answers there: {err.code().name.lower()}") from None


AUTH_MODE = "RAY_AUTH_MODE"
"""Ray's switch for token authentication (Ray ≥ 2.52: ``token`` or ``disabled``; ``ray start`` turns it on when a
token exists). Its clients read the token from RAY_AUTH_TOKEN, the file at RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token."""


def _token_available() -> bool:
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or os.path.isfile(path)


def _pass_token_through() -> None:
    """Attaching to a cluster with RAY_AUTH_MODE unset: use the token when there is one (as ``ray start`` does), so
    a cluster with token authentication accepts this driver; an explicit RAY_AUTH_MODE is kept."""
    if os.environ.get(AUTH_MODE) is None and _token_available():
        os.environ[AUTH_MODE] = "token"
        try:                                         # Ray reads its config once: refresh it if already imported
            from ray._raylet import Config
            Config.initialize("")
        except Exception:  # noqa: BLE001 - an older Ray without token authentication: nothing to refresh
            pass


def _check_authenticated(address: str) -> None:
    """Fail in seconds, saying so, when the cluster at ``address`` refuses this driver's credentials (ray.init
    would retry for about 20 s and then report the cluster as unreachable)."""
    if "://" in address:                             # ray:// client and http addresses have no GCS to ask
        return
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:                              # a Ray without token authentication
        return
    try:
        GcsClient(address)
    except AuthenticationError as err:
        mode = os.environ.get(AUTH_MODE, "unset")
        raise SpecError(f"the Ray cluster at {address!r} is reachable but refused authentication "
                        f"({str(err).split('.')[0]}); with token authentication set {AUTH_MODE}=token and give "
                        f"the cluster's token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; "
                        f"{AUTH_MODE} is {mode})") from None
    except Exception:  # noqa: BLE001 - any other trouble is ray.init's to report
        return


def make_executor(workers: int | None, address: str | None = None) -> Executor:
    """Serial for ``workers == 0`` (and no cluster address), else Ray."""
    if workers == 0 and not (address or os.environ.get("RAY_ADDRESS")):
        return SerialExecutor()
    return RayExecutor(workers, address)
