"""Real image files built with Pillow for the image tests (tests/memory/test_images.py, tests/api/test_images.py).

Every sample is made here, in memory, by Pillow's own encoders: nothing is
downloaded or checked in. Hostile samples are real files too: an animated
PNG (APNG) and an animated WebP with two frames, a decompression bomb (a
1-bit PNG of 9000 x 6000 pixels that compresses to a few KB), truncated PNG
and JPEG files, and a PNG whose header declares 100000 x 100000 pixels.
"""

from __future__ import annotations

import io
import random
import struct
import zlib

from PIL import Image


def _encode(img: Image.Image, fmt: str, **options) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **options)
    return buf.getvalue()


def noisy(size=(48, 32), seed: int = 1) -> Image.Image:
    """An RGB image of random pixels (so that compressed data is not tiny and truncation hits pixels)."""
    rng = random.Random(seed)
    return Image.frombytes("RGB", size, bytes(rng.randrange(256) for _ in range(size[0] * size[1] * 3)))


def png(size=(48, 32), color=(200, 30, 30)) -> bytes:
    return _encode(Image.new("RGB", size, color), "PNG")


def jpeg(size=(48, 32), color=(30, 200, 30)) -> bytes:
    return _encode(Image.new("RGB", size, color), "JPEG", quality=85)


def webp(size=(48, 32), color=(30, 30, 200)) -> bytes:
    return _encode(Image.new("RGB", size, color), "WEBP", quality=80)


def gif(size=(16, 16)) -> bytes:
    return _encode(Image.new("P", size, 1), "GIF")


def animated_png() -> bytes:
    frames = [Image.new("RGB", (24, 24), c) for c in ((255, 0, 0), (0, 0, 255))]
    return _encode(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=100, loop=0)


def animated_webp() -> bytes:
    frames = [Image.new("RGB", (24, 24), c) for c in ((255, 0, 0), (0, 0, 255))]
    return _encode(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, loop=0)


def bomb() -> bytes:
    """A valid 1-bit PNG of 9000 x 6000 = 54 million pixels (over the 40 MP default and ceiling) in a few KB."""
    return _encode(Image.new("1", (9000, 6000), 0), "PNG", optimize=True)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def giant_header_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose IHDR claims ``width`` x ``height`` (CRC correct): Pillow's own bomb error territory."""
    original = png((4, 4))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rest = original[8 + 25:]  # signature (8) + IHDR chunk (4 + 4 + 13 + 4)
    return original[:8] + _chunk(b"IHDR", ihdr) + rest


def truncated_png() -> bytes:
    data = _encode(noisy((64, 64)), "PNG")
    return data[: len(data) // 2]


def truncated_jpeg() -> bytes:
    data = _encode(noisy((64, 64)), "JPEG", quality=95)
    return data[: len(data) // 2]


def size_of(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as img:
        return img.size
