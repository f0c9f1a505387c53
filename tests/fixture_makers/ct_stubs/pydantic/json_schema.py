"""Part of the pydantic stand-in (see pydantic/__init__.py): a name compressed_tensors.utils.type imports."""
JsonSchemaValue = dict
