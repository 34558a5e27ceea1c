"""Read TFRecord files of ``tf.train.Example`` records without TensorFlow.

Why a reader of our own: the day's partition (``digits_data.py``) is TFRecords, and a PyTorch
job that trained on it through TensorFlow would pull a second framework (about 1.5 GiB, seconds
of import) into every container for a file format of a few dozen lines. Writing a second copy
of the data beside the TFRecords (``.npz``) would double the partition, change what the data
asset announces and land inside ``train/``, where the TensorFlow job deals every file to its
workers. So the PyTorch job reads the very records the TensorFlow job reads.

The framing (TensorFlow's ``record_writer.cc``): per record, a little-endian ``uint64`` length,
the masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data. Both checksums
are checked: a truncated or corrupt file is an error naming the file and the record, never a
short dataset. The payload is the ``Example`` protobuf (``example.proto``/``feature.proto``):
``Example.features`` (1) -> ``Features.feature`` (1, map<string, Feature>) -> ``Feature`` with
``bytes_list`` (1), ``float_list`` (2) or ``int64_list`` (3), each a ``value`` (1) list, packed or
not. Anything else in a message is skipped by its wire type.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

Value = list[float] | list[int] | list[bytes]


class TFRecordError(ValueError):
    """A file that is not a well-formed TFRecord of Examples (the message names file and record)."""


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as TensorFlow's ``crc32c::Value``."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC: rotated right by 15 bits plus a constant, so a CRC of CRCs differs."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path: str | Path) -> Iterator[bytes]:
    """Every record's payload in ``path``, each checked against its CRCs."""
    data = Path(path).read_bytes()
    pos, index = 0, 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise TFRecordError(f"{path}: record {index} is cut short in its header")
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if masked_crc(header) != header_crc:
            raise TFRecordError(f"{path}: record {index}'s length fails its CRC (not a TFRecord file?)")
        end = pos + 12 + length + 4
        if end > len(data):
            raise TFRecordError(f"{path}: record {index} is cut short ({length} bytes announced)")
        payload = data[pos + 12 : pos + 12 + length]
        if masked_crc(payload) != struct.unpack("<I", data[end - 4 : end])[0]:
            raise TFRecordError(f"{path}: record {index}'s data fails its CRC")
        yield payload
        pos, index = end, index + 1


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise TFRecordError("a protobuf varint runs past its message")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a message: an int for varints and fixed widths, else bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = struct.unpack("<Q", buf[pos : pos + 8])[0], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4  # kept as bytes: a float's or a fixed32's
        else:
            raise TFRecordError(f"protobuf wire type {wire} (groups) is not in an Example")
        if pos > len(buf):
            raise TFRecordError("a protobuf field runs past its message")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _ints(wire: int, value: int | bytes) -> list[int]:
    """An ``int64_list`` value field: one varint, or a packed run of them."""
    if isinstance(value, int):
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        n, pos = _varint(value, pos)
        out.append(_signed(n))
    return out


def _floats(wire: int, value: int | bytes) -> list[float]:
    """A ``float_list`` value field: one fixed32 (wire type 5), or a packed run of them (2)."""
    if not isinstance(value, bytes) or len(value) % 4:
        raise TFRecordError(f"a float_list value of wire type {wire} is no run of 4-byte floats")
    return list(struct.unpack(f"<{len(value) // 4}f", value))


def _feature(buf: bytes) -> Value:
    """One ``Feature`` message: its list's values (an empty Feature is an empty list)."""
    for number, _wire, value in _fields(buf):
        if not isinstance(value, bytes):
            continue
        parts = [(w, v) for n, w, v in _fields(value) if n == 1]
        if number == 1:
            return [v for _w, v in parts if isinstance(v, bytes)]
        if number == 2:
            return [f for w, v in parts for f in _floats(w, v)]
        if number == 3:
            return [i for w, v in parts for i in _ints(w, v)]
    return []


def parse_example(payload: bytes) -> dict[str, Value]:
    """A serialised ``tf.train.Example`` as ``{name: values}``."""
    out: dict[str, Value] = {}
    for number, _wire, features in _fields(payload):
        if number != 1 or not isinstance(features, bytes):
            continue
        for fnumber, _fwire, entry in _fields(features):
            if fnumber != 1 or not isinstance(entry, bytes):
                continue
            key, value = "", b""
            for enumber, _ewire, part in _fields(entry):
                if enumber == 1 and isinstance(part, bytes):
                    key = part.decode()
                elif enumber == 2 and isinstance(part, bytes):
                    value = part
            out[key] = _feature(value)
    return out


def examples(paths: list[str] | list[Path]) -> Iterator[dict[str, Value]]:
    """Every Example of every file, in order."""
    for path in paths:
        for payload in records(path):
            yield parse_example(payload)
