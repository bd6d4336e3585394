"""``nnscope`` subcommands: ``run`` (execute and profile a model), ``devices``, ``cts``,
``bench`` (MLTS-style latency, accuracy and stress results), ``delegation`` (what the TFLite
NNAPI delegate would take of a .tflite model, and why not the rest).

Each module has ``add_parser(subparsers)`` and ``main(args) -> int``; ``runtime.__main__``
wires them into argparse and turns :class:`~runtime.api.NnError` into one-line errors.

Example:
    $ nnscope run --executions 10 --trace run.json
    $ nnscope devices --json
    $ nnscope cts
"""
COMMANDS = ("run", "devices", "cts", "bench", "delegation")
