from __future__ import annotations

import pytest

from roboscale.msgtypes import custom_type
from roboscale.spec.payloads import format_size, parse_payload, payload_kind


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text", ("text", 11)),
        ("laserscan", ("laserscan", 4250)),
        ("IMAGE", ("image", 307200)),
        (256, ("256B", 256)),
        ("256B", ("256B", 256)),
        ("4KB", ("4KB", 4096)),
        ("4 MiB", ("4MB", 4 * 1024 * 1024)),
        ("1.5KB", ("1536B", 1536)),
        # Types of the user's: named, sized by the spec loader once the types are loaded.
        ("robot_msgs/msg/WheelState", ("robot_msgs/msg/WheelState", 0)),
        ("robot_msgs/WheelState", ("robot_msgs/msg/WheelState", 0)),
        ("robot_msgs/WheelState@64KB", ("robot_msgs/msg/WheelState@64KB", 0)),
        ({"type": "robot_msgs/WheelState"}, ("robot_msgs/msg/WheelState", 0)),
        (
            {"type": "robot_msgs/msg/WheelState", "size": "1MB"},
            ("robot_msgs/msg/WheelState@1MB", 0),
        ),
        ({"type": "robot_msgs/msg/WheelState", "size": 100}, ("robot_msgs/msg/WheelState@100B", 0)),
    ],
)
def test_parse(value: object, expected: tuple[str, int]) -> None:
    assert parse_payload(value) == expected


@pytest.mark.parametrize(
    "value",
    [0, "0B", "5MB", "ten", True, 1.5, None, "Robot/Type", "robot_msgs/msg/WheelState@5MB",
     {"type": "robot_msgs/W", "bytes": 4}, {"size": 4}, {"type": "a/B", "size": "ten"}],
)  # fmt: skip
def test_rejects(value: object) -> None:
    with pytest.raises(ValueError):
        parse_payload(value)


def test_kind_and_format() -> None:
    assert payload_kind("laserscan") == "laserscan"
    assert payload_kind("4KB") == "bytes"
    assert payload_kind("robot_msgs/msg/WheelState@64KB") == "custom"
    assert custom_type("robot_msgs/msg/WheelState@64KB") == ("robot_msgs/msg/WheelState", 65536)
    assert format_size(1024 * 1024) == "1MB"
    assert format_size(1000) == "1000B"
