"""HAL plain data shared by the runtime and drivers (imports nothing else of ours)."""
from nnscope.runtime.hal.types import *  # noqa: F401,F403
