"""Tasks on a Dask cluster, for `preprocess` and `shard --engine dask` (docs/data.md).

    with dask_engine(settings.engine, address, workers=4) as engine:
        for result in engine.run(fn, specs, "preprocess"):   # in the order of `specs`
            ...

`address` (or Dask's own DASK_SCHEDULER_ADDRESS) names a running scheduler; without one a
local cluster of `workers` single-threaded processes is started and stopped here. Each task
is retried `engine.retries` times by Dask, a lost worker included; a task's MapnetError (bad input,
the same on every try) comes back at once, untried again. Dask is an optional extra
(`mapnet[distributed]`): it is imported only here, and only when asked for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence

from ..errors import MapnetError
from ..settings import EngineSettings

INSTALL = "pip install 'mapnet[distributed]' (in a checkout: uv sync --extra distributed)"
# Dask's schemes for a scheduler another process can reach; a bare HOST:PORT is tcp, as Dask reads it.
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
EXPECTED = "tcp://HOST:PORT (e.g. tcp://head:8786; tls://, ws://, wss:// and ucx:// too)"
CONNECT_TIMEOUT = "30s"  # how long a Client waits for the scheduler before the run is refused
_ADDRESS = re.compile(
    r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):(?P<port>\d+)"
)


def address_problem(address: str) -> str | None:
    """Why `address` is not a scheduler address Dask can connect to (None: it is one). Checked before any work:
    Dask itself would say it with an 80-line traceback from inside Client(), after the output folder was made."""
    if re.fullmatch(r"inproc://\S+", address.strip()):  # a cluster in this very process (a library caller's)
        return None
    m = _ADDRESS.fullmatch(address.strip())
    if m is None:
        return "not of the form " + EXPECTED
    if m["scheme"] is not None and m["scheme"].lower() not in SCHEMES:
        return f"Dask has no {m['scheme']}:// scheme; expected {EXPECTED}"
    if not 1 <= int(m["port"]) <= 65535:
        return f"port {m['port']} is not in 1-65535; expected {EXPECTED}"
    return None


def scheduler_address(address: str | None) -> str | None:
    """The scheduler `--engine dask` connects to: `address`, else Dask's own setting (DASK_SCHEDULER_ADDRESS, or
    scheduler-address in a Dask config file), else None (a local cluster); a malformed one is one line naming
    where it came from."""
    where = f"--engine-address {address!r}"
    if not address:
        env = os.environ.get("DASK_SCHEDULER_ADDRESS")
        if env is not None:
            address, where = env, f"DASK_SCHEDULER_ADDRESS={env!r}"
        else:
            try:
                import dask
            except ImportError:
                return None  # `import_distributed` says what to install
            address = dask.config.get("scheduler-address", None)
            where = f"Dask's scheduler-address setting {address!r}"
    if not address:
        return None
    problem = address_problem(str(address))
    if problem:
        raise MapnetError(f"{where} is not a Dask scheduler address: {problem}")
    return str(address)


def import_distributed():
    try:
        import distributed
    except ImportError:
        raise MapnetError(f"--engine dask needs Dask distributed, which is not installed: {INSTALL}") from None
    return distributed


def _answered(fn: Callable, spec):
    """Runs on a worker: fn(spec) as (True, result), or a MapnetError as (False, its line). Dask retries a task
    that raises; a MapnetError names bad input, which every retry would meet again, so it is returned instead (a
    full disk too: a retry on the same worker meets it again; the line says which path)."""
    try:
        return True, fn(spec)
    except MapnetError as exc:
        return False, str(exc)


class DaskEngine:
    def __init__(self, client, retries: int):
        self.client, self.retries = client, retries

    @property
    def workers(self) -> int:
        return len(self.client.scheduler_info().get("workers", {}))

    def run(self, fn: Callable, specs: Sequence, what: str) -> Iterator:
        """fn(spec) for every spec as a Dask task; results in the order of `specs` (each as soon as it and
        those before it are done, so the caller merges while later tasks run)."""
        futures = self._submit(fn, specs, what)
        try:
            for i, future in enumerate(futures):
                yield self._answer(future, i, what)
        finally:
            self._cancel(futures)

    def as_completed(self, fn: Callable, specs: Sequence, what: str, every: float = 1.0) -> Iterator:
        """fn(spec) for every spec as a Dask task; (index, result) as each finishes, and (None, None) every `every`
        seconds while none does (the caller's moment to show progress). The first failure stops the rest."""
        distributed = import_distributed()
        futures = self._submit(fn, specs, what)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            pending = set(futures)
            while pending:
                try:
                    done, pending = distributed.wait(list(pending), timeout=every, return_when="FIRST_COMPLETED")
                except TimeoutError:  # none finished in `every` seconds
                    done = set()
                if not done:
                    yield None, None
                for future in sorted(done, key=lambda f: index[f.key]):
                    yield index[future.key], self._answer(future, index[future.key], what)
        finally:
            self._cancel(futures)

    def _submit(self, fn: Callable, specs: Sequence, what: str) -> list:
        # pure=False: a rerun must run the function again (it checks its own done-marker), never reuse
        # a result the scheduler still holds from an earlier client.
        # A key of its own per run: on a long-lived cluster, a task an earlier run left running must not be
        # taken for this run's.
        run = uuid.uuid4().hex[:12]
        return [
            self.client.submit(
                _answered, fn, spec, retries=self.retries, pure=False, key=f"mapnet-{what}-{run}-{i:05d}"
            )
            for i, spec in enumerate(specs)
        ]

    def _answer(self, future, i: int, what: str):
        distributed = import_distributed()
        try:
            ok, answer = future.result()
        except distributed.KilledWorker:
            raise MapnetError(
                f"{what} task {i}: the workers running it kept dying (killed, or out of memory?); "
                "finished tasks are kept: run the same command again"
            ) from None
        except Exception as exc:
            raise MapnetError(
                f"{what} task {i} failed after {self.retries} retries: {type(exc).__name__}: {exc}; "
                "finished tasks are kept: run the same command again"
            ) from None
        if not ok:
            raise MapnetError(answer)
        return answer

    def _cancel(self, futures: list) -> None:
        pending = [f for f in futures if not f.done()]
        if pending:  # a failed task stops the run: the others need not go on
            self.client.cancel(pending)


@contextlib.contextmanager
def dask_engine(
    settings: EngineSettings, address: str | None, workers: int, worker_envs: list[dict[str, str]] | None = None
) -> Iterator[DaskEngine]:
    """A client of the cluster at `address` (else DASK_SCHEDULER_ADDRESS), or of a local cluster started here:
    `workers` single-threaded processes, or one per entry of `worker_envs`, each with those environment variables
    (`compare --gpus`: each worker sees its own GPUs through CUDA_VISIBLE_DEVICES)."""
    distributed = import_distributed()
    address = None if worker_envs else scheduler_address(address)
    with contextlib.ExitStack() as stack:
        if worker_envs:
            stack.enter_context(_workers_skip_main())
            cluster = stack.enter_context(
                distributed.SpecCluster(
                    scheduler={"cls": distributed.Scheduler, "options": {"dashboard_address": ":0"}},
                    workers={
                        f"worker-{i}": {"cls": distributed.Nanny, "options": {"nthreads": 1, "env": env}}
                        for i, env in enumerate(worker_envs)
                    },
                    silence_logs=logging.ERROR,
                )
            )
            client = stack.enter_context(distributed.Client(cluster))
        elif address:
            try:
                client = stack.enter_context(distributed.Client(address, timeout=CONNECT_TIMEOUT))
            except Exception as exc:  # refused, timed out, a TLS scheme without certificates: one line, not Dask's
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                raise MapnetError(
                    f"cannot reach the Dask scheduler at {address} ({type(exc).__name__}: {first}); is "
                    "it running, and is the address right?"
                ) from None
        else:
            stack.enter_context(_workers_skip_main())
            # One thread per worker: spaCy and Moses hold the GIL, so threads would only share one core.
            # Dashboard on a free port: a second run on the same machine must not fight over 8787.
            cluster = stack.enter_context(
                distributed.LocalCluster(
                    n_workers=max(1, workers),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                )
            )
            client = stack.enter_context(distributed.Client(cluster))
        yield DaskEngine(client, settings.retries)


@contextlib.contextmanager
def _workers_skip_main() -> Iterator[None]:
    """Worker processes of a local cluster are spawned, and a spawned child first imports the parent's main
    script: for `mapnet` that is the whole CLI, torch included (~500 MB and seconds per worker, measured
    39 s for two workers on a busy machine against 7 s without). Tasks are mapnet_cli functions, never the
    main script's, so the children need not import it: multiprocessing skips that step for a main module
    without a file. Kept for the cluster's life, since a nanny restarts a lost worker the same way."""
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None:
        yield
        return
    main.__file__ = None
    try:
        yield
    finally:
        main.__file__ = path


def balanced_groups(sizes: Sequence[int], tasks: int) -> list[range]:
    """Contiguous index ranges of about equal total size: at most `tasks` of them (0: one per item).

    Depends on the sizes and `tasks` alone, so a rerun of the same command plans the same tasks.
    """
    n = len(sizes)
    if tasks <= 0 or tasks >= n:
        return [range(i, i + 1) for i in range(n)]
    weights = [max(int(s), 1) for s in sizes]  # synthetic input has no size on disk
    total = sum(weights)
    groups, start, seen = [], 0, 0
    for i, w in enumerate(weights):
        seen += w
        # close a group once it reaches its share of the total, leaving at least one item per later group
        if (
            len(groups) < tasks - 1
            and seen * tasks >= (len(groups) + 1) * total
            and n - (i + 1) >= tasks - len(groups) - 1
        ):
            groups.append(range(start, i + 1))
            start = i + 1
    groups.append(range(start, n))
    return [g for g in groups if len(g)]
