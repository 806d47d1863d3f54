"""Numba on the CPU: ``@njit(parallel=True)`` loops over the batch, NCHW, weight gradients summed per batch chunk
(no races); buffers allocated from Python (tracemalloc sees them)."""

from __future__ import annotations

import sys

import numba
import numpy as np
from numba import njit, prange

from cnnbench.scratch.base import Buffered, step_buffers

JIT = {"parallel": True, "fastmath": False, "cache": True}


@njit(**JIT)
def conv_relu_fwd(x, w, b, out):
    """out[n, f] = relu(b[f] + sum_c,kh,kw w[f, c, kh, kw] * x[n, c, oh + kh, ow + kw])."""
    n_, c_, _, _ = x.shape
    f_, _, k_, _ = w.shape
    _, _, ho, wo = out.shape
    for n in prange(n_):
        for f in range(f_):
            out[n, f] = b[f]
            for c in range(c_):
                for kh in range(k_):
                    for kw in range(k_):
                        wv = w[f, c, kh, kw]
                        for oh in range(ho):
                            for ow in range(wo):
                                out[n, f, oh, ow] += wv * x[n, c, oh + kh, ow + kw]
            for oh in range(ho):
                for ow in range(wo):
                    if out[n, f, oh, ow] < 0:
                        out[n, f, oh, ow] = 0.0


@njit(**JIT)
def maxpool_fwd(a, out, idx):
    """2x2 max-pool, stride 2; idx keeps the flat (h * W + w) position of the first maximum of each window."""
    n_, c_, ho, wo = out.shape
    width = a.shape[3]
    for n in prange(n_):
        for c in range(c_):
            for i in range(ho):
                for j in range(wo):
                    best = a[n, c, 2 * i, 2 * j]
                    pos = 2 * i * width + 2 * j
                    for di in range(2):
                        for dj in range(2):
                            v = a[n, c, 2 * i + di, 2 * j + dj]
                            if v > best:
                                best = v
                                pos = (2 * i + di) * width + 2 * j + dj
                    out[n, c, i, j] = best
                    idx[n, c, i, j] = pos


@njit(**JIT)
def maxpool_relu_bwd(dout, out, idx, da):
    """Gradient through pool and the ReLU before it: dout goes to each window's argmax if the max is > 0."""
    n_, c_, ho, wo = dout.shape
    width = da.shape[3]
    for n in prange(n_):
        for c in range(c_):
            da[n, c] = 0.0
            for i in range(ho):
                for j in range(wo):
                    if out[n, c, i, j] > 0:
                        p = idx[n, c, i, j]
                        da[n, c, p // width, p % width] = dout[n, c, i, j]


@njit(**JIT)
def conv_bwd_weight(x, da, dw_part, db_part):
    """Per batch chunk: dw_part[t, f, c, kh, kw, ow] and db_part[t, f, ow] partial sums (reduced by the caller)."""
    n_, c_, _, _ = x.shape
    _, f_, ho, wo = da.shape
    chunks = dw_part.shape[0]
    k_ = dw_part.shape[3]
    step = (n_ + chunks - 1) // chunks
    for t in prange(chunks):
        dw_part[t] = 0.0
        db_part[t] = 0.0
        for n in range(t * step, min(n_, (t + 1) * step)):
            for f in range(f_):
                for oh in range(ho):
                    for ow in range(wo):
                        db_part[t, f, ow] += da[n, f, oh, ow]
                    for c in range(c_):
                        for kh in range(k_):
                            for kw in range(k_):
                                for ow in range(wo):
                                    dw_part[t, f, c, kh, kw, ow] += (
                                        da[n, f, oh, ow] * x[n, c, oh + kh, ow + kw]
                                    )


@njit(**JIT)
def conv_bwd_input(da, w, dx):
    """dx[n, c, oh + kh, ow + kw] += w[f, c, kh, kw] * da[n, f, oh, ow] (the transposed convolution)."""
    n_, f_, ho, wo = da.shape
    _, c_, k_, _ = w.shape
    for n in prange(n_):
        dx[n] = 0.0
        for f in range(f_):
            for c in range(c_):
                for kh in range(k_):
                    for kw in range(k_):
                        wv = w[f, c, kh, kw]
                        for oh in range(ho):
                            for ow in range(wo):
                                dx[n, c, oh + kh, ow + kw] += wv * da[n, f, oh, ow]


@njit(**JIT)
def dense_fwd(x, wt, b, out, relu):
    """out = x @ wt + b (wt is the weight transposed, (in, out)), then ReLU if ``relu``."""
    n_, k_ = x.shape
    j_ = wt.shape[1]
    for n in prange(n_):
        out[n] = b
        for k in range(k_):
            xv = x[n, k]
            if xv != 0.0:
                for j in range(j_):
                    out[n, j] += xv * wt[k, j]
        if relu:
            for j in range(j_):
                if out[n, j] < 0:
                    out[n, j] = 0.0


@njit(**JIT)
def dense_bwd_weight(d, x, dw, db):
    """dw[j, :] = sum_n d[n, j] * x[n, :], db[j] = sum_n d[n, j]; parallel over output units."""
    n_, j_ = d.shape
    for j in prange(j_):
        dw[j, :] = 0.0
        acc = 0.0
        for n in range(n_):
            dv = d[n, j]
            acc += dv
            if dv != 0.0:
                for k in range(x.shape[1]):
                    dw[j, k] += dv * x[n, k]
        db[j] = acc


@njit(**JIT)
def dense_bwd_input(d, w, relu_out, dx, masked):
    """dx = d @ w, times the ReLU mask of ``relu_out`` when ``masked``."""
    n_, j_ = d.shape
    k_ = w.shape[1]
    for n in prange(n_):
        dx[n] = 0.0
        for j in range(j_):
            dv = d[n, j]
            for k in range(k_):
                dx[n, k] += dv * w[j, k]
        if masked:
            for k in range(k_):
                if relu_out[n, k] <= 0:
                    dx[n, k] = 0.0


@njit(**JIT)
def softmax_ce(logits, y, d):
    """Mean cross-entropy of softmax(logits) against y; d = (softmax - onehot) / N. Returns the loss."""
    n_, j_ = logits.shape
    losses = np.empty(n_, dtype=np.float32)
    for n in prange(n_):
        m = logits[n, 0]
        for j in range(1, j_):
            m = max(m, logits[n, j])
        s = 0.0
        for j in range(j_):
            d[n, j] = np.exp(logits[n, j] - m)
            s += d[n, j]
        losses[n] = np.log(s) - (logits[n, y[n]] - m)
        for j in range(j_):
            d[n, j] = d[n, j] / s / n_
        d[n, y[n]] -= 1.0 / n_
    return losses.sum() / n_


@njit(fastmath=False, cache=True)
def sgd(p, g, v, lr, momentum):
    """torch.optim.SGD's update over flat arrays (``v`` unused without momentum); serial: the arrays are small."""
    for i in range(p.size):
        if momentum:
            v[i] = momentum * v[i] + g[i]
            p[i] -= lr * v[i]
        else:
            p[i] -= lr * g[i]


class NumbaCpuBackend(Buffered):
    kernels = sys.modules[__name__]
    compiles = True
    scalar = float  # lr and momentum: float64 in the update, as torch's

    def _buf(self, n: int) -> dict[str, np.ndarray]:
        if n not in self.buffers:
            self.buffers[n] = step_buffers(self.model, self.p, self.image, n, np.empty)
        return self.buffers[n]

    def _launch(self, kernel, size, *args):
        kernel(*args)

    def _device(self, a):
        return a

    def _host(self, a, name=None) -> np.ndarray:
        return a.copy()

    def _dense_w(self, layer):
        return np.ascontiguousarray(self.p[f"{layer}.weight"].T)

    def _softmax(self, b, y):
        return softmax_ce(b["logits"], y, b["d"])

    def _loss(self, loss, b) -> float:
        return float(loss)

    def _grad(self, kernel, layer, a, d):
        w, dw, db = self.p[f"{layer}.weight"], self.g[f"{layer}.weight"], self.g[f"{layer}.bias"]
        if kernel is dense_bwd_weight:
            return kernel(a, d, dw, db)
        t = max(1, min(len(a), 4 * numba.get_num_threads()))  # batch chunks, each summed apart
        dw_part = np.empty((t, *w.shape, d.shape[3]), np.float32)
        db_part = np.empty((t, w.shape[0], d.shape[3]), np.float32)
        kernel(a, d, dw_part, db_part)
        dw[...] = dw_part.sum(axis=(0, 5))
        db[...] = db_part.sum(axis=(0, 2))


backend = NumbaCpuBackend
