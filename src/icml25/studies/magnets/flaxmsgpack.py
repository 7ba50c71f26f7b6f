"""Read (and, for the rehearsal, write) Flax checkpoints: ``flax.serialization.to_bytes`` files, the container of
the published MaskGIT tokenizer checkpoint (``tokenizer_imagenet256_checkpoint``, read upstream with
``flax.serialization.from_bytes(None, f.read())``, top key ``params``).

The format is MessagePack (https://github.com/msgpack/msgpack/blob/master/spec.md): nested maps with string keys;
each array leaf an extension of type 1 (Flax's ``_MsgpackExtType.ndarray``; 3 = numpy scalar) whose payload is
itself MessagePack: ``[shape (array of ints), dtype name (str), C-order bytes (bin)]``; arrays above 2**30 bytes
are stored as ``{"__msgpack_chunked_array__": true, "shape": {"0": .., ..}, "chunks": {"0": arr, ..}}``.

This module is a restricted decoder of that subset written here (msgpack/flax are not dependencies of the
project): it builds only dicts, lists, str, bytes, numbers, bools, None and numpy arrays of plain numeric dtypes —
no objects, no code — and every malformed or truncated input raises :class:`CheckpointError` naming the file and
the byte offset. So reading a downloaded checkpoint can never run code (unlike an unrestricted pickle).
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

EXT_NDARRAY, EXT_COMPLEX, EXT_NPSCALAR = 1, 2, 3  #: Flax's _MsgpackExtType
CHUNKED = "__msgpack_chunked_array__"
#: numeric dtypes an array leaf may have (bfloat16 needs ml_dtypes: refused with a clear error)
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                    "float32", "float64"})
MAX_DEPTH = 64


class CheckpointError(ValueError):
    """A checkpoint that is not a valid Flax msgpack file (message names the file and the offset)."""


class _Reader:
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.pos, self.name = memoryview(data), 0, name

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.name}: {what} at byte {self.pos}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"truncated: needs {n} more bytes, {len(self.data) - self.pos} left")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(">" + fmt, self.take(struct.calcsize(">" + fmt)))[0]

    def value(self, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH}")
        b = self.take(1)[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0x80 <= b <= 0x8F:
            return self.map(b & 0x0F, depth)
        if 0x90 <= b <= 0x9F:
            return [self.value(depth + 1) for _ in range(b & 0x0F)]
        if 0xA0 <= b <= 0xBF:
            return self.text(b & 0x1F)
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if b in simple:
            return simple[b]
        sized = {0xC4: "B", 0xC5: "H", 0xC6: "I"}  # bin 8/16/32
        if b in sized:
            return self.take(self.unpack(sized[b]))
        if b in (0xC7, 0xC8, 0xC9):  # ext 8/16/32: size, type, data
            n = self.unpack({0xC7: "B", 0xC8: "H", 0xC9: "I"}[b])
            return self.ext(self.unpack("b"), self.take(n))
        if 0xD4 <= b <= 0xD8:  # fixext 1/2/4/8/16
            code = self.unpack("b")
            return self.ext(code, self.take(1 << (b - 0xD4)))
        numbers = {0xCA: "f", 0xCB: "d", 0xCC: "B", 0xCD: "H", 0xCE: "I", 0xCF: "Q", 0xD0: "b", 0xD1: "h",
                   0xD2: "i", 0xD3: "q"}
        if b in numbers:
            return self.unpack(numbers[b])
        if b in (0xD9, 0xDA, 0xDB):  # str 8/16/32
            return self.text(self.unpack({0xD9: "B", 0xDA: "H", 0xDB: "I"}[b]))
        if b in (0xDC, 0xDD):  # array 16/32
            return [self.value(depth + 1) for _ in range(self.unpack("H" if b == 0xDC else "I"))]
        if b in (0xDE, 0xDF):  # map 16/32
            return self.map(self.unpack("H" if b == 0xDE else "I"), depth)
        raise self.fail(f"byte 0x{b:02x} is not a MessagePack type")

    def text(self, n: int) -> str:
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise self.fail(f"invalid utf-8 string ({err.reason})") from None

    def map(self, n: int, depth: int) -> dict:
        out: dict = {}
        for _ in range(n):
            key = self.value(depth + 1)
            if not isinstance(key, (str, int)):
                raise self.fail(f"map key of type {type(key).__name__} (only str/int keys are allowed)")
            out[key] = self.value(depth + 1)
        return out

    def ext(self, code: int, payload: bytes) -> Any:
        if code in (EXT_NDARRAY, EXT_NPSCALAR):
            arr = _array(payload, f"{self.name} (array ending at byte {self.pos})")
            return arr[()] if code == EXT_NPSCALAR else arr
        if code == EXT_COMPLEX:
            re_im = _Reader(payload, self.name).value()
            if not (isinstance(re_im, list) and len(re_im) == 2):
                raise self.fail("complex extension without (real, imag)")
            return complex(float(re_im[0]), float(re_im[1]))
        raise self.fail(f"extension type {code} (Flax writes 1 ndarray, 2 complex, 3 numpy scalar)")


def _array(payload: bytes, where: str) -> np.ndarray:
    r = _Reader(payload, where)
    tpl = r.value()
    if not (isinstance(tpl, list) and len(tpl) == 3):
        raise CheckpointError(f"{where}: array payload is not [shape, dtype, bytes]")
    shape, dtype, buf = tpl
    if isinstance(dtype, bytes):
        dtype = dtype.decode("ascii", "replace")
    if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
        raise CheckpointError(f"{where}: array shape {shape!r} is not a list of non-negative ints")
    if dtype not in DTYPES:
        raise CheckpointError(f"{where}: array dtype {dtype!r} is not one of {sorted(DTYPES)}")
    if not isinstance(buf, bytes):
        raise CheckpointError(f"{where}: array data is not a byte string")
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if len(buf) != n * dt.itemsize:
        raise CheckpointError(f"{where}: {len(buf)} data bytes for shape {tuple(shape)} {dtype} "
                              f"({n * dt.itemsize} expected)")
    return np.frombuffer(buf, dtype=dt).reshape(shape).copy()


def _unchunk(tree: Any, where: str) -> Any:
    if isinstance(tree, dict):
        if tree.get(CHUNKED) is True:
            try:
                shape = tuple(int(tree["shape"][str(i)]) for i in range(len(tree["shape"])))
                flat = np.concatenate([tree["chunks"][str(i)] for i in range(len(tree["chunks"]))])
                return flat.reshape(shape)
            except (KeyError, TypeError, ValueError) as err:
                raise CheckpointError(f"{where}: malformed chunked array ({err})") from None
        return {k: _unchunk(v, where) for k, v in tree.items()}
    return tree


def loads(data: bytes, name: str = "<bytes>") -> Any:
    """Decode one Flax msgpack document (the whole of ``data``) into plain Python + numpy arrays."""
    r = _Reader(data, name)
    tree = r.value()
    if r.pos != len(r.data):
        raise r.fail(f"{len(r.data) - r.pos} trailing bytes after the document")
    return _unchunk(tree, name)


def load(path: str | Path) -> Any:
    """:func:`loads` of a file (the caller verifies its hash first: ``core.download.verified``)."""
    return loads(Path(path).read_bytes(), str(path))


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    """``{"a": {"b": arr}}`` → ``{"a.b": arr}`` (array leaves only; other leaves raise naming the key)."""
    out: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten(value, name))
        elif isinstance(value, np.ndarray):
            out[name] = value
        else:
            raise CheckpointError(f"checkpoint leaf {name} is a {type(value).__name__}, not an array")
    return out


# ------------------------------------------------------------------------------------------- writer (rehearsal)
def _pack(obj: Any, out: bytearray) -> None:
    if obj is None:
        out.append(0xC0)
    elif isinstance(obj, bool):
        out.append(0xC3 if obj else 0xC2)
    elif isinstance(obj, int):
        if 0 <= obj <= 0x7F:
            out.append(obj)
        elif -32 <= obj < 0:
            out.append(obj + 0x100)
        elif 0 <= obj < 2 ** 32:
            out += b"\xce" + struct.pack(">I", obj)
        else:
            out += b"\xd3" + struct.pack(">q", obj)
    elif isinstance(obj, float):
        out += b"\xcb" + struct.pack(">d", obj)
    elif isinstance(obj, str):
        raw = obj.encode("utf-8")
        out += (bytes([0xA0 | len(raw)]) if len(raw) < 32 else b"\xd9" + bytes([len(raw)]) if len(raw) < 256
                else b"\xdb" + struct.pack(">I", len(raw))) + raw
    elif isinstance(obj, bytes):
        out += (b"\xc4" + bytes([len(obj)]) if len(obj) < 256 else b"\xc6" + struct.pack(">I", len(obj))) + obj
    elif isinstance(obj, (list, tuple)):
        out += bytes([0x90 | len(obj)]) if len(obj) < 16 else b"\xdd" + struct.pack(">I", len(obj))
        for v in obj:
            _pack(v, out)
    elif isinstance(obj, Mapping):
        out += bytes([0x80 | len(obj)]) if len(obj) < 16 else b"\xdf" + struct.pack(">I", len(obj))
        for k, v in obj.items():
            _pack(str(k), out)
            _pack(v, out)
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        inner = bytearray()
        _pack([list(arr.shape), arr.dtype.name, arr.tobytes("C")], inner)
        out += b"\xc9" + struct.pack(">I", len(inner)) + struct.pack(">b", EXT_NDARRAY) + bytes(inner)
    else:
        raise TypeError(f"flaxmsgpack.dumps: cannot write {type(obj).__name__}")


def dumps(tree: Any) -> bytes:
    """MessagePack bytes of ``tree`` in Flax's layout (maps in insertion order, arrays as extension 1), the format
    :func:`loads` reads; used by the rehearsal to write a miniature tokenizer checkpoint."""
    out = bytearray()
    _pack(tree, out)
    return bytes(out)
