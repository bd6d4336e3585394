"""Heavy optional parts are extras (issue 26): without the OpenTelemetry or Perfetto packages,
``--otlp`` and ``--perfetto`` stop before the run with one line naming the extra to install, and
a Perfetto trace given to parse_systrace gets the same line instead of a traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO

#: Runs the CLI with a package made unimportable (``sys.modules[name] = None``), as if the extra
#: that brings it were not installed.
WITHOUT = "import sys; sys.modules[{missing!r}] = None; from {module} import main; sys.exit(main({argv!r}))"


def _without(missing: str, module: str, argv: list[str]) -> subprocess.CompletedProcess:
    code = WITHOUT.format(missing=missing, module=module, argv=argv)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.mark.parametrize(("missing", "flags", "extra"), [
    ("opentelemetry", ["--otlp"], "otlp"),
    ("perfetto", ["--perfetto", "t.perfetto-trace"], "perfetto"),
])
def test_a_missing_extra_is_one_usage_line_before_the_run(missing, flags, extra, tmp_path):
    done = _without(missing, "nnscope.runtime.__main__", ["run", "--executions", "1", *flags])
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "NNAPI timing summary" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert f"pip install 'nnscope[{extra}]'" in last and missing in last


def test_parse_systrace_names_the_extra_for_a_perfetto_trace(tmp_path):
    trace = tmp_path / "t.perfetto-trace"
    trace.write_bytes(b"\x0a\x02\x08\x01")  # one Trace.packet field: sniffed as Perfetto
    done = _without("perfetto", "nnscope.parse_systrace.__main__", [str(trace)])
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "pip install 'nnscope[perfetto]'" in done.stderr
