"""NNAPI CTS vectors: load them, judge outputs with AOSP's criteria, run them against a backend.

Example:
    >>> from nnscope.runtime.cts import harness, loader                  # doctest: +SKIP
    >>> report = harness.run_vectors(loader.select_files(["ADD"]))  # doctest: +SKIP
    >>> print(report.summary())                                   # doctest: +SKIP
    120 passed, 0 failed, 30 skipped
"""
