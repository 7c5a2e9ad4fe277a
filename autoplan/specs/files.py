"""Reading the user's input files: path checks, and bounded reads of regular files only (TOML, JSON, YAML), with
errors that name the file (and the line) and quote at most a short excerpt.

Every file autoplan reads is untrusted: a device (``/dev/zero``), a pipe, a folder, a link loop, a file of
gigabytes, text nested a million levels deep or a YAML "billion laughs" each end in one SpecError, never in a hang,
a MemoryError or a RecursionError.
"""

from __future__ import annotations

import errno
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from autoplan.errors import SpecError

NAME_MAX = 255
"""Longest file name (bytes of one path component) that Linux and macOS file systems accept."""
PATH_MAX = 4096
MAX_BYTES = 16 * 2**20
"""Largest spec file read (16 MiB): the largest built-in file is a few hundred KiB."""
MAX_DEPTH = 64
"""Deepest nesting of lists and tables accepted in a spec file (the deepest real one nests 5 levels)."""
MAX_VALUES = 1_000_000
"""Most values (counted with repeats, as a YAML alias repeats them) in one file: the validation file holds 3,223."""
MAX_ALIASES = 32
"""Most YAML aliases (``*name``) in one file: enough for hand-written files, too few for a "billion laughs" (whose
expansion the value count bounds in any case)."""
EXCERPT = 60
"""Characters of a refused value an error message quotes."""


def excerpt(value: object, limit: int = EXCERPT) -> str:
    """``repr(value)``, cut to about ``limit`` characters: what an error message quotes of a refused value."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def shown(path: object) -> str:
    """A path quoted for a message: ``repr``, with the middle of a very long one left out."""
    text = repr(str(path))
    return text if len(text) <= 200 else text[:120] + "…" + text[-60:]


def check_path(text: str, what: str) -> str:
    """``text`` if it can name a file or folder: not empty, no NUL byte, no component over ``NAME_MAX`` bytes."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"{what} must not be empty")
    quoted = excerpt(text)
    if "\0" in text:
        raise SpecError(f"{what} {quoted} contains a NUL byte")
    try:
        encoded = os.fsencode(text)                  # command-line bytes that are not UTF-8 come back as they were
    except UnicodeEncodeError:
        raise SpecError(f"{what} {quoted} is not valid Unicode text") from None
    longest = max(len(part) for part in encoded.split(b"/"))
    if longest > NAME_MAX or len(encoded) > PATH_MAX:
        raise SpecError(f"{what} {quoted} is too long ({longest} bytes in one name, {len(encoded)} in all; "
                        f"at most {NAME_MAX} and {PATH_MAX})")
    return text


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def read_bytes(path: Path | str, what: str, limit: int = MAX_BYTES, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them. A missing file, a folder, a device, a
    pipe or socket, a link loop (or any link when ``follow`` is False), an unreadable or larger file is a SpecError
    naming ``what`` file it is. Opening never blocks (a pipe with no writer) and never reads past ``limit``."""
    where = f"{what} file {shown(path)}"
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise SpecError(f"{where} does not exist") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise SpecError(f"cannot read {where}: it is a symbolic link loop" if follow else
                            f"{where} is a symbolic link; autoplan reads and writes only its own files there") from None
        raise SpecError(f"cannot read {where}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SpecError(f"cannot read {where}: it is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"cannot read {where}: it is not a regular file (a device, pipe or socket)")
        if info.st_size > limit:
            raise SpecError(f"{where} is {_size(info.st_size)}, more than the {_size(limit)} a {what} file may be")
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise SpecError(f"{where} is more than the {_size(limit)} a {what} file may be")
        return b"".join(chunks)
    except OSError as err:
        raise SpecError(f"cannot read {where}: {err.strerror or err}") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, what: str, limit: int = MAX_BYTES, follow: bool = True,
              kind: str = "text") -> str:
    """``read_bytes`` decoded as UTF-8 (a SpecError naming the byte if it is not)."""
    data = read_bytes(path, what, limit, follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"{what} file {shown(path)} is not UTF-8 text (byte {err.start}); {kind} is text") from None


def check_nesting(data: Any, where: str, depth: int = MAX_DEPTH, values: int = MAX_VALUES) -> Any:
    """``data`` if its lists and tables nest at most ``depth`` levels and hold at most ``values`` values (counted
    as often as they are reached: a YAML alias counts each time); SpecError naming ``where`` otherwise."""
    stack, seen = [(data, 1)], 0
    while stack:
        node, level = stack.pop()
        seen += 1
        if seen > values:
            raise SpecError(f"{where} holds more than {values:,} values")
        if isinstance(node, (dict, list, tuple)):
            if level > depth:
                raise SpecError(f"{where} nests deeper than {depth} levels")
            stack.extend((v, level + 1) for v in (node.values() if isinstance(node, dict) else node))
    return data


def read_toml(path: Path, what: str) -> dict:
    """The tables of a TOML file; a missing, unreadable, oversized, too deeply nested or malformed file is a
    SpecError naming it (and the line)."""
    text = read_text(path, what, kind="TOML")
    where = f"{what} file {shown(path)}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        # tomllib's message ends with "(at line L, column C)", or "(at end of document)"
        end = f"(at the end of the file, after line {len(text.rstrip().splitlines())})"
        raise SpecError(f"{where} is not valid TOML: {str(err).replace('(at end of document)', end)}") from None
    except RecursionError:
        raise SpecError(f"{where} nests deeper than {MAX_DEPTH} levels") from None
    return check_nesting(data, where)


def parse_json(data: bytes | str, where: str) -> Any:
    """A JSON document (its nesting checked); SpecError naming ``where`` if it is not JSON."""
    import json

    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        value = json.loads(data)
    except UnicodeDecodeError as err:
        raise SpecError(f"{where} is not UTF-8 text (byte {err.start}); JSON is text") from None
    except json.JSONDecodeError as err:
        raise SpecError(f"{where} is not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None
    except (ValueError, RecursionError):
        raise SpecError(f"{where} is not valid JSON (or nests deeper than {MAX_DEPTH} levels)") from None
    return check_nesting(value, where)


def read_json(path: Path | str, what: str, limit: int = MAX_BYTES, follow: bool = True) -> Any:
    """A JSON file, read as ``read_bytes`` reads and checked as ``parse_json`` checks."""
    return parse_json(read_bytes(path, what, limit, follow), f"{what} file {shown(path)}")


def read_yaml(path: Path | str, what: str) -> Any:
    """A YAML file (safe types only), read as ``read_bytes`` reads, with at most ``MAX_ALIASES`` aliases and
    nesting as ``check_nesting`` allows; errors quote at most a short excerpt."""
    import yaml

    where = f"{what} file {shown(path)}"
    text = read_text(path, what, kind="YAML")

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                Loader.aliases += 1
                if Loader.aliases > MAX_ALIASES:
                    raise SpecError(f"{where} uses more than {MAX_ALIASES} YAML aliases (*name)")
            return super().compose_node(parent, index)

    try:
        data = yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader (safe types only), aliases bounded
    except yaml.YAMLError as err:
        message = " ".join(str(err).split())
        raise SpecError(f"{where} is not valid YAML: {message[:200]}{'…' if len(message) > 200 else ''}") from None
    except RecursionError:
        raise SpecError(f"{where} nests deeper than {MAX_DEPTH} levels") from None
    return check_nesting(data, where)
