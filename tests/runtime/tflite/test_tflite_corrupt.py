"""A truncated or corrupt .tflite is one typed error, never a traceback (issue 37).

Every offset and length the flatbuffer declares is checked against the file before anything is
read (``runtime/tflite/_verify.py``), so each truncation raises :class:`TfliteFormatError`; a
seeded bit flip either still loads or raises that error (or :class:`UnsupportedOperator`, when
it turns an operator into one without an NNAPI form), never ``struct.error``, ``IndexError``,
``AttributeError`` ...; ``nnscope run`` and ``nnscope bench`` print it in one line and exit 1.
"""
from __future__ import annotations

import inspect
import random
import subprocess
import sys
from pathlib import Path

import pytest
import tflite

from nnscope.runtime.builtin_models import tiny_add
from nnscope.runtime.tflite import TfliteFormatError, UnsupportedOperator, convert_tflite
from nnscope.runtime.tflite._translate import translate
from nnscope.runtime.tflite._verify import schema

REPO = Path(__file__).resolve().parents[3]
FACE = REPO / "tests" / "data" / "models" / "face_detection_short_range.tflite"
SMALL = translate(tiny_add().to_hal()).flatbuffer


def _load(data: bytes, label: str) -> str:
    """"loaded", or the name of the typed error ``data`` raised (one line)."""
    try:
        convert_tflite(data, label)
    except (TfliteFormatError, UnsupportedOperator) as error:
        assert "\n" not in str(error) and str(error).startswith(label), str(error)
        return type(error).__name__
    return "loaded"


def _flipped(data: bytes, rng: random.Random) -> bytes:
    """``data`` with 1 to 16 random bits flipped (half of them in the first 4 KiB, where the
    tables of a small model are)."""
    flipped = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        at = rng.randrange(len(data)) if rng.random() < 0.5 else rng.randrange(min(4096, len(data)))
        flipped[at] ^= 1 << rng.randrange(8)
    return bytes(flipped)


def test_every_truncation_of_a_small_model_is_a_format_error():
    assert _load(SMALL, "whole") == "loaded"
    for length in range(len(SMALL)):
        assert _load(SMALL[:length], f"[:{length}]") == "TfliteFormatError", length


def test_sampled_truncations_of_the_face_detector_are_format_errors():
    data = FACE.read_bytes()
    lengths = set(range(0, 1200)) | set(range(len(data) - 64, len(data)))
    lengths |= set(random.Random(37).sample(range(len(data)), 300))
    for length in sorted(lengths):
        assert _load(data[:length], f"[:{length}]") == "TfliteFormatError", length


@pytest.mark.parametrize("model, flips", [("small", 3000), ("face", 300)])
def test_seeded_bit_flips_load_or_raise_a_typed_error(model, flips):
    data = SMALL if model == "small" else FACE.read_bytes()
    rng = random.Random(37)
    outcomes = {_load(_flipped(data, rng), f"flip {i}") for i in range(flips)}
    assert "TfliteFormatError" in outcomes  # the flips do reach the checks


def test_every_generated_table_has_a_schema():
    """The checks read the ``tflite`` package's generated accessors: each one is understood
    (a form it does not know raises TypeError, rather than leaving fields unchecked)."""
    tables = [name for name, cls in vars(tflite).items() if inspect.isclass(cls) and
              hasattr(cls, "Init") and not name.startswith("_")]
    assert len(tables) > 100
    for name in tables:
        schema(name)
    assert {f.name: f.kind for f in schema("Model").values()}["Buffers"] == "tables"
    assert schema("Operator")[12].kind == "union"


def _nnscope(*args):
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.mark.parametrize("command, length", [("run", 1000), ("run", 0), ("run", 8),
                                             ("run", 114_516), ("bench", 1000)])
def test_the_cli_says_a_truncated_model_in_one_line(tmp_path, command, length):
    path = tmp_path / "cut.tflite"
    path.write_bytes(FACE.read_bytes()[:length])
    done = _nnscope(command, path)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"nnscope: error: {path}: ")
    assert "truncated or corrupt" in line or "not a TFLite flatbuffer" in line, line
