"""iris's own decode forward: a model read from an archive (its embedded config.json and its
tensors), one token at a time at batch 1 with a static KV cache, written so that a whole
decode step (embedding to the next token) is one CUDA graph with no host synchronisation.

For engines that want the archive's speed without transformers' forward (which cannot be
captured for gpt-oss), and for bench/decode_bench.py. Families: "llama" (Llama, Mistral,
Qwen2: config model_type llama / mistral / qwen2), "gpt_oss", "mixtral".

    import iris_archive as iris
    import iris_archive.models
    m = iris.models.load("model.iris")                     # quantized weights stay quantized
    tokens = m.generate([1, 15, 27], steps=64)             # greedy, one CUDA graph per step
    ref = iris.models.load("model.iris", dequantize=True)  # the same model in BF16 (cuBLAS):
                                                           # what `iris export --dtype bf16` holds
    part = iris.models.load("ranks/", rank=r, world_size=n)  # one rank of `iris shard --tp n`
                                                           # (torch.distributed initialised)

Every archive tensor the model does not take is an error (`IrisError` naming it), as is every
tensor it needs and the archive lacks."""

from ._decoder import Decoder, load

__all__ = ["Decoder", "load"]
