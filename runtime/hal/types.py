"""HAL plain data: operand/operation enums with NNAPI numbering, result codes, model records.

Everything here is frozen dataclasses and IntEnums so that it can be serialised for IPC
without pickle. Validation lives in ``runtime.hal.validate``.

Example:
    >>> Operand(OperandType.TENSOR_FLOAT32, (1, 4)).byte_size()
    16
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class ResultCode(enum.IntEnum):
    """ANEURALNETWORKS_* result codes, same numbers as NeuralNetworks.h."""

    NO_ERROR = 0
    OUT_OF_MEMORY = 1
    INCOMPLETE = 2
    UNEXPECTED_NULL = 3
    BAD_DATA = 4
    OP_FAILED = 5
    BAD_STATE = 6
    UNMAPPABLE = 7
    OUTPUT_INSUFFICIENT_SIZE = 8
    UNAVAILABLE_DEVICE = 9
    MISSED_DEADLINE_TRANSIENT = 10
    MISSED_DEADLINE_PERSISTENT = 11
    RESOURCE_EXHAUSTED_TRANSIENT = 12
    RESOURCE_EXHAUSTED_PERSISTENT = 13
    DEAD_OBJECT = 14


class ErrorStatus(enum.IntEnum):
    """HAL 1.3 ErrorStatus as returned by drivers."""

    NONE = 0
    DEVICE_UNAVAILABLE = 1
    GENERAL_FAILURE = 2
    OUTPUT_INSUFFICIENT_SIZE = 3
    INVALID_ARGUMENT = 4
    MISSED_DEADLINE_TRANSIENT = 5
    MISSED_DEADLINE_PERSISTENT = 6
    RESOURCE_EXHAUSTED_TRANSIENT = 7
    RESOURCE_EXHAUSTED_PERSISTENT = 8
    DEAD_OBJECT = 9  # transport failure, not a HAL value on Android


class OperandType(enum.IntEnum):
    FLOAT32 = 0
    INT32 = 1
    UINT32 = 2
    TENSOR_FLOAT32 = 3
    TENSOR_INT32 = 4
    TENSOR_QUANT8_ASYMM = 5
    BOOL = 6
    TENSOR_QUANT16_SYMM = 7
    TENSOR_FLOAT16 = 8
    TENSOR_BOOL8 = 9
    FLOAT16 = 10
    TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
    TENSOR_QUANT16_ASYMM = 12
    TENSOR_QUANT8_SYMM = 13
    TENSOR_QUANT8_ASYMM_SIGNED = 14
    SUBGRAPH = 15  # ANEURALNETWORKS_MODEL in the NDK
    OEM = 10000  # ANEURALNETWORKS_OEM_SCALAR: an opaque scalar (deprecated; see extensions)
    TENSOR_OEM_BYTE = 10001  # ANEURALNETWORKS_TENSOR_OEM_BYTE (deprecated)


class OperationType(enum.IntEnum):
    ADD = 0
    AVERAGE_POOL_2D = 1
    CONCATENATION = 2
    CONV_2D = 3
    DEPTHWISE_CONV_2D = 4
    DEPTH_TO_SPACE = 5
    DEQUANTIZE = 6
    EMBEDDING_LOOKUP = 7
    FLOOR = 8
    FULLY_CONNECTED = 9
    HASHTABLE_LOOKUP = 10
    L2_NORMALIZATION = 11
    L2_POOL_2D = 12
    LOCAL_RESPONSE_NORMALIZATION = 13
    LOGISTIC = 14
    LSH_PROJECTION = 15
    LSTM = 16
    MAX_POOL_2D = 17
    MUL = 18
    RELU = 19
    RELU1 = 20
    RELU6 = 21
    RESHAPE = 22
    RESIZE_BILINEAR = 23
    RNN = 24
    SOFTMAX = 25
    SPACE_TO_DEPTH = 26
    SVDF = 27
    TANH = 28
    BATCH_TO_SPACE_ND = 29
    DIV = 30
    MEAN = 31
    PAD = 32
    SPACE_TO_BATCH_ND = 33
    SQUEEZE = 34
    STRIDED_SLICE = 35
    SUB = 36
    TRANSPOSE = 37
    ABS = 38
    ARGMAX = 39
    ARGMIN = 40
    AXIS_ALIGNED_BBOX_TRANSFORM = 41
    BIDIRECTIONAL_SEQUENCE_LSTM = 42
    BIDIRECTIONAL_SEQUENCE_RNN = 43
    BOX_WITH_NMS_LIMIT = 44
    CAST = 45
    CHANNEL_SHUFFLE = 46
    DETECTION_POSTPROCESSING = 47
    EQUAL = 48
    EXP = 49
    EXPAND_DIMS = 50
    GATHER = 51
    GENERATE_PROPOSALS = 52
    GREATER = 53
    GREATER_EQUAL = 54
    GROUPED_CONV_2D = 55
    HEATMAP_MAX_KEYPOINT = 56
    INSTANCE_NORMALIZATION = 57
    LESS = 58
    LESS_EQUAL = 59
    LOG = 60
    LOGICAL_AND = 61
    LOGICAL_NOT = 62
    LOGICAL_OR = 63
    LOG_SOFTMAX = 64
    MAXIMUM = 65
    MINIMUM = 66
    NEG = 67
    NOT_EQUAL = 68
    PAD_V2 = 69
    POW = 70
    PRELU = 71
    QUANTIZE = 72
    QUANTIZED_16BIT_LSTM = 73
    RANDOM_MULTINOMIAL = 74
    REDUCE_ALL = 75
    REDUCE_ANY = 76
    REDUCE_MAX = 77
    REDUCE_MIN = 78
    REDUCE_PROD = 79
    REDUCE_SUM = 80
    ROI_ALIGN = 81
    ROI_POOLING = 82
    RSQRT = 83
    SELECT = 84
    SIN = 85
    SLICE = 86
    SPLIT = 87
    SQRT = 88
    TILE = 89
    TOPK_V2 = 90
    TRANSPOSE_CONV_2D = 91
    UNIDIRECTIONAL_SEQUENCE_LSTM = 92
    UNIDIRECTIONAL_SEQUENCE_RNN = 93
    RESIZE_NEAREST_NEIGHBOR = 94
    QUANTIZED_LSTM = 95
    IF = 96
    WHILE = 97
    ELU = 98
    HARD_SWISH = 99
    FILL = 100
    RANK = 101
    OEM_OPERATION = 10000  # ANEURALNETWORKS_OEM_OPERATION (deprecated; see extensions)


class OperandLifetime(enum.IntEnum):
    TEMPORARY_VARIABLE = 0
    SUBGRAPH_INPUT = 1
    SUBGRAPH_OUTPUT = 2
    CONSTANT_COPY = 3
    CONSTANT_REFERENCE = 4
    NO_VALUE = 5
    SUBGRAPH = 6


class FuseCode(enum.IntEnum):
    NONE = 0
    RELU = 1
    RELU1 = 2
    RELU6 = 3


class PaddingCode(enum.IntEnum):
    SAME = 1
    VALID = 2


class Preference(enum.IntEnum):
    LOW_POWER = 0
    FAST_SINGLE_ANSWER = 1
    SUSTAINED_SPEED = 2


class Priority(enum.IntEnum):
    LOW = 90
    MEDIUM = 100
    HIGH = 110


class DeviceType(enum.IntEnum):
    UNKNOWN = 0
    OTHER = 1
    CPU = 2
    GPU = 3
    ACCELERATOR = 4


_DTYPES = {
    OperandType.FLOAT32: np.float32, OperandType.INT32: np.int32, OperandType.UINT32: np.uint32,
    OperandType.TENSOR_FLOAT32: np.float32, OperandType.TENSOR_INT32: np.int32,
    OperandType.TENSOR_QUANT8_ASYMM: np.uint8, OperandType.BOOL: np.bool_,
    OperandType.TENSOR_QUANT16_SYMM: np.int16, OperandType.TENSOR_FLOAT16: np.float16,
    OperandType.TENSOR_BOOL8: np.bool_, OperandType.FLOAT16: np.float16,
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: np.int8,
    OperandType.TENSOR_QUANT16_ASYMM: np.uint16, OperandType.TENSOR_QUANT8_SYMM: np.int8,
    OperandType.TENSOR_QUANT8_ASYMM_SIGNED: np.int8, OperandType.TENSOR_OEM_BYTE: np.uint8,
}
SCALAR_TYPES = frozenset({OperandType.FLOAT32, OperandType.INT32, OperandType.UINT32,
                          OperandType.BOOL, OperandType.FLOAT16})
QUANT_TYPES = frozenset({OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
                         OperandType.TENSOR_QUANT8_SYMM, OperandType.TENSOR_QUANT16_SYMM,
                         OperandType.TENSOR_QUANT16_ASYMM,
                         OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL})


def numpy_dtype(operand_type: OperandType) -> np.dtype:
    """The numpy dtype that holds one element of ``operand_type``."""
    try:
        return np.dtype(_DTYPES[operand_type])
    except KeyError:
        raise ValueError(f"operand type {operand_type!r} has no element dtype") from None


def is_scalar(operand_type: OperandType) -> bool:
    return operand_type in SCALAR_TYPES


def is_opaque(operand_type: int) -> bool:
    """True for types whose byte size only a driver knows: vendor extension types (a nonzero
    prefix in the high 16 bits, see ``runtime.hal.extensions``) and the OEM scalar."""
    return operand_type == OperandType.OEM or int(operand_type) > 0xFFFF


@dataclass(frozen=True, slots=True)
class ChannelQuant:
    """Per-channel quantisation of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand."""

    scales: tuple[float, ...]
    channel_dim: int


@dataclass(frozen=True, slots=True)
class DataLocation:
    """Where a constant's bytes live: pool -1 is the model's own value blob."""

    pool_index: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Operand:
    type: OperandType
    dimensions: tuple[int, ...] = ()
    scale: float = 0.0
    zero_point: int = 0
    lifetime: OperandLifetime = OperandLifetime.TEMPORARY_VARIABLE
    location: DataLocation | None = None
    channel_quant: ChannelQuant | None = None
    #: Opaque data of an extension operand (HAL ``extraParams.extension``); None: not set.
    extension_data: bytes | None = None

    def element_count(self) -> int | None:
        """Number of elements, or None when a dimension is unknown (0) or, for a tensor, the rank
        (no dimensions: NNAPI's unknown rank)."""
        if not self.dimensions and self.type not in SCALAR_TYPES:
            return None
        count = 1
        for dim in self.dimensions:
            if dim == 0:
                return None
            count *= dim
        return count

    def byte_size(self) -> int | None:
        count = self.element_count()
        if count is None or self.type == OperandType.SUBGRAPH or is_opaque(self.type):
            return None
        return count * numpy_dtype(self.type).itemsize


@dataclass(frozen=True, slots=True)
class Operation:
    type: OperationType
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subgraph:
    operands: tuple[Operand, ...]
    operations: tuple[Operation, ...]
    input_indexes: tuple[int, ...]
    output_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class HalModel:
    """A finished model as a driver sees it (HAL 1.3 ``Model``)."""

    main: Subgraph
    referenced: tuple[Subgraph, ...] = ()
    operand_values: bytes = b""
    pools: tuple = field(default=())
    relax_float32_to_float16: bool = False
    #: HAL ``extensionNameToPrefix``: (extension name, prefix) pairs, a bijection.
    extension_name_to_prefix: tuple[tuple[str, int], ...] = ()
    #: For kernel spans only (not HAL): the plan step this model is (-1: a whole model) and each
    #: main operation's index in the whole model (empty: its own indexes).
    step_index: int = -1
    operation_origins: tuple[int, ...] = ()
