"""The TFLite NNAPI delegate: run a .tflite model as a phone's TFLite would with NNAPI.

``validate`` checks each operator as the delegate does at a feature level (27..30) and names
why one stays out; ``partition`` cuts the graph into delegated partitions and CPU operators
(at most ``max_partitions`` partitions, the largest kept); ``delegation.decide`` puts the two
together; ``delegated.DelegatedModel`` runs the result: each partition an NNAPI model compiled
once for the chosen devices, every other operator on LiteRT's CPU kernels in this process.

Example:
    >>> from nnscope.runtime.delegate import decide
    >>> delegation = decide(open("tests/data/models/face_landmark.tflite", "rb").read())  # from a clone  # doctest: +SKIP
    >>> delegation.summary()  # doctest: +SKIP
    '...operators delegated, in 1 partition'
"""
from nnscope.runtime.delegate.delegation import (DEFAULT_MAX_PARTITIONS, CpuOperator, Delegation,
                                                 Partition, decide)
from nnscope.runtime.delegate.validate import FEATURE_LEVELS, Category, Verdict

__all__ = ["DEFAULT_MAX_PARTITIONS", "FEATURE_LEVELS", "Category", "CpuOperator", "Delegation",
           "Partition", "Verdict", "decide"]
