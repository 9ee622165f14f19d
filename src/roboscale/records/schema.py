"""The record and results-folder contract shared by the lab, analysis and reports.

Results folder (FORMAT_VERSION 1):

    <run>/run.json                      format version, tool version, spec, host facts
    <run>/trials/<trial_id>/records.parquet   one row per measured message
    <run>/trials/<trial_id>/metadata.json     everything needed to rerun the trial
    <run>/summary.json                  one entry per finished trial + verdict thresholds
    <run>/report.html, <run>/summary.md rendered by `roboscale report`

Times are integer nanoseconds of CLOCK_MONOTONIC. A message never received has
`t_received` null; loss is counted from rows, never guessed.
"""

from __future__ import annotations

FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = frozenset({1})

RECORD_COLUMNS: tuple[str, ...] = (
    "trial",  # string: trial id
    "node",  # string: measuring node name, e.g. "sender_0"
    "host",  # string: emulated host name ("local" on one host)
    "seq",  # int64: message id within the stream, warm-up excluded, from 0
    "bytes",  # int64: payload size in bytes (nominal user payload)
    "t_intended",  # int64: the absolute deadline the pacer aimed for
    "t_sent",  # int64: when the publish call was made
    "t_echoed",  # int64 or null: when the echoer received it
    "t_received",  # int64 or null: when the echo came back to the sender
)

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
TRIALS_DIR = "trials"
RECORDS_FILE = "records.parquet"
METADATA_FILE = "metadata.json"
