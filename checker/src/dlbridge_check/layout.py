"""The checker's own layout arithmetic on (shape, strides) in elements. The judge computes
layouts itself rather than asking dlbridge, whose answers it judges. Dims of extent <= 1 never
decide anything: their stride is meaningless."""

from __future__ import annotations


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a dense row-major array of ``shape`` (dims of extent 0 count as 1)."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)


def c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major dense: every dim of extent > 1 has the stride of a dense row-major array."""
    dense = c_strides(shape)
    return all(s == d for n, s, d in zip(shape, strides, dense) if n > 1)


def f_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Column-major dense: the reversed layout is row-major dense."""
    return c_contiguous(shape[::-1], strides[::-1])


def negative_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """A dimension of extent > 1 walks backwards."""
    return any(s < 0 for n, s in zip(shape, strides) if n > 1)
