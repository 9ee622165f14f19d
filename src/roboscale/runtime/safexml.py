"""XML read safely: the element tree (tag, attributes, line, text) of a roslaunch file.

expat with no DTD, no entity declaration and no external entity: a DOCTYPE is refused
before anything is expanded (no billion laughs, no XXE); a regular file of at most
MAX_BYTES; at most MAX_ELEMENTS elements, 64 deep. Every problem is a SpecError with the
file and line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.parsers import expat

from roboscale.errors import SpecError
from roboscale.yamlfile import read_text

MAX_BYTES = 1 << 20
MAX_ELEMENTS = 20_000


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    line: int
    children: list[Element] = field(default_factory=list)
    text: str = ""
    # Text as expat hands it over, in pieces, joined once at the element's end: a `+=`
    # per piece would copy the text again for each (quadratic on a long <rosparam>).
    pieces: list[str] = field(default_factory=list, repr=False, compare=False)


def parse_xml(path: Path) -> Element:
    """The element tree of a roslaunch file, parsed without DTDs or entities."""
    file = str(path)
    text = read_text(path, "roslaunch file", MAX_BYTES)
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[Element] = []
    roots: list[Element] = []
    count = [0]

    def refuse(what: str) -> Callable[..., None]:
        def handler(*_: Any) -> None:
            line = parser.CurrentLineNumber
            raise SpecError(file, line, "", f"{what} is not allowed in a launch file")

        return handler

    def start(tag: str, attrs: dict[str, str]) -> None:
        count[0] += 1
        if count[0] > MAX_ELEMENTS or len(stack) > 64:
            raise SpecError(file, parser.CurrentLineNumber, "", "too many or too deep elements")
        element = Element(tag, dict(attrs), parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)

    def end(_tag: str) -> None:
        element = stack.pop()
        element.text = "".join(element.pieces)
        element.pieces.clear()

    def chars(data: str) -> None:
        # The text is bounded by the file's MAX_BYTES (no entity expands it).
        if stack:
            stack[-1].pieces.append(data)

    parser.StartDoctypeDeclHandler = refuse("a DOCTYPE (DTD)")
    parser.EntityDeclHandler = refuse("an entity declaration")
    parser.ExternalEntityRefHandler = refuse("an external entity")  # type: ignore[assignment]
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(text, True)
    except expat.ExpatError as e:
        problem = expat.errors.messages[e.code]
        raise SpecError(file, e.lineno, "", f"not well-formed XML: {problem}") from None
    if not roots or roots[0].tag != "launch":
        raise SpecError(file, 1, "", "a roslaunch file has one <launch> element")
    return roots[0]
