"""Executors for design-point evaluations (Monad §IV, scale-out).

``make_executor(None, workers)`` gives a ``concurrent.futures`` process pool
(``workers=0``: run in-process, for tests and timing); ``make_executor(
"tcp://HOST:PORT")`` connects to a Dask distributed scheduler and returns its
``concurrent.futures``-compatible executor (``Client.get_executor``).  A Dask
``Client`` object may be passed instead of an address.  Results are gathered
in submission order, so the optimiser is deterministic for a given seed
whatever executor runs it.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
from contextlib import contextmanager


class SerialExecutor(cf.Executor):
    """In-process executor with the concurrent.futures interface."""

    def submit(self, fn, /, *args, **kwargs):
        f = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:        # noqa: BLE001 -- delivered through the future
            f.set_exception(e)
        return f


@contextmanager
def make_executor(scheduler=None, workers=None):
    if scheduler is None:
        n = (os.cpu_count() or 1) if workers is None else workers
        if n == 0:
            yield SerialExecutor()
            return
        with cf.ProcessPoolExecutor(max_workers=n) as ex:
            yield ex
        return
    from distributed import Client
    if isinstance(scheduler, Client):
        yield scheduler.get_executor(pure=False)
        return
    if not str(scheduler).startswith(("tcp://", "tls://", "inproc://", "ucx://")):
        raise ValueError(f"scheduler address must look like tcp://HOST:PORT, got {scheduler!r}")
    client = Client(scheduler, timeout="10s")
    try:
        yield client.get_executor(pure=False)
    finally:
        client.close()


def run_ordered(ex, fn, tasks) -> list:
    futs = [ex.submit(fn, t) for t in tasks]
    return [f.result() for f in futs]


def reset_worker_caches() -> None:
    """Empty this process's model caches (op results, routes, network paths), so
    that a timed search on a reused worker starts as cold as on a new one."""
    from . import network, system
    system._op_cache.cache_clear()
    network._route.cache_clear()
    network._path.cache_clear()
