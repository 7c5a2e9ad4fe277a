"""How batches of plans are evaluated: in this process, or as Ray tasks (embedded or on a cluster).

Ray lives here and nowhere else. A trial takes milliseconds and a Ray task about one, so plans travel in
batches and several batches stay in flight (``ray.wait``) to keep every worker busy.
"""

from __future__ import annotations

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

    def map(self, model: ModelSpec, cluster: ClusterSpec, batches: Iterable[Sequence[Strategy]],
            remaining: Callable[[], int | None] | None = None, rounds: int = 1) -> Iterator[list[Evaluation]]:
        """``remaining`` (an upper bound of the plans the search may still simulate, None while it cannot tell) and
        ``rounds`` (the map calls they take) let an executor judge whether parallel workers pay."""
        ...

    def close(self) -> None: ...


class SerialExecutor:
    """Everything in this process (``--workers 0``)."""

    workers = 1

    def map(self, model: ModelSpec, cluster: ClusterSpec, batches: Iterable[Sequence[Strategy]],
            remaining: Callable[[], int | None] | None = None, rounds: int = 1) -> Iterator[list[Evaluation]]:
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
                    # "local": always a fresh embedded instance, never a stray cluster another process left running;
                    # private to this process, so without token authentication unless asked for: Ray 2.60 would
                    # otherwise write ~/.ray/auth_token, and a later run's disabled-mode cluster fails on it
                    os.environ.setdefault(AUTH_MODE, "disabled")
                    ray.init(address="local", num_cpus=workers or os.cpu_count() or 1, log_to_driver=False,
                             include_dashboard=False)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise SpecError(f"cannot reach the Ray cluster at {address!r}: {err}") from None
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # a worker process that dies (killed, out of memory, a node lost) takes its batch with it: Ray runs the
        # batch again elsewhere, up to RETRIES times; exceptions inside a plan never reach Ray (evaluate_one)
        self._task = ray.remote(max_retries=self.RETRIES, retry_exceptions=False)(evaluate_batch)

    def map(self, model: ModelSpec, cluster: ClusterSpec, batches: Iterable[Sequence[Strategy]],
            remaining: Callable[[], int | None] | None = None, rounds: int = 1) -> Iterator[list[Evaluation]]:
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


RAY_START_S = 10.0
"""Seconds an embedded Ray takes to start on a 2-core machine (6-9 s idle, 18 s at load 11; import 1.8 s), which
its workers must win back before it pays."""
RAY_EFFICIENCY = 0.8
"""Share of N workers' CPUs a search's simulation gets on Ray (the driver records results, Ray's daemons run)."""
RAY_ROUND_TRIP_S = 0.005
"""Seconds a map call (one sampler round) spends reaching Ray and back, whatever its size."""
RAY_MUST_SAVE = 2.0
"""Ray is chosen only when the model says it saves this many times its start: an estimate that errs by 2× in the
work left still never makes the search slower than serial."""


class AutoExecutor:
    """The default (``--workers`` not given): simulates the search's first batches in this process, measuring their
    CPU seconds per plan; once the search can say how many plans it may still simulate (``remaining``), decides
    once, before the rest of the work, whether an embedded Ray with ``workers`` CPUs wins back its start:

        saved = left · per_plan · (1 - 1 / (workers · RAY_EFFICIENCY)) - rounds · RAY_ROUND_TRIP_S
        Ray iff saved > RAY_MUST_SAVE · RAY_START_S

    and keeps that choice to the end (never switches later)."""

    def __init__(self, workers: int, start_s: float = RAY_START_S, clock: Callable[[], float] = time.process_time,
                 make_ray: Callable[[int], "Executor"] | None = None) -> None:
        self.workers = 1
        self._ray_workers = workers
        self._start_s = start_s
        self._clock = clock
        self._make_ray = make_ray or RayExecutor
        self._ray: Executor | None = None
        self._decided = workers <= 1
        self.serial_seconds = 0.0
        """CPU seconds spent simulating in this process before the choice."""
        self._plans = 0
        self.choice = "serial (one CPU)" if workers <= 1 else ""
        """The choice and why, once made."""

    def map(self, model: ModelSpec, cluster: ClusterSpec, batches: Iterable[Sequence[Strategy]],
            remaining: Callable[[], int | None] | None = None, rounds: int = 1) -> Iterator[list[Evaluation]]:
        """``remaining``: an upper bound of the plans the search may still simulate after those yielded (None
        while it cannot tell); ``rounds``: how many map calls those take (1 for an exact search, which makes one;
        a sampler makes one per round)."""
        if self._ray is not None:
            yield from self._ray.map(model, cluster, batches)
            return
        it = iter(batches)
        for batch in it:
            t0 = self._clock()
            results = evaluate_batch(model, cluster, batch)
            if not self._decided:
                self.serial_seconds += self._clock() - t0
                self._plans += len(batch)
            yield results
            if not self._decided and remaining is not None:
                left = remaining()
                if left is not None:
                    self._decide(left, rounds)
                    if self._ray is not None:
                        yield from self._ray.map(model, cluster, it)
                        return

    def _decide(self, left: int, rounds: int) -> None:
        self._decided = True
        per_plan = self.serial_seconds / max(1, self._plans)
        share = 1.0 - 1.0 / (self._ray_workers * RAY_EFFICIENCY)
        saved = left * per_plan * share - rounds * RAY_ROUND_TRIP_S
        if saved > RAY_MUST_SAVE * self._start_s:
            self._ray = self._make_ray(self._ray_workers)
            self.workers = self._ray.workers
            self.choice = (f"Ray with {self._ray_workers} workers: {left} plans left at {1e3 * per_plan:.1f} ms "
                           f"each, {saved:.0f} s saved against its {self._start_s:.0f} s start")
        else:
            self.choice = (f"serial: {left} plans left at {1e3 * per_plan:.1f} ms each; Ray would save {saved:.1f} "
                           f"s, less than {RAY_MUST_SAVE:g}× its {self._start_s:.0f} s start")

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
