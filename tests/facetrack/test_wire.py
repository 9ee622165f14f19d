import numpy as np
import pytest

from roboscale.facetrack import wire
from roboscale.facetrack.geometry import Rect
from roboscale.facetrack.messages import CameraCommand, DetectionResult, Frame
from roboscale.facetrack.records import Handled


def test_frame_round_trip() -> None:
    image = np.arange(240 * 320, dtype=np.uint32).astype(np.uint8).reshape(240, 320)
    frame = Frame(7, 123456789, image, Rect(1.5, 2, 60, 61))
    back = wire.decode_frame(wire.encode_frame(frame))
    assert (back.id, back.capture_ns, back.truth) == (7, 123456789, Rect(1.5, 2, 60, 61))
    assert (back.image == image).all()
    none = wire.decode_frame(wire.encode_frame(Frame(8, 1, image, None)))
    assert none.truth is None


def test_result_and_command_round_trip() -> None:
    result = DetectionResult(3, 10, 42, Rect(10, 20, 50, 50), 11, 12)
    assert wire.decode_result(wire.encode_result(result)) == result
    empty = DetectionResult(4, 10, 0, None, 11, 12)
    assert wire.decode_result(wire.encode_result(empty)) == empty
    command = CameraCommand(5, 10, 20, -40.0, 12.0)
    assert wire.decode_command(wire.encode_command(command)) == command


def test_handled_round_trip() -> None:
    handled = Handled(7, 3, 100, 120, Rect(10, 20, 50, 50), Rect(12, 18, 52, 49), 90, 95)
    assert wire.decode_handled(wire.encode_handled(handled)) == handled
    nothing = Handled(8, 0, 100, 120, None, None, 90, 95)
    assert wire.decode_handled(wire.encode_handled(nothing)) == nothing
    with pytest.raises(wire.WireError):
        wire.decode_handled(wire.encode_handled(handled)[:-1])


@pytest.mark.parametrize(
    "data",
    [b"", b"FT", b"XX\x01\x02" + bytes(60), b"FT\x09\x02" + bytes(60), b"FT\x01\x07" + bytes(60)],
)
def test_malformed_messages_raise_wire_error(data: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode_result(data)


def test_wrong_kind_or_length_raises() -> None:
    command = wire.encode_command(CameraCommand(5, 10, 20, 0.0, 0.0))
    with pytest.raises(wire.WireError, match="kind"):
        wire.decode_result(command)
    with pytest.raises(wire.WireError):
        wire.decode_command(command + b"x")
    frame = wire.encode_frame(Frame(1, 1, np.zeros((4, 4), np.uint8), None))
    with pytest.raises(wire.WireError, match="bytes"):
        wire.decode_frame(frame[:-1])
