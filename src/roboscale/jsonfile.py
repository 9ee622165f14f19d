"""Reading a JSON file someone else may have made: a regular file, bounded, read without
blocking, every syntax problem one UserError naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.yamlfile import read_text

MAX_JSON_BYTES = 1 << 30  # a summary of 100,000 trials is a few hundred MB


def read_json(path: Path, what: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    text = read_text(path, what, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    except (RecursionError, ValueError) as e:  # nested too deeply; a number of 5000 digits
        raise UserError(f"{path}: not valid JSON: {str(e) or 'nested too deeply'}") from None
