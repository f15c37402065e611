"""numpy's pairwise summation in compiled code, bit for bit: the sums the compiled search must share
with numpy so that its priors and move draws equal the Python search's.

Owns ``pairwise_sum(a, lo, n)``: ``a[lo:lo + n]`` (float64) summed in the order numpy's
``pairwise_sum`` adds them (blocks of at most 128 in eight partial sums, longer runs halved at a
multiple of 8), for ``n <= 480`` (more than any position's legal moves). Knows nothing of trees,
boards or search. Written out to two levels instead of recursing: numba's cache (``cache=True``)
cannot hold a recursive function (it loads a crashing copy).
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def _pairwise_block(a, lo, n):
    """numpy's pairwise summation of ``a[lo:lo + n]`` for ``n <= 128`` (``pairwise_sum``, bit for bit)."""
    if n < 8:
        total = -0.0
        for i in range(n):
            total += a[lo + i]
        return total
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += a[lo + i]
        i += 1
    return total


@njit(cache=True, inline="always")
def _half(n):
    half = n // 2
    return half - half % 8


@njit(cache=True)
def _pairwise_mid(a, lo, n):
    if n <= 128:
        return _pairwise_block(a, lo, n)
    half = _half(n)
    return _pairwise_block(a, lo, half) + _pairwise_block(a, lo + half, n - half)


@njit(cache=True)
def pairwise_sum(a, lo, n):
    """numpy's pairwise summation of ``a[lo:lo + n]`` for ``n <= 480`` (blocks of at most 128, halves
    split at a multiple of 8). Two levels written out: numba's cache cannot hold a recursive function."""
    if n <= 128:
        return _pairwise_block(a, lo, n)
    half = _half(n)
    return _pairwise_mid(a, lo, half) + _pairwise_mid(a, lo + half, n - half)
