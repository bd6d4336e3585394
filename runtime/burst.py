"""``Burst``: a sequence of executions of one compilation (ANeuralNetworksBurst).

Creating a burst configures one burst channel per driver step of the compilation's plan
(``IPreparedModel.configureExecutionBurst``: request and result FMQs in shared memory and a
listener thread in the driver; see :mod:`runtime.drivers.ipc.client.burst`). Steps on in-process
devices (the CPU) run as in ``compute()``. With ``Preference.LOW_POWER`` the runtime never
polls a result ring; otherwise it polls briefly before it sleeps (``NNSCOPE_BURST_POLL_US``). A driver that cannot configure a burst leaves its
step on the ordinary execute path, as AOSP's runtime does. ``Execution.burst_compute(burst)``
runs an execution through the burst, one at a time per burst.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime import Execution, get_device
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> compilation = Compilation.for_devices(tiny_add(), [get_device("nnapi-reference")])
    >>> compilation.finish()
    >>> frames = [np.full((1, 4), i, np.float32) for i in range(3)]
    >>> out = np.empty((1, 4), np.float32)
    >>> with Burst(compilation) as burst:
    ...     for frame in frames:
    ...         execution = Execution(compilation)
    ...         execution.set_input(0, frame); execution.set_input(1, frame); execution.set_output(0, out)
    ...         execution.burst_compute(burst)
    ...         execution.free()
    >>> out.tolist()
    [[4.0, 4.0, 4.0, 4.0]]
    >>> compilation.free()
"""
from __future__ import annotations

import threading

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _checks as checks
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import Preference
from nnscope.tracing import Phase

_LABEL = "BurstBuilder"


class Burst:
    """A burst object for ``compilation`` (finished). Use :meth:`free` or ``with``.

    Raises:
        NnError: UNEXPECTED_NULL for None, BAD_DATA for something that is not a Compilation,
            BAD_STATE for an unfinished compilation.
    """

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksBurst_create")
    def __init__(self, compilation: Compilation):
        call = "Burst_create"
        checks.not_null(compilation, call, "compilation")
        if not isinstance(compilation, Compilation):
            raise checks.bad(call, f"expected a Compilation, got {type(compilation).__name__}")
        compilation.check_executable(call)
        self.compilation = compilation
        low_power = compilation.preference == Preference.LOW_POWER
        self._controllers = {step.index: _configure(step, low_power) for step in compilation.plan.steps}
        self._busy = threading.Lock()
        self._freed = False

    @property
    def controllers(self) -> dict:
        """Step index -> the step's burst controller (None: the step runs without a burst)."""
        return dict(self._controllers)

    def prepared_for(self, step):
        """What runs ``step`` in this burst: its controller, or its prepared model."""
        return self._controllers.get(step.index) or step.prepared

    @staticmethod
    def enter(burst, execution, call: str) -> None:
        """:meth:`begin` on ``burst``; UNEXPECTED_NULL for None, BAD_DATA for a non-Burst."""
        checks.not_null(burst, call, "burst")
        if not isinstance(burst, Burst):
            raise checks.bad(call, f"expected a Burst, got {type(burst).__name__}")
        burst.begin(execution, call)

    def begin(self, execution, call: str) -> None:
        """Enter one execution. NnError: BAD_DATA for another compilation's execution,
        BAD_STATE when freed or running another execution."""
        if execution.compilation is not self.compilation:
            raise checks.bad(call, "the burst and the execution come from different compilations")
        if self._freed:
            raise NnError(ResultCode.BAD_STATE, f"{call}: the burst was freed")
        if not self._busy.acquire(False):
            raise NnError(ResultCode.BAD_STATE, f"{call}: the burst is running another execution")

    def end(self) -> None:
        self._busy.release()

    def free(self) -> None:
        """Release the burst channels (ANeuralNetworksBurst_free); idempotent."""
        with tracing.runtime(Phase.TERMINATION, "ANeuralNetworksBurst_free"):
            if self._freed:
                return
            self._freed = True
            for controller in self._controllers.values():
                if controller is not None:
                    controller.release()

    def __enter__(self) -> Burst:
        return self

    def __exit__(self, *exc) -> None:
        self.free()


def _configure(step, low_power: bool):
    step.device.launch()  # a running driver joins a trace session started since
    try:
        controller = step.prepared.configure_burst(low_power)
    except HalError as error:
        vlog.log("execution", _LABEL, "step %d on %s: no burst (%s); it runs without one",
                 step.index, step.device.name, error)
        return None
    if controller is None:
        return None
    vlog.log("execution", _LABEL, "step %d on %s: burst %d", step.index, step.device.name,
             controller.burst_id)
    return controller
