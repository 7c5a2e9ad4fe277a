"""Reading the user's input files: path checks and TOML, with errors that name the file (and the line)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from autoplan.errors import SpecError

NAME_MAX = 255
"""Longest file name (bytes of one path component) that Linux and macOS file systems accept."""
PATH_MAX = 4096


def check_path(text: str, what: str) -> str:
    """``text`` if it can name a file or folder: not empty, no NUL byte, no component over ``NAME_MAX`` bytes."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"{what} must not be empty")
    shown = repr(text[:60]) + ("..." if len(text) > 60 else "")
    if "\0" in text:
        raise SpecError(f"{what} {shown} contains a NUL byte")
    try:
        encoded = os.fsencode(text)                  # command-line bytes that are not UTF-8 come back as they were
    except UnicodeEncodeError:
        raise SpecError(f"{what} {shown} is not valid Unicode text") from None
    longest = max(len(part) for part in encoded.split(b"/"))
    if longest > NAME_MAX or len(encoded) > PATH_MAX:
        raise SpecError(f"{what} {shown} is too long ({longest} bytes in one name, {len(encoded)} in all; "
                        f"at most {NAME_MAX} and {PATH_MAX})")
    return text


def read_toml(path: Path, what: str) -> dict:
    """The tables of a TOML file; a missing, unreadable or malformed file is a SpecError naming it (and the line)."""
    try:
        text = Path(path).read_text()
        return tomllib.loads(text)
    except FileNotFoundError:
        raise SpecError(f"{what} file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as err:
        # tomllib's message ends with "(at line L, column C)", or "(at end of document)"
        where = f"(at the end of the file, after line {len(text.rstrip().splitlines())})"
        message = str(err).replace("(at end of document)", where)
        raise SpecError(f"{what} file {str(path)!r} is not valid TOML: {message}") from None
    except UnicodeDecodeError as err:
        raise SpecError(f"{what} file {str(path)!r} is not UTF-8 text (byte {err.start}); TOML is text") from None
    except (OSError, ValueError) as err:
        raise SpecError(f"cannot read {what} file {str(path)!r}: {err}") from None


