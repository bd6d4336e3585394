"""Small hand-written traces shared by the exporter tests."""
from __future__ import annotations

from tracing.span import ThreadTrack

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
