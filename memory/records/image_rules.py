"""Untrusted image bytes: limits, validation with Pillow, and captions by the thread's LLM.

Spec: ``add_image``/``update_image`` (``mime_type`` "detected and validated
from the image bytes when omitted; the supported detected types are PNG,
JPEG, and WEBP"), ``ImageMimeType`` ("Animated PNG and WebP are not
supported") and the OracleThread constructor's ``image_input_limit_config``
("raw-image and LLM image-request limits ... Omitted fields use SDK defaults.
Validation cannot be disabled").

Pillow only ever sees bytes that already passed the size limit, and only
inside ``validate_image``:

1. ``len(data) <= max_raw_image_bytes`` (before Pillow sees anything);
2. ``Image.open`` restricted to the PNG, JPEG and WEBP plugins (no other
   decoder touches the bytes) reads the header; ``width * height`` must not
   exceed ``max_image_pixels`` (checked here, not left to Pillow's global
   ``MAX_IMAGE_PIXELS`` warning; Pillow's own ``DecompressionBombError`` is
   reported the same way);
3. more than one frame (APNG, animated WebP) is refused;
4. ``verify()`` checks the container (PNG chunk CRCs ...), then a fresh
   ``open`` + ``load()`` decodes the pixels, which catches truncated data. A
   JPEG is decoded through ``Image.draft`` at 1/8 scale (libjpeg's DCT scaling
   still reads every byte of the stream, so truncation is caught, in 1/64 of
   the memory); PNG and WEBP have no reduced decode, so the pixel ceiling
   below is what bounds them;
5. the detected type must equal a declared ``mime_type``.

Every refusal is ``InvalidArgument`` (a ``ValueError``) naming the argument
(``image``, ``mime_type``, or the message part it came from); over HTTP, 422.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from PIL import Image as PilImage

from memory.core.errors import (
    MAX_BATCH_IMAGE_PIXELS,
    MAX_BATCH_IMAGES,
    MAX_CONTENT_CHARS,
    InvalidArgument,
    InvalidType,
    check_size,
    check_text,
)
from memory.core.types import NOTSET, ImageMimeType, NotSet
from memory.llm.adapters import MAX_CHARS_PER_TOKEN, checked_text
from memory.llm.prompts import CAPTION_SYSTEM_PROMPT, CAPTION_USER_PROMPT

logger = logging.getLogger(__name__)

#: Pillow format names accepted, and the MIME type each one is. ``MPO`` is
#: the multi-picture JPEG many cameras write: its first picture is a plain
#: JPEG (the others are previews or stereo views, not animation).
FORMAT_MIME_TYPES = {
    "PNG": ImageMimeType.PNG,
    "JPEG": ImageMimeType.JPEG,
    "MPO": ImageMimeType.JPEG,
    "WEBP": ImageMimeType.WEBP,
}
#: Only these Pillow plugins may open untrusted bytes.
_PLUGINS = ("PNG", "JPEG", "WEBP")
ALLOWED_MIME_TYPES = ", ".join(m.value for m in ImageMimeType)


MIB = 1024 * 1024
#: Resolved defaults and absolute maxima of ``ImageInputLimitConfig`` (the SDK 26.8.0 values;
#: ``max_image_pixels`` is ours). Its ceiling bounds the memory of one request: a full decode is
#: ``width * height * 4`` bytes at most (RGBA), so 40 MP is at most ~160 MB, whatever a thread sets
#: (200 MP allowed ~800 MB for a 656 KB upload). 40 MP still takes 7680 x 5120 photographs.
IMAGE_LIMIT_DEFAULTS = {
    "max_raw_image_bytes": 10 * MIB,
    "max_images_per_llm_request": 100,
    "max_total_raw_image_bytes_per_llm_request": 100 * MIB,
    "max_image_pixels": 40_000_000,
}
IMAGE_LIMIT_MAXIMA = {
    "max_raw_image_bytes": 32 * MIB,
    "max_images_per_llm_request": 512,
    "max_total_raw_image_bytes_per_llm_request": 256 * MIB,
    "max_image_pixels": 40_000_000,
}
#: Field names of configs stored before the SDK's names were adopted.
_EARLIER_NAMES = {"max_image_bytes": "max_raw_image_bytes", "max_images_per_request": "max_images_per_llm_request",
                  "max_request_image_bytes": "max_total_raw_image_bytes_per_llm_request"}


@dataclass(frozen=True)
class ImageInputLimitConfig:
    """Limits on raw images and on LLM requests that carry images (SDK 26.8.0: ``ImageInputLimitConfig``;
    field names, order, defaults and maxima are the SDK's).

    * ``max_raw_image_bytes`` (10 MiB, at most 32 MiB): largest accepted image, raw bytes.
    * ``max_images_per_llm_request`` (100, at most 512): images in one LLM request.
    * ``max_total_raw_image_bytes_per_llm_request`` (100 MiB, at most 256 MiB): raw image bytes in one
      LLM request, all images together (base64 makes the request about 4/3 of that).
    * ``max_image_pixels`` (ours: 40,000,000, also the most a thread may set): largest
      ``width * height``, read from the header before any decode; larger is a decompression bomb
      (a few KB of PNG can declare gigapixels). Decoding one RGBA image of 40 MP needs about 160 MB,
      so the ceiling bounds one request's memory (``IMAGE_LIMIT_MAXIMA``).

    Every field defaults to ``NOTSET`` (the resolved default is read in its place; ``given_fields``
    names the fields set, for field-by-field resolution, ``merged_over``). Each must be a positive
    int no larger than its maximum: validation cannot be disabled. ValueError otherwise (also for a
    non-int, as the SDK does).
    """

    max_raw_image_bytes: int | NotSet = NOTSET
    max_images_per_llm_request: int | NotSet = NOTSET
    max_total_raw_image_bytes_per_llm_request: int | NotSet = NOTSET
    max_image_pixels: int | NotSet = NOTSET

    def __post_init__(self):
        given = frozenset(f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not NOTSET)
        object.__setattr__(self, "_given", given)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is NOTSET:
                object.__setattr__(self, f.name, IMAGE_LIMIT_DEFAULTS[f.name])
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgument(f.name, "must be a positive integer (image validation cannot be disabled)")
            if value > IMAGE_LIMIT_MAXIMA[f.name]:
                raise InvalidArgument(f.name, f"exceeds the maximum of {IMAGE_LIMIT_MAXIMA[f.name]}")

    @property
    def given_fields(self) -> frozenset[str]:
        """Names of the fields the caller set."""
        return self._given

    def merged_over(self, base: ImageInputLimitConfig | None) -> ImageInputLimitConfig:
        """This config laid over ``base`` field by field (given here, else given in ``base``, else default)."""
        if base is None:
            return self
        return type(self)(**{f.name: getattr(self if f.name in self._given else base, f.name)
                             for f in dataclasses.fields(self) if f.name in self._given | base.given_fields})

    def to_thread_config(self) -> dict[str, int]:
        """The JSON stored under ``Thread.config["image_input_limit_config"]``: the given fields."""
        return {name: getattr(self, name) for name in sorted(self._given)}

    @classmethod
    def from_thread_config(cls, config: Mapping[str, Any] | None,
                           default: ImageInputLimitConfig | None = None) -> ImageInputLimitConfig:
        """The limits stored in a ``Thread.config`` laid over ``default`` (the client's) field by field.

        A stored int above today's maximum (a thread configured before a ceiling was lowered,
        ``max_image_pixels`` up to 200,000,000) reads as the maximum.
        """
        stored = (config or {}).get(THREAD_CONFIG_KEY) or {}
        known = {f.name for f in dataclasses.fields(cls)}
        values = {_EARLIER_NAMES.get(k, k): v for k, v in stored.items()}
        values = {k: min(v, IMAGE_LIMIT_MAXIMA[k]) if k in IMAGE_LIMIT_MAXIMA and type(v) is int else v
                  for k, v in values.items()}
        return cls(**{k: v for k, v in values.items() if k in known}).merged_over(default)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ImageInputLimitConfig:
        """Build from JSON input (the HTTP API); unknown keys raise ValueError naming them."""
        if not isinstance(data, Mapping):
            raise InvalidType(THREAD_CONFIG_KEY, "must be an object")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise InvalidArgument(f"{THREAD_CONFIG_KEY}.{unknown[0]}", "unknown image limit")
        return cls(**data)


THREAD_CONFIG_KEY = "image_input_limit_config"


@dataclass(frozen=True)
class ValidImage:
    """Bytes that passed ``validate_image``: their MIME type and size in pixels and bytes."""

    data: bytes
    mime_type: ImageMimeType
    width: int
    height: int

    @property
    def size_bytes(self) -> int:
        return len(self.data)


def check_mime_type(value: Any, field: str = "mime_type") -> ImageMimeType | None:
    """An ``ImageMimeType`` or its string value (None stays None); ValueError for anything else."""
    if value is None:
        return None
    try:
        return ImageMimeType(value)
    except ValueError:
        raise InvalidArgument(field, f"{value!r} is not supported; use one of: {ALLOWED_MIME_TYPES}") from None


def check_description(value: Any, field: str = "description") -> str | None:
    """An image's description: None, or a string of valid Unicode of at most ``MAX_CONTENT_CHARS`` characters
    (``memory.core.errors``: it is chunked and embedded like a memory's text). ValueError/TypeError name ``field``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidType(field, "must be a string or None")
    check_text(value, field)
    check_size(value, field, MAX_CONTENT_CHARS)
    return value


def image_bytes(value: Any, field: str = "image") -> bytes:
    """Raw bytes from ``bytes``/``bytearray``/``memoryview``; TypeError for anything else."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidType(field, f"must be bytes, not {type(value).__name__}")


def decode_base64(value: Any, field: str) -> bytes:
    """Bytes from a base64 string (standard alphabet, padding required, whitespace ignored).

    A ``data:image/...;base64,`` prefix is accepted and dropped. Raises
    TypeError for a non-string, ValueError for text that is not base64.
    """
    if not isinstance(value, str):
        raise InvalidType(field, f"must be a base64 string, not {type(value).__name__}")
    text = value.strip()
    if text.startswith("data:"):
        header, sep, text = text.partition(",")
        if not sep or not header.endswith(";base64"):
            raise InvalidArgument(field, "a data URI must be of the form data:<mime type>;base64,<data>")
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(field, "is not valid base64") from None


def decode_image_base64(value: Any, field: str, mime_type: Any = None,
                        mime_field: str = "mime_type") -> tuple[bytes, ImageMimeType | None]:
    """(bytes, declared type) from base64 text or a ``data:<mime type>;base64,<data>`` URI.

    A data URI's media type is a declaration like ``mime_type``: it must be
    PNG, JPEG or WEBP (ValueError naming ``field``) and agree with a given
    ``mime_type`` (ValueError naming ``mime_field``); the declared type
    returned (the URI's, else ``mime_type``, else None) then goes to
    ``validate_image``, which refuses it when the bytes are something else
    (declared types that lie). Errors of ``decode_base64`` otherwise.
    """
    declared = check_mime_type(mime_type, mime_field)
    if isinstance(value, str) and value.strip().startswith("data:"):
        media = value.strip()[5:].partition(",")[0].split(";")[0].strip().lower()
        if media:
            try:
                in_uri = ImageMimeType(media)
            except ValueError:
                raise InvalidArgument(field, f"the data URI declares {media!r}; use one of: {ALLOWED_MIME_TYPES}"
                                      ) from None
            if declared is not None and declared is not in_uri:
                raise InvalidArgument(mime_field, f"is {declared.value} but the data URI declares {in_uri.value}")
            declared = in_uri
    return decode_base64(value, field), declared


@dataclass
class ImageBudget:
    """What one call's images may cost before they are decoded: at most ``MAX_BATCH_IMAGES`` images and
    ``MAX_BATCH_IMAGE_PIXELS`` pixels in all (``memory.core.errors``). ``validate_image`` charges each image
    from its header, before verifying or decoding it; ``charge`` raises ValueError (``InvalidArgument``
    naming the image's field and the limit) once the call is over either."""

    images: int = 0
    pixels: int = 0

    def charge(self, width: int, height: int, field: str) -> None:
        """Count one image of ``width`` x ``height`` pixels; ``InvalidArgument`` naming ``field`` past a limit."""
        self.images += 1
        self.pixels += width * height
        if self.images > MAX_BATCH_IMAGES:
            raise InvalidArgument(field, f"is image {self.images} of this call; the limit is {MAX_BATCH_IMAGES} "
                                         "images per call (MAX_BATCH_IMAGES)")
        if self.pixels > MAX_BATCH_IMAGE_PIXELS:
            raise InvalidArgument(field, f"brings this call's images to {self.pixels} pixels; the limit is "
                                         f"{MAX_BATCH_IMAGE_PIXELS} per call (MAX_BATCH_IMAGE_PIXELS)")


def validate_image(data: Any, mime_type: Any = None, *, limits: ImageInputLimitConfig,
                   field: str = "image", mime_field: str = "mime_type",
                   budget: ImageBudget | None = None) -> ValidImage:
    """Check untrusted image bytes; return them with their detected type and size (module docstring).

    ``mime_type`` (an ``ImageMimeType``, its value, or None to detect) must
    match what the bytes are. Raises ``InvalidArgument`` naming ``field`` for
    empty, oversize, unreadable, truncated, animated or too large (pixels)
    images, naming ``mime_field`` for an unsupported or lying declared type;
    ``InvalidType`` when ``data`` is not bytes. With a ``budget`` (one call's images), the image is
    charged to it from its header, before it is verified or decoded.
    """
    data = image_bytes(data, field)
    declared = check_mime_type(mime_type, mime_field)
    if not data:
        raise InvalidArgument(field, "is empty")
    if len(data) > limits.max_raw_image_bytes:
        raise InvalidArgument(
            field, f"is {len(data)} bytes; the limit is {limits.max_raw_image_bytes} bytes "
            "(ImageInputLimitConfig.max_raw_image_bytes)")
    detected, width, height = _inspect(data, limits, field, budget)
    if declared is not None and declared is not detected:
        raise InvalidArgument(mime_field, f"declared {declared.value} but the bytes are {detected.value}")
    return ValidImage(data=data, mime_type=detected, width=width, height=height)


def _inspect(data: bytes, limits: ImageInputLimitConfig, field: str,
             budget: ImageBudget | None = None) -> tuple[ImageMimeType, int, int]:
    """Open, bound, charge to ``budget``, verify and decode ``data`` with Pillow; (type, width, height) or
    ``InvalidArgument``."""
    try:
        with PilImage.open(io.BytesIO(data), formats=_PLUGINS) as img:
            mime = FORMAT_MIME_TYPES.get(img.format or "")
            if mime is None:
                raise InvalidArgument(field, f"is a {img.format} image; supported: PNG, JPEG, WEBP")
            width, height = img.size
            if width < 1 or height < 1:
                raise InvalidArgument(field, f"has no pixels ({width}x{height})")
            if width * height > limits.max_image_pixels:
                raise _bomb(field, width, height, limits)
            if budget is not None:
                budget.charge(width, height, field)
            if mime is not ImageMimeType.JPEG and getattr(img, "n_frames", 1) > 1:
                raise InvalidArgument(
                    field, f"is an animated {img.format} ({img.n_frames} frames); animated images are not supported")
            img.verify()
        with PilImage.open(io.BytesIO(data), formats=_PLUGINS) as img:
            if mime is ImageMimeType.JPEG:
                # Decode at 1/8 scale: every byte is still read (truncation caught), 1/64 the memory.
                img.draft(None, (max(1, width // 8), max(1, height // 8)))
            img.load()
    except InvalidArgument:
        raise
    except PilImage.DecompressionBombError as exc:
        logger.info("refused image: %s", exc)
        # Pillow's text names its own global limit, not this thread's: give ours.
        raise InvalidArgument(field, f"declares too many pixels (decompression bomb); the limit is "
                                     f"{limits.max_image_pixels} (ImageInputLimitConfig.max_image_pixels)") from None
    except PilImage.UnidentifiedImageError:
        raise InvalidArgument(field, "is not a PNG, JPEG or WEBP image") from None
    except MemoryError:
        raise InvalidArgument(field, "could not be decoded within memory limits") from None
    except Exception as exc:  # noqa: BLE001 - any failure to parse untrusted bytes is a bad image
        # Pillow reports broken data as OSError ("image file is truncated"),
        # SyntaxError (broken PNG chunks), ValueError, EOFError, struct.error ...
        raise InvalidArgument(field, f"is corrupt or truncated ({type(exc).__name__}: {exc})") from None
    return mime, width, height


def _bomb(field: str, width: int, height: int, limits: ImageInputLimitConfig) -> InvalidArgument:
    return InvalidArgument(
        field, f"is {width}x{height} = {width * height} pixels; the limit is {limits.max_image_pixels} "
        "(ImageInputLimitConfig.max_image_pixels, decompression bomb guard)")


# --- captions -------------------------------------------------------------------------

#: Reply cap for one caption, in tokens.
CAPTION_MAX_TOKENS = 200


def check_llm_request(images: list[ValidImage], limits: ImageInputLimitConfig, field: str = "image") -> None:
    """Refuse an LLM request whose images break ``limits`` (count, raw bytes together); ValueError naming ``field``."""
    if len(images) > limits.max_images_per_llm_request:
        raise InvalidArgument(
            field, f"{len(images)} images in one LLM request; the limit is {limits.max_images_per_llm_request} "
            "(ImageInputLimitConfig.max_images_per_llm_request)")
    total = sum(img.size_bytes for img in images)
    if total > limits.max_total_raw_image_bytes_per_llm_request:
        raise InvalidArgument(
            field, f"{total} image bytes in one LLM request; "
            f"the limit is {limits.max_total_raw_image_bytes_per_llm_request} "
            "(ImageInputLimitConfig.max_total_raw_image_bytes_per_llm_request); pass a description instead")


def data_uri(image: ValidImage) -> str:
    """``data:<mime>;base64,<data>``: how an image travels in an OpenAI-style ``image_url`` part."""
    return f"data:{image.mime_type.value};base64,{base64.b64encode(image.data).decode('ascii')}"


def caption_messages(image: ValidImage) -> list[dict[str, Any]]:
    """The chat request for a caption: a system prompt and one user message with a text and an ``image_url`` part."""
    return [
        {"role": "system", "content": CAPTION_SYSTEM_PROMPT},
        {"role": "user", "content": [
            {"type": "text", "text": CAPTION_USER_PROMPT},
            {"type": "image_url", "image_url": {"url": data_uri(image)}},
        ]},
    ]


def generate_caption(image: ValidImage, llm: Any, *, limits: ImageInputLimitConfig,
                     field: str = "image") -> str | None:
    """Describe ``image`` with ``llm`` (spec: "When it is omitted or None, an attached LLM generates a caption").

    Without an LLM (``llm`` None) the description stays None: there is nothing
    that can look at the image, and inventing text (a file name, "an image")
    would only add noise to search; the image is stored, listed and returned,
    just not found by search until ``update_image`` gives it a description.
    With one, one ``complete_text`` request carrying the image as an
    OpenAI-style ``image_url`` data-URI part; the reply, stripped, is the
    description. The request must fit ``limits`` (ValueError naming ``field`` otherwise). LLM errors
    (``memory.llm.adapters.LlmError``: unreachable, timeout, rejected, and ``LlmBadText`` for a reply that is
    blank, not printable, an error body, the prompt echoed or not words: ``checked_text``, issue #34) propagate,
    and the caller stores nothing: an image silently left without its caption, or with garbage for one, could
    never be found.
    """
    if llm is None:
        return None
    check_llm_request([image], limits, field)
    reply = llm.complete_text(caption_messages(image), max_tokens=CAPTION_MAX_TOKENS)
    return checked_text(reply, what="caption", max_chars=CAPTION_MAX_TOKENS * MAX_CHARS_PER_TOKEN,
                        prompts=(CAPTION_SYSTEM_PROMPT, CAPTION_USER_PROMPT))
