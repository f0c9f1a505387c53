"""Stand-in for pydantic_core: compressed_tensors.utils.type imports `core_schema` to build the
TorchDtype schema inside __get_pydantic_core_schema__, which only real pydantic calls. The stub
pydantic never calls it, so `core_schema` only has to provide the names used in annotations."""
import types

core_schema = types.SimpleNamespace(CoreSchema=dict)
