"""Issue 16, bug 8 on the reference CPU device (nnapi-reference): tiny valid requests whose
outputs or intermediates would be huge are answered OUTPUT_INSUFFICIENT_SIZE or
RESOURCE_EXHAUSTED_PERSISTENT before anything large is allocated, and pooling costs time linear
in the input whatever its window."""
from __future__ import annotations

import itertools
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from nnscope.runtime.drivers.cpu import CpuDevice, CpuPreparedModel
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.ops import budget
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.ops.pooling import max_pool, window_sum
from nnscope.runtime.ops.window import Window
from tests.runtime.drivers._hal import add_model, make_request
from tests.support import cost_models as cm

_MB = 1 << 20


def run_traced(model, request, budget_bytes=None):
    """(result, peak bytes numpy and Python allocated while executing)."""
    prepared = CpuDevice().prepare_model(model) if budget_bytes is None else \
        CpuPreparedModel(model, CpuExecutor(model, budget_bytes))
    tracemalloc.start()
    try:
        result = prepared.execute(request)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_pad_into_a_16_byte_output_is_insufficient_without_allocating():
    request, _, _ = cm.small_output_request(cm.pad_model(), cm.pad_inputs())
    result, peak = run_traced(cm.pad_model(), request)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert [tuple(s.dimensions) for s in result.output_shapes] == [(1, 4 + cm.HUGE_PAD)]
    assert not result.output_shapes[0].is_sufficient
    assert peak < 4 * _MB, peak


def test_broadcast_add_into_a_16_byte_output_is_insufficient_without_allocating():
    model = cm.broadcast_add_model()
    request, _, _ = cm.small_output_request(model, cm.broadcast_inputs())
    result, peak = run_traced(model, request)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert tuple(result.output_shapes[0].dimensions) == (cm.BROADCAST, cm.BROADCAST)
    assert peak < 4 * _MB, peak


@pytest.mark.parametrize("model, inputs, shape", [
    (cm.tile_model(), [np.float32([[1, 2, 3, 4]])], (1, 4 * 2 ** 26)),
    (cm.resize_model(), [np.ones((1, 2, 2, 1), np.float32)], (1, 2 ** 15, 2 ** 15, 1)),
], ids=["TILE", "RESIZE_BILINEAR"])
def test_other_growing_operations_are_checked_before_computing(model, inputs, shape):
    request, _, _ = cm.small_output_request(model, inputs)
    result, peak = run_traced(model, request)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert tuple(result.output_shapes[0].dimensions) == shape
    assert peak < 4 * _MB, peak


def test_a_huge_intermediate_is_resource_exhausted_persistent():
    model = cm.pad_model(chained=True)
    request, _, _ = cm.small_output_request(model, cm.pad_inputs(), output_bytes=1 << 12)
    result, peak = run_traced(model, request)
    assert result.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    assert peak < 4 * _MB, peak


def test_the_budget_is_configurable_and_a_sufficient_buffer_still_runs(monkeypatch):
    model = cm.pad_model(pad=1 << 18, chained=True)  # a 1 MiB intermediate and output
    request, _, out = cm.small_output_request(model, cm.pad_inputs(), output_bytes=4 * (4 + (1 << 18)))
    assert run_traced(model, request, budget_bytes=2 * _MB)[0].status == \
        ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    monkeypatch.setenv(budget.BUDGET_ENV, str(64 * _MB))
    result = CpuDevice().prepare_model(model).execute(request)
    assert result.status == ErrorStatus.NONE
    assert out[:5].tolist() == [2, 3, 4, 5, 1] and out[-1] == 1


def test_an_invalid_budget_setting_falls_back_to_the_default():
    assert budget.configured_budget({budget.BUDGET_ENV: "lots"}) == budget.DEFAULT_BUDGET_BYTES
    assert budget.configured_budget({budget.BUDGET_ENV: "4096"}) == 4096
    assert budget.configured_budget({}) == budget.DEFAULT_BUDGET_BYTES


def test_same_shape_arithmetic_still_runs_and_reports_small_buffers_after_computing():
    model = add_model((1, 4), out_shape=(0, 0))
    request, _, outs = make_request(model, [np.ones((1, 4), np.float32)] * 2, out_slack=16)
    assert CpuDevice().prepare_model(model).execute(request).status == ErrorStatus.NONE
    assert outs[0][:4].tolist() == [2, 2, 2, 2]


def test_max_pool_with_a_2_pow_26_window_answers_at_once():
    """Before: the window's padding was allocated (256 MB) and 2^26 taps looped (minutes)."""
    code = ("from nnscope.runtime.drivers.cpu import CpuDevice; from tests.support import cost_models as cm; "
            "from tests.runtime.drivers._hal import make_request; m = cm.max_pool_model(); "
            "r, _, outs = make_request(m, cm.pool_inputs()); "
            "print(CpuDevice().prepare_model(m).execute(r).status, outs[0].ravel().tolist())")
    # a bound, not a speed: a second or two now (an interpreter start included), minutes before
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split(None, 1) == ["0", "[7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0]\n"], done.stderr


def _reference_pool(x, window, reduce):
    """Brute force: every output cell reduces the input cells its window covers."""
    (kh, kw), (sh, sw), _, (top, _, left, _) = window
    out_h, out_w = window.output_hw(x.shape[1:3])
    out = np.zeros((x.shape[0], out_h, out_w, x.shape[3]), np.float64)
    counts = np.zeros((out_h, out_w))
    for i, j in itertools.product(range(out_h), range(out_w)):
        y0, x0 = i * sh - top, j * sw - left
        cells = x[:, max(y0, 0):max(y0 + kh, 0), max(x0, 0):max(x0 + kw, 0), :]
        counts[i, j] = cells.shape[1] * cells.shape[2]
        out[:, i, j, :] = reduce(cells, axis=(1, 2)) if cells.size else np.nan
    return out, counts


@pytest.mark.parametrize("seed", range(40))
def test_pooling_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), 3)).astype(np.float32)
    kernel = tuple(int(k) for k in rng.integers(1, 12, 2))
    stride = tuple(int(s) for s in rng.integers(1, 4, 2))
    pads = tuple(int(p) for p in rng.integers(0, 5, 4))
    window = Window(kernel, stride, (1, 1), pads)
    if min(window.output_hw(x.shape[1:3])) <= 0:
        return
    expected_max, counts = _reference_pool(x, window, np.max)
    got = max_pool(x, window)
    valid = counts > 0
    np.testing.assert_array_equal(got[:, valid], expected_max[:, valid])
    assert np.all(np.isneginf(got[:, ~valid]))
    expected_sum, _ = _reference_pool(x, window, np.sum)
    total, count = window_sum(x, window, np.float32)
    np.testing.assert_array_equal(count[0, :, :, 0], counts)
    np.testing.assert_allclose(total[:, valid], expected_sum[:, valid], rtol=1e-5, atol=1e-5)
