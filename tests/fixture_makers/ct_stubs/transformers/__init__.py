"""Stand-in for transformers: compressed-tensors (and llm-compressor's gptq_quantize) import these
names at module level, for model loading, attention hooks and HF config objects that the fixture
maker never uses. Each is an empty placeholder class; CONFIG_NAME and the safetensors file names
carry transformers' real values because ModelCompressor.update_config writes to CONFIG_NAME."""


class _Placeholder:
    def __init__(self, *a, **k):
        raise RuntimeError(f"{type(self).__name__} is a stub (transformers is not installed)")


class PreTrainedModel(_Placeholder):
    pass


class PretrainedConfig(_Placeholder):
    pass


class AutoConfig(_Placeholder):
    pass


class AutoModelForCausalLM(_Placeholder):
    pass


class Cache(_Placeholder):
    pass


class CompressedTensorsConfig(_Placeholder):
    pass


class Conv1D(_Placeholder):
    pass
