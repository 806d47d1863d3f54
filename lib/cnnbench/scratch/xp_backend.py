"""One array-module implementation of both networks for NumPy and CuPy (imported lazily), vectorised: im2col into one matmul per
convolution, col2im as k*k shifted adds, 2x2 pools as reshaped windows; activations channels-last (NHWC), so
``fc1.weight``'s columns are permuted once at load time."""

from __future__ import annotations

import numpy as np

from cnnbench.scratch.base import FORWARD, KIND, Backend, BackendUnavailable, component_bytes

K = 3  # convolution kernel size of seed 001's CNN


def im2col(xp, x, k: int = K):
    """(N, H, W, C) -> (N*H'*W', C*k*k) columns ordered (c, kh, kw), PyTorch's weight order."""
    n, h, w, c = x.shape
    sn, sh, sw, sc = x.strides
    windows = xp.lib.stride_tricks.as_strided(  # every k x k window, a view
        x, shape=(n, h - k + 1, w - k + 1, c, k, k), strides=(sn, sh, sw, sc, sh, sw)
    )
    return xp.ascontiguousarray(windows).reshape(n * (h - k + 1) * (w - k + 1), c * k * k)


def col2im(xp, dcols, shape, k: int = K):
    """Adjoint of im2col for columns ordered (kh, kw, c): (N, H', W', k, k, C) -> (N, H, W, C), k*k adds."""
    n, h, w, c = shape
    ho, wo = h - k + 1, w - k + 1
    d = dcols.reshape(n, ho, wo, k, k, c)
    out = xp.zeros(shape, dtype=dcols.dtype)
    for i in range(k):
        for j in range(k):
            out[:, i : i + ho, j : j + wo, :] += d[:, :, :, i, j, :]
    return out


def pool_windows(x):
    """(N, H, W, C) -> (N, H//2, 2, W//2, 2, C) view of the 2x2 windows (odd edges dropped, as PyTorch)."""
    n, h, w, c = x.shape
    hp, wp = h // 2, w // 2
    return x[:, : 2 * hp, : 2 * wp, :].reshape(n, hp, 2, wp, 2, c)


def first_max(mask):
    """Only the first maximum of each 2x2 window (row-major), as PyTorch routes a tied gradient."""
    taken = mask[:, :, 0, :, 0, :].copy()
    for i, j in ((0, 1), (1, 0), (1, 1)):
        mask[:, :, i, :, j, :] &= ~taken
        taken |= mask[:, :, i, :, j, :]
    return mask


class XpBackend(Backend):
    """Seed 001's CNN or seed 004's MLP on an array module ``xp`` (numpy or cupy). See :mod:`..base`."""

    def __init__(self, name: str, model: str, xp=np, lr: float = 0.01, momentum: float = 0.9, sync=None):
        self.xp, self.sync = xp, sync or (lambda: None)
        super().__init__(name, model, lr, momentum)
        self.cache: dict = {}

    def _fc1(self, name, w, inverse: bool = False):
        """The CNN's ``fc1.weight`` between PyTorch's layout (out, c*h*w) and the internal one (out, h*w*c)."""
        if name != "fc1.weight" or self.model != "mnist_cnn":
            return w
        c = self.channels
        side = int(round((w.shape[1] / c) ** 0.5))
        shape, axes = ((side, side, c), (0, 3, 1, 2)) if inverse else ((c, side, side), (0, 2, 3, 1))
        return w.reshape(len(w), *shape).transpose(axes).reshape(len(w), -1)

    def _put(self, name, w):  # a copy: never train the caller's arrays
        return self.xp.array(self._fc1(name, w), dtype=np.float32, order="C", copy=True)

    def init(self, weights: dict[str, np.ndarray]) -> None:
        self.channels = len(weights["conv2.weight"]) if self.model == "mnist_cnn" else 0
        self._load(weights, self._put)

    def _host(self, a, name=None) -> np.ndarray:
        a = self._fc1(name, a, inverse=True)
        return a.get() if hasattr(a, "get") else np.asarray(a)

    def _layout(self, x):
        return x.reshape(len(x), -1) if self.model == "mlp" else x.transpose(0, 2, 3, 1)

    def _device(self, a):
        return self.xp.asarray(a)

    def loss_and_grads(self, x, y) -> float:
        xb, yb = self.put(x, y)
        logits = self._forward(xb)
        loss, dlogits = self._softmax_ce(logits, yb)
        self._backward(dlogits)
        return loss

    def _predict(self, x):
        kept, self.cache = self.cache, {}  # the last training step's arrays stay what memory() reads
        logits = self._forward(x)
        self.cache = kept
        return self._host(logits.argmax(axis=1))

    def _sgd(self):
        for k, p in self.p.items():
            if self.momentum:  # torch.optim.SGD's: v = momentum * v + g
                self.v[k] *= self.momentum
                self.v[k] += self.g[k]
            p -= self.lr * (self.v[k] if self.momentum else self.g[k])

    # --- layers (each timed by _forward / _backward)
    def _conv(self, name, x):
        xp, w = self.xp, self.p[f"{name}.weight"]
        f = w.shape[0]
        n, h, wd, _ = x.shape
        cols = im2col(xp, x)
        out = (cols @ w.reshape(f, -1).T).reshape(n, h - K + 1, wd - K + 1, f)
        out += self.p[f"{name}.bias"]
        self.cache[name] = (cols, x.shape)
        return out

    def _fc(self, name, x):
        x = x.reshape(len(x), -1)
        out = x @ self.p[f"{name}.weight"].T
        out += self.p[f"{name}.bias"]
        self.cache[name] = x
        return out

    def _relu(self, name, x):
        out = self.xp.maximum(x, 0)
        self.cache[name] = out
        return out

    def _pool(self, name, x):
        v, xp = pool_windows(x), self.xp
        out = xp.maximum(  # three elementwise maxima: faster than a reduction over two strided axes
            xp.maximum(v[:, :, 0, :, 0], v[:, :, 0, :, 1]), xp.maximum(v[:, :, 1, :, 0], v[:, :, 1, :, 1])
        )
        self.cache[name] = (x, out)
        return out

    def _forward(self, x):
        """The logits, each layer's input or output its backward reads kept in ``cache``."""
        for name in FORWARD[self.model]:
            with self.timer.op(name, KIND[name[:-1]], "forward"):
                x = getattr(self, f"_{name[:-1]}")(name, x)
        return x

    def _softmax_ce(self, logits, y):
        xp, n = self.xp, len(logits)
        with self.timer.op("softmax_ce", "softmax", "forward"):
            z = logits - logits.max(axis=1, keepdims=True)
            e = xp.exp(z)
            s = e.sum(axis=1, keepdims=True)
            rows = xp.arange(n)
            loss = -(z[rows, y] - xp.log(s[:, 0])).mean()
        with self.timer.op("softmax_ce_bwd", "gradient", "backward"):
            d = e / s
            d[rows, y] -= 1
            d /= n
        self.cache["logits"] = logits
        return float(loss), d

    def _fc_bwd(self, name, d):
        x = self.cache[name]
        # OpenBLAS is >10x slower on d.T @ x (small M, huge K)
        self.g[f"{name}.weight"][...] = (x.T @ d).T
        self.g[f"{name}.bias"][...] = d.sum(axis=0)
        return None if name == FORWARD[self.model][0] else d @ self.p[f"{name}.weight"]

    def _relu_bwd(self, name, d):
        return self.xp.where(self.cache[name] > 0, d, 0).astype(np.float32, copy=False)

    def _pool_bwd(self, name, d):
        x, out = self.cache[name]
        n, hp, wp, c = out.shape
        d = d.reshape(out.shape)
        mask = first_max(pool_windows(x) == out[:, :, None, :, None, :])
        dx = self.xp.zeros(x.shape, dtype=np.float32)
        dx[:, : 2 * hp, : 2 * wp, :] = (mask * d[:, :, None, :, None, :]).reshape(n, 2 * hp, 2 * wp, c)
        return dx

    def _conv_bwd(self, name, d):
        cols, shape = self.cache[name]
        w = self.p[f"{name}.weight"]
        f = w.shape[0]
        dm = d.reshape(-1, f)
        self.g[f"{name}.weight"][...] = (cols.T @ dm).T.reshape(w.shape)
        self.g[f"{name}.bias"][...] = dm.sum(axis=0)
        if name == FORWARD[self.model][0]:  # the first layer's input needs no gradient
            return None
        wk = self.xp.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(f, -1)  # columns (kh, kw, c)
        return col2im(self.xp, dm @ wk, shape)

    def _backward(self, d):
        for name in reversed(FORWARD[self.model]):
            with self.timer.op(f"{name}_bwd", "gradient", "backward"):
                d = getattr(self, f"_{name[:-1]}_bwd")(name, d)

    def memory(self) -> dict[str, int]:
        """Bytes by component, from the arrays themselves: activations what the last forward made (ReLU and pool
        outputs, the logits; an fc's input is one of them or the batch), workspace the im2col columns."""
        c = self.cache
        acts = [
            c["logits"],
            *(c[k] for k in c if k[:-1] == "relu"),
            *(c[k][1] for k in c if k[:-1] == "pool"),
        ]
        return component_bytes(self, acts, [c[k][0] for k in c if k[:-1] == "conv"])


def backend(name: str, model: str, lr: float, momentum: float) -> XpBackend:
    """The backend on NumPy, or on CuPy's CUDA device (imported here); :class:`BackendUnavailable` says why not."""
    if name == "numpy":
        return XpBackend(name, model, np, lr, momentum)
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()  # raises where no CUDA device is reachable
    except Exception as err:  # noqa: BLE001 - not installed, or no device: the reason is the message
        todo = (
            "; make gpu installs the CuPy for torch's CUDA on a CUDA machine"
            if isinstance(err, ImportError)
            else ""
        )
        raise BackendUnavailable(f"CuPy cannot run here ({err}){todo}") from None
    return XpBackend(name, model, cupy, lr, momentum, lambda: cupy.cuda.get_current_stream().synchronize())
