"""Character-level text from the standard library: the data of the site's small language models."""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from posenc._checks import check_positive_int

__all__ = ["CharCorpus", "stdlib_corpus"]


@dataclass(frozen=True)
class CharCorpus:
    """Text as character ids: the data of the site's small language models.

    Every ASCII character of the training text gets an id, in sorted order; any other character,
    and any character the training text lacks, gets one extra id, :attr:`unknown`.

    Parameters
    ----------
    chars : str
        The vocabulary: id ``i`` is ``chars[i]``.
    train, held_out : torch.Tensor
        The two texts as 1-D int64 id tensors.
    """

    chars: str
    train: torch.Tensor
    held_out: torch.Tensor

    @classmethod
    def from_text(cls, train_text: str, held_out_text: str) -> "CharCorpus":
        """Build the vocabulary from ``train_text`` and encode both texts."""
        chars = "".join(sorted({c for c in train_text if c.isascii()}))
        empty = torch.empty(0, dtype=torch.long)
        corpus = cls(chars, empty, empty)
        return cls(chars, corpus.encode(train_text), corpus.encode(held_out_text))

    @property
    def unknown(self) -> int:
        """The id of characters outside the vocabulary, ``len(chars)``."""
        return len(self.chars)

    @property
    def vocab_size(self) -> int:
        """Number of ids, the vocabulary plus :attr:`unknown`."""
        return len(self.chars) + 1

    def encode(self, text: str) -> torch.Tensor:
        """Ids of the characters of ``text``, ``(len(text),)`` int64."""
        index = {c: i for i, c in enumerate(self.chars)}
        return torch.tensor([index.get(c, self.unknown) for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        """The text of 1-D ``ids``; the unknown id reads as ``"?"``."""
        return "".join(self.chars[i] if i < self.unknown else "?" for i in ids.tolist())

    def windows(
        self, length: int, batch_size: int, data: torch.Tensor | None = None
    ) -> Callable[[torch.Generator], torch.Tensor]:
        """A ``make_batch`` for :func:`train`: random windows of ``length + 1`` ids.

        Parameters
        ----------
        length : int
            Number of predictions per window (the model reads ``length`` ids).
        batch_size : int
            Windows per batch.
        data : torch.Tensor, optional
            Ids to cut the windows from; default :attr:`train`.

        Returns
        -------
        collections.abc.Callable
            ``make_batch(generator) -> (batch_size, length + 1)`` int64 tensor.
        """
        length = check_positive_int("length", length)
        batch_size = check_positive_int("batch_size", batch_size)
        source = self.train if data is None else data
        if source.ndim != 1 or source.numel() < length + 1:
            raise ValueError(
                f"data must be 1-D with at least length + 1 = {length + 1} ids, got shape {tuple(source.shape)}"
            )

        def make_batch(generator: torch.Generator) -> torch.Tensor:
            # Starts 0 ... len - length - 1: the last window ends on the last id.
            start = torch.randint(0, len(source) - length, (batch_size,), generator=generator)
            return source[start[:, None] + torch.arange(length + 1)]  # (batch_size, length + 1)

        return make_batch


    def held_out_windows(self, length: int, count: int) -> torch.Tensor:
        """The first ``count`` held-out characters cut into consecutive windows of ``length``.

        Window ``k`` holds ids ``k * length ... (k + 1) * length``: its last id is the next
        window's first, so each of the ``count`` characters after the first id is predicted
        exactly once, from the characters before it in its window. Reading the same ``count``
        characters at every ``length`` is what makes losses at different lengths comparable.

        Parameters
        ----------
        length : int
            Number of predictions per window.
        count : int
            Number of characters to predict, a multiple of ``length``, at most
            ``len(held_out) - 1``.

        Returns
        -------
        torch.Tensor
            ``(count // length, length + 1)`` int64 ids, input to :func:`posenc.models.token_losses`.
        """
        length = check_positive_int("length", length)
        count = check_positive_int("count", count)
        if count % length:
            raise ValueError(f"count must be a multiple of length = {length}, got {count}")
        if count + 1 > len(self.held_out):
            raise ValueError(
                f"count must be at most len(held_out) - 1 = {len(self.held_out) - 1}, got {count}"
            )
        return self.held_out[: count + 1].unfold(0, length + 1, length)  # (count // length, length + 1)


def stdlib_corpus(train_modules: list[str], held_out_modules: list[str]) -> CharCorpus:
    """A :class:`CharCorpus` of modules of the running Python's standard library.

    The source files are read from the interpreter's own ``stdlib`` directory, so the data is
    available offline; the numbers a page prints then depend only on the Python version.

    Parameters
    ----------
    train_modules, held_out_modules : list of str
        Module names such as ``"argparse"``; each text is the files ``<name>.py`` concatenated.

    Returns
    -------
    CharCorpus
        Vocabulary from the training modules.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])

    def read(names: list[str]) -> str:
        missing = [name for name in names if not (stdlib / f"{name}.py").is_file()]
        if not names or missing:
            raise ValueError(f"modules must be non-empty names of files in {stdlib}, missing: {missing}")
        return "".join((stdlib / f"{name}.py").read_text(encoding="utf-8") for name in names)

    return CharCorpus.from_text(read(train_modules), read(held_out_modules))
