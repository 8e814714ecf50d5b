"""Scale-out backends for passk (Ray workers, a vLLM engine) and the Ray helpers the trainers use.

    evalkit passk smollm2-135m --n 16 --limit 200 --ray-workers 2 --out runs/base
    evalkit passk MODEL --backend vllm --device cuda --out runs/vllm

`ray_passk` (and the trainers' evalkit.train.es_ray) need the `ray` extra
(`pip install 'evalkit[ray]'`), `vllm_backend` the `vllm` extra; both are
imported only when asked for, and a missing one is a UsageError naming the
install command. Nothing here imports the trainers (evalkit.train imports this). Which sampler a
backend draws with (`sampler_version`) is said here, so that the core sampler never imports a backend.
"""

from __future__ import annotations

from evalkit.errors import UsageError

__all__ = ["import_ray", "start_ray", "ray_get", "sampler_version"]


def sampler_version(backend: str) -> str:
    """The sampler a run's samples come from, as run.json records it (`sampler`): evalkit.sampling's
    SAMPLER_VERSION for the Hugging Face backend (Ray workers included), the vLLM backend's SAMPLER
    for `--backend vllm`."""
    if backend == "vllm":
        from evalkit.scale.vllm_backend import SAMPLER

        return SAMPLER
    from evalkit.sampling import SAMPLER_VERSION

    return SAMPLER_VERSION


def import_ray():
    """The `ray` module, or a UsageError naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise UsageError("--ray-workers/--ray-address need Ray: pip install 'evalkit[ray]'") from None
    return ray


def start_ray(address: str | None, cpus: int):
    """Join `address`, or start a local cluster with `cpus` CPUs; returns (ray, started_here).

    A cluster already initialised in this process (e.g. by a test) is used as is.
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    if address:
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(f"--ray-address {address}: cannot join the Ray cluster ({exc})") from exc
    else:
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    return ray, True


def ray_get(ray, refs):
    """`ray.get`, with a UsageError raised in an actor (a bad model folder...) re-raised as one line."""
    from ray.exceptions import RayTaskError

    try:
        return ray.get(refs)
    except RayTaskError as exc:
        if isinstance(exc.cause, UsageError):
            raise UsageError(str(exc.cause)) from None
        raise
