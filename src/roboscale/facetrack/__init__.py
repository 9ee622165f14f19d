"""The face tracker of the Erlang paper (seed 004), built once and run on several stacks.

    camera --frame--> dispatcher --> N detector workers --result--> aggregator --> controller
       ^                                                                              |
       +------------------------------- camera command -------------------------------+

Modules (OpenCV and scikit-image are the `facetrack` extra, imported lazily by `scene`
and `detector` only; everything else is stdlib, so rospy nodes and Erlang port programs
in Debian's system Python can import it):

- `geometry`: `Rect`, `jaccard` (true rectangle IoU), `mean_rect`, `tracking_error`.
- `trajectory`: the seeded face path (smooth moves, jumps, holds, away) and the `Viewport`.
- `scene`: `Scene`, the simulated pan-tilt camera with exact ground truth (`Frame`).
- `detector`: `FaceDetector`, the Haar frontal-face cascade with the paper's parameters.
- `aggregator`: `Aggregator`, the deque of recent faces, averaged.
- `controller`: `Controller`, pan/tilt past the deadband (80 px at 640x480, scaled).
- `dispatch`: `Dispatcher`: random (the paper's), round_robin, least_loaded.
- `messages` + `wire`: `Frame`, `DetectionResult`, `CameraCommand` and their versioned
  binary encoding (struct header + raw pixels, no pickle), the bytes every stack carries.
- `config`: `TrackerConfig` and `KillPlan`, typed and versioned; `ConfigError` names the field.
- `pipeline`: `CameraRole`, `WorkerRole`, `TrackerRole`: the roles every stack runs.
- `records`: `FrameRecord`, `KillRecord`, `ProcessUsage`, `TrackerRun`, `assemble`,
  `summarize`: what every stack returns, computed by one piece of code.
- `usage`: CPU, RSS and PSS of a process from /proc.
- `stack`: the `Stack` / `RunningTracker` protocol and the registry (`get_stack`,
  `run_tracker`, `pick_victims`).
- `stacks/`: the implementations (`runtime`, `runtime-proc`; `ros1` and `erlang`).
"""
