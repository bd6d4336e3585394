"""``--otlp [ENDPOINT]`` of ``nnscope run`` and ``nnscope bench``: the session's trace over OTLP.

Without a value the endpoint is ``$OTEL_EXPORTER_OTLP_ENDPOINT``, then OpenTelemetry's default
``http://localhost:4318`` (``tracing.exporters.otlp_endpoint``). The trace is sent after the
command's files are written; a collector that cannot be reached costs one warning line on
stderr (naming the files written), never a file or the exit status, and nothing listening
there is found out in about 2 s.

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


def send(trace_data, endpoint: str | None, files: list[str] | None = None) -> bool:
    """Send ``trace_data`` to ``endpoint`` (nothing for None); False, after one warning line on
    stderr, when the collector did not take it. The line names the ``files`` the command wrote
    (``none`` for an empty list; nothing for None, where the files follow the trace).

    Nothing listening at ``endpoint`` is found out in at most ``otel.PROBE_TIMEOUT_S``, before
    any span is sent (the OTLP exporter's own retries would take about a minute).
    """
    if endpoint is None:
        return True
    from nnscope.tracing.exporters import ExportResult  # noqa: PLC0415
    from nnscope.tracing.exporters.otel import send as otlp_send, unreachable  # noqa: PLC0415

    written = "" if files is None else f"; files written: {', '.join(files) or 'none'}"
    why = unreachable(endpoint)
    if why is not None:
        print(f"nnscope: warning: trace not sent: no OTLP collector listens at {endpoint} "
              f"({why}){written}", file=sys.stderr)
        return False
    if otlp_send(trace_data, endpoint) is ExportResult.SUCCESS:
        return True
    print(f"nnscope: warning: the OTLP collector at {endpoint} did not take the trace "
          f"({trace_data.span_count()} spans){written}", file=sys.stderr)
    return False
