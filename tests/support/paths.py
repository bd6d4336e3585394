"""Where the shared fixtures live: ``$NNSCOPE_SHARED`` or ``../shared`` beside the checkout."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("NNSCOPE_SHARED", REPO.parent / "shared")).resolve()
SYSTRACE_FIXTURES = SHARED / "fixtures" / "systrace"
CTS_FIXTURES = SHARED / "fixtures" / "nnapi-cts"
MODEL_FIXTURES = SHARED / "fixtures" / "models"
GEN_SYSTRACE = SHARED / "tools" / "gen_systrace.py"
