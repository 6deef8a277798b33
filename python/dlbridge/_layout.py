"""Layout predicates on (shape, strides) in elements, shared by the planner, the namespaces,
:mod:`dlbridge.describe` and the checker. Dims of extent <= 1 never decide anything: their
stride is meaningless."""

from __future__ import annotations


def negative_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """A dimension of extent > 1 walks backwards."""
    return any(s < 0 for n, s in zip(shape, strides) if n > 1)


def compact(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """A permutation of a dense layout (what JAX accepts): no gaps, no overlaps, no negative
    strides. Dims of extent <= 1 do not count; an empty array is compact."""
    if any(n == 0 for n in shape):
        return True
    dims = sorted(((s, n) for n, s in zip(shape, strides) if n > 1), reverse=True)
    expected = 1
    for s, n in reversed(dims):
        if s != expected:
            return False
        expected *= n
    return True


def arrow_zero_copy(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Can ``Tensor.__arrow_c_array__`` export this layout without its C-order copy? A dense
    permutation whose first dimension is the outermost (Arrow's array length)."""
    if any(n == 0 for n in shape):
        return True
    if not compact(shape, strides):
        return False
    if len(shape) == 0 or shape[0] <= 1:
        return True
    return all(strides[0] >= s for n, s in zip(shape[1:], strides[1:]) if n > 1)


def c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major dense (dims of extent <= 1 ignored)."""
    expected = 1
    for n, s in reversed(list(zip(shape, strides))):
        if n > 1 and s != expected:
            return False
        expected *= n
    return True


def f_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Column-major dense (dims of extent <= 1 ignored)."""
    return c_contiguous(shape[::-1], strides[::-1])


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a dense row-major array of ``shape`` (dims of extent 0 count as 1)."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


__all__ = ["arrow_zero_copy", "c_contiguous", "c_strides", "compact", "f_contiguous",
           "negative_strides"]
