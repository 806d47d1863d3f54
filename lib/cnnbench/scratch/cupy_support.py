"""CuPy, imported lazily: the shared array-module implementation on a CUDA GPU, or the reason it cannot run."""

from __future__ import annotations

from cnnbench.scratch.base import BackendUnavailable


def cupy_backend(model: str, lr: float, momentum: float):
    """The array-module backend on CuPy's device; :class:`BackendUnavailable` says why not."""
    from cnnbench.scratch.xp_backend import XpBackend

    try:
        import cupy
    except ImportError as err:
        raise BackendUnavailable(
            f"CuPy is not installed ({err.msg}); make gpu (the CuPy for torch's CUDA) on a CUDA machine"
        ) from None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise BackendUnavailable("CuPy sees no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as err:
        raise BackendUnavailable(f"CuPy cannot reach a CUDA device: {err}") from None

    def sync():
        cupy.cuda.get_current_stream().synchronize()

    return XpBackend("cupy", model, xp=cupy, lr=lr, momentum=momentum, sync=sync)


def pool_bytes() -> dict[str, int]:
    """CuPy memory pool: bytes in use by arrays and bytes held by the pool (both 0 without CuPy)."""
    import cupy

    pool = cupy.get_default_memory_pool()
    return {"used": int(pool.used_bytes()), "held": int(pool.total_bytes())}
