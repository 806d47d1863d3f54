"""Numba CUDA: one ``@cuda.jit`` kernel per operation (one thread per output element; weight gradients summed
over ``BATCH_CHUNK`` images per thread with atomics), runnable on Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``)."""

from __future__ import annotations

import math
import sys

import numba
import numpy as np
from numba import cuda

from cnnbench.scratch.base import BackendUnavailable, Buffered, step_buffers

# Every accumulator and constant of the kernels is float32: a Python float (0.0) types as slow float64
ZERO, ONE = np.float32(0.0), np.float32(1.0)

SIMULATED = bool(numba.config.ENABLE_CUDASIM)  # Numba's CUDA simulator: correct results, no speed
THREADS = 128  # threads per block
BATCH_CHUNK = 16  # images summed by one thread of a weight-gradient kernel


def nvvm_available() -> bool:
    """True when Numba can load libNVVM, the compiler of its CUDA kernels."""
    from numba.cuda.cudadrv import nvvm

    return bool(nvvm.is_available())


@cuda.jit(device=True)
def index4(i, shape):
    """The 4-d index of flat element ``i`` of a C-ordered array of ``shape`` (., d1, d2, d3)."""
    _, d1, d2, d3 = shape
    return i // (d3 * d2 * d1), (i // (d3 * d2)) % d1, (i // d3) % d2, i % d3


@cuda.jit
def conv_relu_fwd(x, w, b, out):
    i = cuda.grid(1)
    if i >= out.size:
        return
    n, f, oh, ow = index4(i, out.shape)
    acc = b[f]
    for c in range(x.shape[1]):
        for kh in range(w.shape[2]):
            for kw in range(w.shape[3]):
                acc += w[f, c, kh, kw] * x[n, c, oh + kh, ow + kw]
    out[n, f, oh, ow] = acc if acc > 0 else ZERO


@cuda.jit
def maxpool_fwd(a, out, idx):
    i = cuda.grid(1)
    if i >= out.size:
        return
    n, c, r, j = index4(i, out.shape)
    width = a.shape[3]
    best = a[n, c, 2 * r, 2 * j]
    pos = 2 * r * width + 2 * j
    for di in range(2):
        for dj in range(2):
            v = a[n, c, 2 * r + di, 2 * j + dj]
            if v > best:
                best = v
                pos = (2 * r + di) * width + 2 * j + dj
    out[n, c, r, j] = best
    idx[n, c, r, j] = pos


@cuda.jit
def maxpool_relu_bwd(dout, out, idx, da):
    i = cuda.grid(1)
    if i >= da.size:
        return
    n, c, h, w = index4(i, da.shape)
    r, j = h // 2, w // 2
    v = ZERO
    if r < out.shape[2] and j < out.shape[3]:
        if idx[n, c, r, j] == h * da.shape[3] + w and out[n, c, r, j] > 0:
            v = dout[n, c, r, j]
    da[n, c, h, w] = v


@cuda.jit
def conv_bwd_weight(x, da, dw, db):
    i = cuda.grid(1)
    if i >= dw.size:
        return
    f, c, kh, kw = index4(i, dw.shape)
    n0 = cuda.blockIdx.y * BATCH_CHUNK
    n1 = min(n0 + BATCH_CHUNK, x.shape[0])
    acc = ZERO
    bias = ZERO
    for n in range(n0, n1):
        for oh in range(da.shape[2]):
            for ow in range(da.shape[3]):
                g = da[n, f, oh, ow]
                acc += g * x[n, c, oh + kh, ow + kw]
                bias += g
    cuda.atomic.add(dw, (f, c, kh, kw), acc)
    if c == 0 and kh == 0 and kw == 0:
        cuda.atomic.add(db, f, bias)


@cuda.jit
def conv_bwd_input(da, w, dx):
    i = cuda.grid(1)
    if i >= dx.size:
        return
    n, c, xh, xw = index4(i, dx.shape)
    acc = ZERO
    for f in range(da.shape[1]):
        for kh in range(w.shape[2]):
            oh = xh - kh
            if 0 <= oh < da.shape[2]:
                for kw in range(w.shape[3]):
                    ow = xw - kw
                    if 0 <= ow < da.shape[3]:
                        acc += w[f, c, kh, kw] * da[n, f, oh, ow]
    dx[n, c, xh, xw] = acc


@cuda.jit
def dense_fwd(x, w, b, out, relu):
    i, j_ = cuda.grid(1), out.shape[1]
    if i >= out.size:
        return
    j, n = i % j_, i // j_
    acc = b[j]
    for k in range(x.shape[1]):
        acc += x[n, k] * w[j, k]
    out[n, j] = acc if (acc > 0 or not relu) else ZERO


@cuda.jit
def dense_bwd_weight(d, x, dw, db):
    i, k_ = cuda.grid(1), dw.shape[1]
    if i >= dw.size:
        return
    k, j = i % k_, i // k_
    n0 = cuda.blockIdx.y * BATCH_CHUNK
    n1 = min(n0 + BATCH_CHUNK, d.shape[0])
    acc = ZERO
    bias = ZERO
    for n in range(n0, n1):
        acc += d[n, j] * x[n, k]
        bias += d[n, j]
    cuda.atomic.add(dw, (j, k), acc)
    if k == 0:
        cuda.atomic.add(db, j, bias)


@cuda.jit
def dense_bwd_input(d, w, relu_out, dx, masked):
    i, k_ = cuda.grid(1), dx.shape[1]
    if i >= dx.size:
        return
    k, n = i % k_, i // k_
    acc = ZERO
    if not masked or relu_out[n, k] > 0:
        for j in range(d.shape[1]):
            acc += d[n, j] * w[j, k]
    dx[n, k] = acc


@cuda.jit
def softmax_ce(logits, y, d, losses):
    n = cuda.grid(1)
    n_, j_ = logits.shape
    if n >= n_:
        return
    m = logits[n, 0]
    for j in range(1, j_):
        m = max(m, logits[n, j])
    s = ZERO
    for j in range(j_):
        e = math.exp(logits[n, j] - m)
        d[n, j] = e
        s += e
    losses[n] = math.log(s) - (logits[n, y[n]] - m)
    scale = ONE / (s * np.float32(n_))  # float32 throughout: an int divisor would promote to float64
    for j in range(j_):
        d[n, j] = d[n, j] * scale
    d[n, y[n]] -= ONE / np.float32(n_)


@cuda.jit
def sgd(p, g, v, lr, momentum):
    i = cuda.grid(1)
    if i < p.size:
        v[i] = momentum * v[i] + g[i]
        p[i] -= lr * v[i]


@cuda.jit
def zero(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = ZERO


class NumbaCudaBackend(Buffered):
    kernels = sys.modules[__name__]
    momentum_buffers = True  # its SGD kernel updates through v, momentum 0 included
    scalar = np.float32  # lr and momentum: a Python float would make the update FP64

    def __init__(self, name: str, model: str, lr: float = 0.01, momentum: float = 0.9):
        if not cuda.is_available():
            raise BackendUnavailable("Numba finds no CUDA GPU (numba.cuda.is_available() is False)")
        if not SIMULATED and not nvvm_available():
            raise BackendUnavailable(
                "Numba finds a CUDA GPU but no libNVVM to compile its kernels (torch wheels do not ship it): "
                "make gpu (numba-cuda and libNVVM for torch's CUDA) or a CUDA toolkit"
            )
        super().__init__(name, model, lr, momentum)
        self.compiles = not SIMULATED

    def init(self, weights: dict) -> None:
        super().init(weights)
        if not SIMULATED:  # what compiling left and the parameters replaced: freed now, before memory is read
            cuda.current_context().deallocations.clear()

    def sync(self) -> None:
        cuda.synchronize()

    def _buf(self, n: int) -> dict:
        if n not in self.buffers:
            b = step_buffers(self.model, self.p, self.image, n, cuda.device_array)
            self.buffers = {n: {**b, "losses": cuda.device_array(n, np.float32)}}
        return self.buffers[n]

    def _launch(self, kernel, size, *args, chunks: int = 0):
        blocks = max(1, (size + THREADS - 1) // THREADS)
        kernel[(blocks, max(1, math.ceil(chunks / BATCH_CHUNK))) if chunks else blocks, THREADS](*args)

    def _device(self, a):
        return cuda.to_device(a)

    def _host(self, a, name=None) -> np.ndarray:
        return a.copy_to_host()

    def _dense_w(self, layer):
        return self.p[f"{layer}.weight"]

    def _softmax(self, b, y):
        self._launch(softmax_ce, b["losses"].size, b["logits"], y, b["d"], b["losses"])

    def _loss(self, loss, b) -> float:
        return float(b["losses"].copy_to_host().astype(np.float64).mean())

    def loss_and_grads(self, x, y) -> float:
        for g in self.g.values():  # the kernels add into them: zeroed outside the timed ops, as zero_grad
            self._launch(zero, g.size, g.reshape(g.size))
        return super().loss_and_grads(x, y)

    def _grad(self, kernel, layer, a, d):
        w, bias = self.g[f"{layer}.weight"], self.g[f"{layer}.bias"]
        self._launch(kernel, w.size, a, d, w, bias, chunks=a.shape[0])


backend = NumbaCudaBackend
