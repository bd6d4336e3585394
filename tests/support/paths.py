"""Where the test fixtures live: all inside the checkout (see NOTICE for their origin).

The systrace fixtures and the model live under ``tests/data/``; the CTS vectors ship with the
package (``runtime/cts/vectors/``) so ``nnscope cts`` finds them when installed.
"""
from pathlib import Path

from nnscope.runtime.cts.loader import PACKAGED_VECTORS

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
SYSTRACE_FIXTURES = DATA / "systrace"
MODEL_FIXTURES = DATA / "models"
CTS_FIXTURES = PACKAGED_VECTORS
GEN_SYSTRACE = REPO / "tests" / "support" / "gen_systrace.py"
