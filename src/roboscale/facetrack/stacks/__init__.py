"""Face-tracker stacks, registered by name in `facetrack.stack.STACKS`."""
