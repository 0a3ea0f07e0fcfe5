"""Thumbnails of stored images for the conversation timeline (Pillow).

The bytes were validated when the image was stored (``memory.images``);
decoding is still restricted to the PNG, JPEG and WEBP plugins.
"""

from __future__ import annotations

import io

from PIL import Image as PilImage

#: Longest side of a thumbnail, in pixels.
THUMB_PIXELS = 160


def thumbnail(data: bytes, size: int = THUMB_PIXELS) -> tuple[bytes, str]:
    """Return ``(png_bytes, "image/png")``: ``data`` scaled to fit ``size`` x ``size``, aspect kept.

    Raises ``PIL.UnidentifiedImageError`` (an ``OSError``) for bytes that are not PNG, JPEG or WEBP.
    """
    with PilImage.open(io.BytesIO(data), formats=["PNG", "JPEG", "WEBP"]) as img:
        img.thumbnail((size, size))
        small = img if img.mode in ("RGB", "RGBA", "L", "LA") else img.convert("RGBA")
        out = io.BytesIO()
        small.save(out, format="PNG", optimize=True)
    return out.getvalue(), "image/png"
