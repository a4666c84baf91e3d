"""What the app adds to vLLM's worker in the engine's process (vLLM's `worker_extension_cls`): the sampler without
passes over the whole vocabulary (`engine.sampler_speedup`) and the rejection sampler's CPU kernels for speculative
decoding (`engine.speculation`). The engine calls their methods there once, through `collective_rpc`."""

from engine.sampler_speedup import SamplerSpeedup
from engine.speculation import RejectionKernels


class WorkerExtension(SamplerSpeedup, RejectionKernels):
    pass
