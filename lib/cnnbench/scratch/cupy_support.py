"""CuPy, imported lazily: the shared array-module implementation on a CUDA GPU, or the reason it cannot run."""

from __future__ import annotations

from cnnbench.scratch.base import BackendUnavailable


def import_cupy():
    """The cupy module with a working device; :class:`BackendUnavailable` says why not."""
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
    return cupy


def cupy_backend(model: str, lr: float, momentum: float):
    from cnnbench.scratch.xp_backend import XpBackend

    cupy = import_cupy()

    def sync():
        cupy.cuda.get_current_stream().synchronize()

    return XpBackend("cupy", model, xp=cupy, lr=lr, momentum=momentum, sync=sync)


def pool_bytes() -> dict[str, int]:
    """CuPy memory pool: bytes in use by arrays and bytes held by the pool (both 0 without CuPy)."""
    import cupy

    pool = cupy.get_default_memory_pool()
    return {"used": int(pool.used_bytes()), "held": int(pool.total_bytes())}
