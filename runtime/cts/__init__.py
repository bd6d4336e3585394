"""NNAPI CTS vectors: load them, judge outputs with AOSP's criteria, run them against a backend.

Example:
    >>> from nnscope.runtime.cts import harness, loader
    >>> files = loader.select_files(["ADD"], mode="all")  # specs of ADD alone; mode="any": every spec using ADD
    >>> [path.name for path in files][:3]
    ['add.json.gz', 'add_broadcast_quant8.json.gz', 'add_quant8.json.gz']
    >>> report = harness.run_vectors(files)
    >>> print(report.summary())
    9 passed, 0 failed, 0 skipped
"""
