"""``--otlp [ENDPOINT]`` of ``nnscope run`` and ``nnscope bench``: the session's trace over OTLP.

Without a value the endpoint is ``$OTEL_EXPORTER_OTLP_ENDPOINT``, then OpenTelemetry's default
``http://localhost:4318`` (``tracing.exporters.otlp_endpoint``). The trace is sent after the
trace files are written; a collector that cannot be reached costs one warning line on stderr,
never a file or the exit status.

Example:
    $ nnscope run --otlp                          # to $OTEL_EXPORTER_OTLP_ENDPOINT or :4318
    $ nnscope run --otlp http://127.0.0.1:4318 --trace t.json
"""
from __future__ import annotations

import argparse
import sys


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--otlp", nargs="?", const="", default=None, metavar="ENDPOINT",
                        help="send the trace over OTLP/HTTP (default endpoint: "
                             "$OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318)")


def check(args, parser: argparse.ArgumentParser) -> None:
    """Resolve ``args.otlp`` to its endpoint (usage error, exit 2, for a malformed one)."""
    from nnscope.tracing.exporters import get_exporter, otlp_endpoint  # noqa: PLC0415

    value = args.otlp
    if value is None:
        return
    if value and not value.startswith(("otlp", "http://", "https://")):
        parser.error(f"--otlp: {value!r} is no OTLP endpoint (http://HOST:PORT or otlp://HOST:PORT;"
                     " a MODEL goes before a bare --otlp)")
    try:
        args.otlp = otlp_endpoint(value)
        get_exporter("otel")  # the OpenTelemetry packages are an extra: say so before the run
    except ValueError as error:
        parser.error(f"--otlp: {error}")


def send(trace_data, endpoint: str | None) -> bool:
    """Send ``trace_data`` to ``endpoint`` (nothing for None); False, after one warning line on
    stderr, when the collector did not take it."""
    if endpoint is None:
        return True
    from nnscope.tracing.exporters import ExportResult  # noqa: PLC0415
    from nnscope.tracing.exporters.otel import send as otlp_send  # noqa: PLC0415

    if otlp_send(trace_data, endpoint) is ExportResult.SUCCESS:
        return True
    print(f"nnscope: warning: the OTLP collector at {endpoint} did not take the trace "
          f"({trace_data.span_count()} spans); the trace files are written", file=sys.stderr)
    return False
