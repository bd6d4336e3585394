"""Densify a TFLite sparse constant (``SparsityParameters``) at load time.

A sparse tensor stores only its values; ``traversal_order`` lists the expanded dimensions (the
tensor's own, then one per blocked dimension, as ``block_map`` says) in storage order, and each
has a ``DimensionMetadata``: DENSE (``dense_size`` entries, all stored) or SPARSE_CSR (for each
position of the previous levels, ``array_segments[p]..array_segments[p+1]`` index the stored
``array_indices``). Walking the levels in order visits the stored values in order; each visit
names one element of the dense tensor (blocked dimension ``d`` of block size ``b``:
``index = block_index * b + offset``). The walk is vectorised level by level.

Example:
    >>> levels = [SparseLevel(dense_size=2), SparseLevel(segments=[0, 1, 2], indices=[2, 0])]
    >>> densify(np.array([5.0, 7.0]), (2, 3), Sparsity((0, 1), (), tuple(levels)))
    array([[0., 0., 5.],
           [7., 0., 0.]])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SparseLevel:
    """One traversal level: DENSE when ``segments`` is None, else SPARSE_CSR."""

    dense_size: int = 0
    segments: tuple[int, ...] | None = None
    indices: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Sparsity:
    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    levels: tuple[SparseLevel, ...]


def densify(values: np.ndarray, shape: tuple[int, ...], sparsity: Sparsity) -> np.ndarray:
    """The dense array of ``shape`` whose stored elements are ``values``."""
    _check(shape, sparsity)
    coords = _walk(sparsity.levels)  # (levels, stored elements), in traversal order
    if coords.shape[1] > values.size:
        raise ValueError(f"sparse tensor: the format visits {coords.shape[1]} elements but "
                         f"only {values.size} values are stored")
    expanded = np.empty_like(coords)
    expanded[list(sparsity.traversal_order)] = coords  # back to expanded-dimension order
    dense_index = _dense_coordinates(expanded, shape, sparsity)
    result = np.zeros(shape, values.dtype)
    result[tuple(dense_index)] = values.reshape(-1)[:coords.shape[1]]
    return result


def _check(shape, sparsity: Sparsity) -> None:
    rank, expanded = len(shape), len(shape) + len(sparsity.block_map)
    if sorted(sparsity.traversal_order) != list(range(expanded)) or \
            len(sparsity.levels) != expanded:
        raise ValueError(f"sparse tensor: traversal order {list(sparsity.traversal_order)} does "
                         f"not cover the {expanded} expanded dimensions of shape {list(shape)}")
    if any(not 0 <= dim < rank for dim in sparsity.block_map):
        raise ValueError(f"sparse tensor: block map {list(sparsity.block_map)} names a "
                         f"dimension outside rank {rank}")


def _walk(levels) -> np.ndarray:
    """Each stored element's index at every level (rows), visiting in storage order."""
    parents = np.zeros(1, np.int64)  # position within the previous level
    coords = np.zeros((0, 1), np.int64)
    for level in levels:
        if level.segments is None:
            size = int(level.dense_size)
            offsets = np.tile(np.arange(size, dtype=np.int64), parents.size)
            coords = np.repeat(coords, size, axis=1)
            parents = np.repeat(parents * size, size) + offsets
            index = offsets
        else:
            parents, index, repeat = _csr_children(level, parents)
            coords = np.repeat(coords, repeat, axis=1)
        coords = np.vstack([coords, index[None, :]])
    return coords


def _csr_children(level: SparseLevel, parents: np.ndarray):
    segments = np.asarray(level.segments, np.int64)
    indices = np.asarray(level.indices, np.int64)
    if parents.size and (parents.max() + 1 >= segments.size):
        raise ValueError("sparse tensor: array_segments is shorter than its parent level")
    starts, stops = segments[parents], segments[parents + 1]
    counts = stops - starts
    if np.any(counts < 0) or (counts.sum() and stops.max() > indices.size):
        raise ValueError("sparse tensor: array_segments point outside array_indices")
    first = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    children = first + np.arange(int(counts.sum()), dtype=np.int64)
    return children, indices[children], counts


def _dense_coordinates(expanded: np.ndarray, shape, sparsity: Sparsity) -> list[np.ndarray]:
    rank = len(shape)
    dense = [expanded[dim].copy() for dim in range(rank)]
    for block, dim in enumerate(sparsity.block_map):
        block_size = int(sparsity.levels[sparsity.traversal_order.index(rank + block)].dense_size)
        dense[dim] = dense[dim] * block_size + expanded[rank + block]
    for dim, size in enumerate(shape):
        if dense[dim].size and (dense[dim].min() < 0 or dense[dim].max() >= size):
            raise ValueError(f"sparse tensor: an index of dimension {dim} is outside {size}")
    return dense
