"""Thumbnails of stored images for the conversation timeline (Pillow).

The bytes were validated when the image was stored (``memory.records.image_rules``);
decoding is still restricted to the PNG, JPEG and WEBP plugins, and the
header's ``width * height`` is checked against the engine's pixel ceiling
(``memory.records.image_rules.IMAGE_LIMIT_MAXIMA``) before anything is decoded: an image
stored under an earlier, higher ceiling is not decoded on every view.

``Image.thumbnail`` with ``reducing_gap=2.0`` decodes a JPEG through
``Image.draft`` at the smallest DCT scale (down to 1/8 a side) that keeps
twice the thumbnail's size, then reduces in two steps. PNG and WEBP have no
reduced decode, so the ceiling is what bounds them.
"""

from __future__ import annotations

import io

from PIL import Image as PilImage

from memory.records.image_rules import IMAGE_LIMIT_MAXIMA

#: Longest side of a thumbnail, in pixels.
THUMB_PIXELS = 160


class TooManyPixels(OSError):
    """The image declares more pixels than ``IMAGE_LIMIT_MAXIMA["max_image_pixels"]``: not decoded."""


def thumbnail(data: bytes, size: int = THUMB_PIXELS) -> tuple[bytes, str]:
    """Return ``(png_bytes, "image/png")``: ``data`` scaled to fit ``size`` x ``size``, aspect kept.

    Raises ``PIL.UnidentifiedImageError`` (an ``OSError``) for bytes that are not PNG, JPEG or WEBP,
    ``TooManyPixels`` (an ``OSError``) for a header over the pixel ceiling, before any decode.
    """
    with PilImage.open(io.BytesIO(data), formats=["PNG", "JPEG", "WEBP"]) as img:
        width, height = img.size
        ceiling = IMAGE_LIMIT_MAXIMA["max_image_pixels"]
        if width * height > ceiling:
            raise TooManyPixels(f"{width}x{height} is over the {ceiling}-pixel ceiling; not decoded")
        img.thumbnail((size, size), reducing_gap=2.0)
        small = img if img.mode in ("RGB", "RGBA", "L", "LA") else img.convert("RGBA")
        out = io.BytesIO()
        small.save(out, format="PNG", optimize=True)
    return out.getvalue(), "image/png"
