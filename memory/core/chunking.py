"""Split long record text into overlapping chunks for embedding.

all-MiniLM-L6-v2 reads at most 256 word pieces and silently drops the rest, so
a record longer than that is indexed as several ``SearchChunk`` rows. Word
counts stand in for tokens (about 1.3 word pieces per English word), so 180
words keeps a chunk inside the model's window; chunks overlap by 30 words so
a sentence cut at a boundary is still whole in one of them.
"""

from __future__ import annotations

CHUNK_WORDS = 180
OVERLAP_WORDS = 30


def chunk_text(text: str, *, size: int = CHUNK_WORDS, overlap: int = OVERLAP_WORDS) -> list[str]:
    """Return ``text`` as a list of chunks of at most ``size`` words.

    Short text (including empty text) is one chunk, unchanged. ``overlap`` must
    be smaller than ``size`` (ValueError otherwise).
    """
    if overlap >= size:
        raise ValueError("overlap must be smaller than size")
    words = text.split()
    if len(words) <= size:
        return [text]
    step = size - overlap
    chunks = []
    for start in range(0, len(words), step):
        chunks.append(" ".join(words[start : start + size]))
        if start + size >= len(words):
            break
    return chunks


def estimate_tokens(text: str) -> int:
    """Estimate the token count of ``text`` as ceil(characters / 4).

    The usual rule of thumb for English with BPE tokenizers (OpenAI's
    "1 token is about 4 characters"); no tokenizer download is needed.
    """
    return (len(text) + 3) // 4
