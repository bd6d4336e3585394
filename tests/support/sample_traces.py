"""Small hand-written traces shared by the exporter tests."""
from __future__ import annotations

from nnscope.tracing.span import ThreadTrack

#: The app's and the driver's process ids in the sample traces.
APP, DRIVER = 100, 200


def app_main_track() -> ThreadTrack:
    """The app's main thread: compute, then the HAL execute nested three deep inside it."""
    return ThreadTrack(APP, APP, "main", [
        (1_000, "[NN_LR_PE]ANeuralNetworksExecution_compute"),
        (1_100, "[NN_LI_PE]IPreparedModel::execute"),
        (1_150, "HIDL::IPreparedModel::execute::client"),
        (1_900, None),
        (1_950, None),
        (2_000, None),
    ])


# --- seeded random scope trees, in the recorder's event form ---------------------------------

#: Steps between two events (ns): many zeros, so that spans tie and have zero length.
_STEPS = (0, 0, 0, 1, 7, 999, 1_000, 1_001, 1_500, 40_000)


class _Thread:
    """Appends a thread's events as the recorder does: a switch is an end and a ``[SW]`` begin
    at one time, and the enclosing scope's end ends the switched-to span."""

    def __init__(self, rng, clock: int) -> None:
        self.rng, self.ts, self.events = rng, clock, []

    def tick(self) -> int:
        self.ts += self.rng.choice(_STEPS)
        return self.ts

    def begin(self, name: str) -> None:
        self.events.append((self.tick(), name))

    def end(self) -> None:
        self.events.append((self.tick(), None))

    def switch(self, name: str) -> None:
        ts = self.tick()
        self.events += [(ts, None), (ts, name)]

    def span(self, name: str, body=None) -> None:
        self.begin(name)
        if body is not None:
            body()
        self.end()


def _operations(thread: _Thread, layer: str) -> None:
    """The CPU executor's per-operation scopes: TRANSFORMATION, switched to COMPUTATION
    (and sometimes RESULTS); some operations record no switch."""
    for op in range(thread.rng.randint(1, 4)):
        thread.begin(f"[NN_{layer}_PTR]op{op}")
        if thread.rng.random() < 0.8:
            thread.switch(f"[SW][NN_{layer}_PCO]op{op}")
            if thread.rng.random() < 0.3:
                thread.switch(f"[SW][NN_{layer}_PR]op{op}")
        thread.end()


def _execution(app: _Thread) -> None:
    rng = app.rng
    app.span("[NN_LR_PE]ANeuralNetworksExecution_create")
    app.span("[NN_LR_PIO]ANeuralNetworksExecution_setInput",
             (lambda: app.span("[NN_LU_PU]validateRequest")) if rng.random() < 0.3 else None)
    if rng.random() < 0.5:
        app.span("[NN_LR_PE]ANeuralNetworksExecution_startCompute")
        app.span("[NN_LR_PE]ANeuralNetworksEvent_wait")
    else:
        app.span("[NN_LR_PE]ANeuralNetworksExecution_compute",
                 lambda: app.span("[NN_LC_PE]CpuExecutor::run", lambda: _operations(app, "LC")))
    app.span("[NN_LR_PE]ANeuralNetworksExecution_free")


def _application(app: _Thread) -> None:
    """The body of a ``[NN_LA_PO]`` run on the app's main thread."""
    rng = app.rng
    app.span("[NN_LR_PP]ANeuralNetworksModel_create")
    for _ in range(rng.randint(0, 3)):
        app.span("[NN_LR_PP]ANeuralNetworksModel_addOperand")
    app.span("[NN_LR_PC]ANeuralNetworksCompilation_finish", lambda: (
        app.span("[NN_LR_PC]ModelBuilder::partitionTheWork"),
        rng.random() < 0.5 and app.span("[SUB][NN_LR_PI]ANeuralNetworks_getDevice")))
    for phase in rng.sample(["[NN_LA_PWU]warmup", "[NN_LA_PBM]benchmark", None], 2):
        runs = lambda: [app.span("[NN_LA_PE]execution", lambda: _execution(app))  # noqa: E731
                        for _ in range(rng.randint(0, 2))]
        app.span(phase, runs) if phase else runs()
    app.span("[NN_LR_PT]ANeuralNetworksModel_free")


def _cpu_worker(thread: _Thread) -> None:
    for _ in range(thread.rng.randint(1, 3)):
        thread.span("[NN_LR_PE]StepExecutor::compute",
                    lambda: thread.span("[NN_LC_PE]CpuExecutor::run", lambda: _operations(thread, "LC")))


def _ipc_worker(thread: _Thread) -> None:
    thread.span("[NN_LI_PE]StepExecutor::startComputeOnDevice::execute",
                lambda: thread.span("HIDL::IPreparedModel::execute::client"))


def _driver(thread: _Thread) -> None:
    """A driver process's HAL thread: prepareModel (an ``HIDL::IDevice`` server mark makes
    it a driver process), then execute::server with the driver's CPU work and the
    callback's notify (what the Driver/Execution bucket pairs)."""
    thread.span("HIDL::IDevice::prepareModel_1_3::server",
                lambda: thread.span("[NN_LD_PC]SampleDriver::prepareModel"))
    for _ in range(thread.rng.randint(1, 3)):
        thread.span("HIDL::IPreparedModel::execute::server", lambda: thread.span(
            "[NN_LD_PE]SampleDriver::execute", lambda: _operations(thread, "LC")))
        thread.span("HIDL::IExecutionCallback::notify::client")


def random_trace(seed: int):
    """A :class:`~tracing.span.TraceData` of seeded random scope trees: one or two app
    processes, one ``[NN_LA_PO]`` run after the other (a run start resets parse_systrace's
    state), each with warmup/benchmark executions on its main thread, CPU and IPC worker
    threads, and up to two driver processes working inside the run. Many spans tie on
    time (also across threads) or have zero length, and switches are recorded as the
    recorder records them."""
    import random

    from nnscope.tracing.span import ThreadTrack, TraceData

    rng = random.Random(seed)
    clock = 10**12 + rng.randrange(10**9)
    drivers = [(DRIVER + 10 * n, f"driver{n}") for n in range(rng.randint(0, 2))]
    processes = {}
    threads: dict[tuple, tuple[str, _Thread]] = {}

    def thread(pid: int, tid: int, name: str) -> _Thread:
        if (pid, tid) not in threads:
            threads[pid, tid] = (name, _Thread(rng, clock))
        found = threads[pid, tid][1]
        found.ts = max(found.ts, clock)
        return found

    for number in range(rng.randint(1, 2)):
        pid = APP + 10 * number
        processes[pid] = f"app{number}"
        main = thread(pid, pid, "main")
        main.begin(f"[NN_LA_PO]model{number}")
        clock = main.ts
        _application(main)
        workers = [(pid, pid + 1, "cpu", _cpu_worker), (pid, pid + 2, "ipc", _ipc_worker)]
        workers = workers[:rng.randint(0, 2)] + [(d, d, "hwbinder", _driver) for d, _ in drivers]
        for worker_pid, tid, name, job in workers:
            worker = thread(worker_pid, tid, name)
            if job is _driver:  # after the app's executions: its marks all count in PO
                worker.ts = max(worker.ts, main.ts)
            worker.ts += rng.choice((0, 0, 1_000, 3_333))
            job(worker)
        main.ts = max(t.ts for _, t in threads.values())
        main.end()
        clock = main.ts + rng.choice((1, 1_000))  # after every end of the run
    processes.update(drivers)
    tracks = [ThreadTrack(pid, tid, name, t.events) for (pid, tid), (name, t) in threads.items()]
    if rng.random() < 0.3:  # collected mid-span: the last thread's final end is missing
        tracks[-1].events.pop()
    return TraceData(processes, tracks)
