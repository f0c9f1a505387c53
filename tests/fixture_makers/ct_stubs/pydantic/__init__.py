"""Minimal stand-in for pydantic v2, written for the compressed-tensors fixture maker.

Only what compressed-tensors' quantization config classes use is implemented:

* ``BaseModel`` subclasses declare fields by annotation, with plain defaults or
  ``Field(default=..., default_factory=..., exclude=...)`` (also inside
  ``Annotated[...]``); class keywords such as ``use_enum_values=True`` are accepted.
* ``__init__(**kwargs)``: unknown keywords are refused when
  ``model_config["extra"] == "forbid"`` and dropped when ``"ignore"``; each
  ``@field_validator(..., mode="before")`` runs on a value that was passed (as
  pydantic does, not on defaults); then the little input conversion that parsing a
  saved config needs (``_coerce``): a dict becomes the nested BaseModel its
  annotation names, ``dict[str, X]``/``list[X]`` are walked, a str becomes the
  annotated Enum member or ``torch.dtype``; then every
  ``@model_validator(mode="after")`` runs, then ``model_post_init``.
  With ``use_enum_values`` an Enum value passed in is stored as its ``.value``
  (pydantic's behaviour); values assigned later by validators are kept as given.
* ``model_validate(dict)`` is ``cls(**dict)``.
* ``model_dump(exclude=...)``: fields in declaration order, nested models dumped,
  lists/dicts walked, ``Field(exclude=True)`` fields left out, a
  ``@field_serializer`` applied to its field, and ``torch.dtype`` values written
  as ``str(dtype)`` (what compressed-tensors' ``TorchDtype`` serializer returns).
  Enum members are returned as they are stored (as pydantic's python-mode dump);
  ``json.dump`` writes a ``str`` Enum as its string value.

Beyond that no type checking or coercion is done: the maker passes values of the
right types. Nothing here touches the quantization arithmetic. The key set it dumps
matches the quantization_config of published llm-compressor checkpoints.
"""

import enum
import typing

__version__ = "2.0-stub"

_MISSING = object()


class FieldInfo:
    def __init__(self, default=_MISSING, default_factory=None, exclude=False, **kw):
        self.default = default
        self.default_factory = default_factory
        self.exclude = exclude
        self.extra = kw

    def get_default(self):
        if self.default_factory is not None:
            return self.default_factory()
        if self.default is _MISSING:
            raise TypeError("field is required")
        return self.default


def Field(default=_MISSING, *, default_factory=None, exclude=False, **kw):
    return FieldInfo(default, default_factory, exclude, **kw)


def ConfigDict(**kw):
    return dict(kw)


class _Decorated:
    def __init__(self, kind, func, fields=(), mode=None):
        self.kind = kind
        self.func = func.__func__ if isinstance(func, (classmethod, staticmethod)) else func
        self.fields = fields
        self.mode = mode


def field_validator(*fields, mode="after", **kw):
    def deco(func):
        return _Decorated("field_validator", func, fields, mode)

    return deco


def model_validator(*, mode):
    def deco(func):
        return _Decorated("model_validator", func, (), mode)

    return deco


def field_serializer(*fields, **kw):
    def deco(func):
        return _Decorated("field_serializer", func, fields)

    return deco


def _coerce(annotation, value):
    """The little of pydantic's input conversion that parsing a saved config needs:
    dict -> nested BaseModel, dict[str, X] / list[X] walked, str -> Enum member,
    str -> torch.dtype (compressed-tensors' TorchDtype accepts "torch.int8" or "int8")."""
    if annotation is None or value is None:
        return value
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _coerce(args[0], value)
    if origin in (dict, typing.Dict) and isinstance(value, dict) and len(args) == 2:
        return {k: _coerce(args[1], v) for k, v in value.items()}
    if origin in (list, typing.List) and isinstance(value, list) and args:
        return [_coerce(args[0], v) for v in value]
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel) and isinstance(value, dict):
            return annotation(**value)
        if issubclass(annotation, enum.Enum) and isinstance(value, str) and not isinstance(value, enum.Enum):
            return annotation(value)
        if annotation.__module__ == "torch" and annotation.__name__ == "dtype" and isinstance(value, str):
            import torch

            return getattr(torch, value[len("torch."):] if value.startswith("torch.") else value)
        return value
    if args:  # Union / Optional
        for arg in args:
            if arg is type(None):
                continue
            if isinstance(value, dict) and (
                (isinstance(arg, type) and issubclass(arg, BaseModel))
            ):
                return arg(**value)
        for arg in args:
            if arg is type(None):
                continue
            new = _coerce(arg, value)
            if new is not value:
                return new
    return value


class BaseModel:
    model_config: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__()
        cls.__pydantic_class_kwargs__ = dict(kwargs)
        fields = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(getattr(base, "__pydantic_fields__", {}))
        validators = []
        for base in reversed(cls.__mro__):
            for name, value in list(vars(base).items()):
                if isinstance(value, _Decorated):
                    validators.append((name, value))
        hints = cls.__dict__.get("__annotations__", {})
        for name, annotation in hints.items():
            if name == "model_config" or name.startswith("_"):
                continue
            default = cls.__dict__.get(name, _MISSING)
            info = default if isinstance(default, FieldInfo) else FieldInfo(default)
            # Annotated[T, Field(...)]
            for meta in getattr(annotation, "__metadata__", ()) or ():
                if isinstance(meta, FieldInfo):
                    if info.default is _MISSING and info.default_factory is None:
                        info = FieldInfo(
                            default if not isinstance(default, FieldInfo) else _MISSING,
                            meta.default_factory,
                            meta.exclude,
                        )
                    else:
                        info.exclude = info.exclude or meta.exclude
            info.annotation = annotation
            fields[name] = info
            if name in cls.__dict__:
                delattr(cls, name)  # instances hold the value
        cls.__pydantic_fields__ = fields
        cls.__pydantic_decorators__ = {}
        for name, dec in validators:
            cls.__pydantic_decorators__[name] = dec
            if name in cls.__dict__:
                delattr(cls, name)

    def __init__(self, **data):
        cls = type(self)
        config = cls.model_config or {}
        use_enum_values = cls.__pydantic_class_kwargs__.get(
            "use_enum_values", config.get("use_enum_values", False)
        )
        decs = cls.__pydantic_decorators__.values()
        for key in data:
            if key not in cls.__pydantic_fields__:
                if config.get("extra") == "forbid":
                    raise ValueError(f"{cls.__name__}: extra field {key!r} not permitted")
        for name, info in cls.__pydantic_fields__.items():
            if name in data:
                value = data[name]
                for dec in decs:
                    if dec.kind == "field_validator" and name in dec.fields and dec.mode == "before":
                        value = dec.func(cls, value)
                value = _coerce(info.annotation, value)
                for dec in decs:
                    if dec.kind == "field_validator" and name in dec.fields and dec.mode != "before":
                        value = dec.func(cls, value)
                if use_enum_values and isinstance(value, enum.Enum):
                    value = value.value
            else:
                value = info.get_default()
            object.__setattr__(self, name, value)
        for dec in decs:
            if dec.kind == "model_validator" and dec.mode == "after":
                result = dec.func(self)
                if result is not None and result is not self:
                    self.__dict__.update(result.__dict__)
        post = getattr(self, "model_post_init", None)
        if post is not None:
            post(None)

    def model_post_init(self, __context):
        pass

    @classmethod
    def model_validate(cls, obj):
        """cls(**obj): what compressed-tensors' CompressedTensorsDequantizer calls on the
        quantization_config read from config.json."""
        return obj if isinstance(obj, cls) else cls(**obj)

    def _serialize(self, value):
        import torch

        if isinstance(value, BaseModel):
            return value.model_dump()
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, (list, tuple)):
            return [self._serialize(v) for v in value]
        if isinstance(value, dict):
            return {k: self._serialize(v) for k, v in value.items()}
        return value

    def model_dump(self, exclude=None, **kw):
        exclude = set(exclude or ())
        cls = type(self)
        out = {}
        for name, info in cls.__pydantic_fields__.items():
            if name in exclude or info.exclude:
                continue
            value = getattr(self, name)
            serializer = None
            for dec in cls.__pydantic_decorators__.values():
                if dec.kind == "field_serializer" and name in dec.fields:
                    serializer = dec
            if serializer is not None:
                out[name] = serializer.func(self, value)
            else:
                out[name] = self._serialize(value)
        return out

    def __eq__(self, other):
        return type(self) is type(other) and self.model_dump() == other.model_dump()

    def __repr__(self):
        body = ", ".join(f"{k}={getattr(self, k)!r}" for k in type(self).__pydantic_fields__)
        return f"{type(self).__name__}({body})"

    def model_copy(self, deep=False):
        import copy

        return copy.deepcopy(self) if deep else copy.copy(self)


class GetCoreSchemaHandler:  # referenced by compressed_tensors.utils.type only
    pass


class GetJsonSchemaHandler:
    pass


class ValidationError(ValueError):
    pass
