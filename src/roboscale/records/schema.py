"""The record and results-folder contract shared by the lab, analysis and reports.

Results folder (FORMAT_VERSION 2; records/folder.py reads and writes it, records/models.py
says what each file holds):

    <run>/run.json                      format version, tool version, spec, host facts
    <run>/trials/<trial_id>/records.parquet   one row per measured message
    <run>/trials/<trial_id>/metadata.json     everything needed to rerun the trial
    <run>/summary.json                  one entry per finished trial + verdict thresholds
    <run>/report.html, <run>/summary.md rendered by `roboscale report`

Times are integer nanoseconds of CLOCK_MONOTONIC. A message never received has
`t_received` null; loss is counted from rows, never guessed.

One row per message per measuring node; what the columns mean by workload:

- echo: node = the sender; t_echoed = arrival at its echoer, t_received = the echo
  back at the sender (round trip = t_received - t_sent).
- fanout, ping: node = a listener (`listenerNN_tIIII`); t_intended and t_sent are the
  publisher's; t_echoed = arrival at that listener (one-way = t_echoed - t_sent);
  t_received = that listener's few-byte ack back at the publisher (ping-pong, `ack`),
  null without ack. A message is received when it reached every listener.
- chain: node = hop k (`hopNN_tIIII`, node k+1 of A -> B -> ...); t_echoed = arrival
  at hop k, so hop latency = t_echoed(k) - t_echoed(k-1) (t_sent before hop 1) and
  end-to-end = t_echoed(last hop) - t_sent; t_received = hop k's ack with `ack`.
  Node names sort in flow order.

One-way figures compare clocks of different nodes: exact on one machine and across
emulated hosts of one machine (one CLOCK_MONOTONIC), not across real machines.
"""

from __future__ import annotations

# The one place the format's version lives. 2 added run.packages and metadata.replayed;
# files of version 1 are read as they are, without them.
FORMAT_VERSION = 2
READABLE_VERSIONS = frozenset({1, 2})

RECORD_COLUMNS: tuple[str, ...] = (
    "trial",  # string: trial id
    "node",  # string: measuring node name: "sender_0_t0001", "listener01_t0001", "hop01_t0001"
    "host",  # string: emulated host name ("local" on one host)
    "seq",  # int64: message id within the stream, warm-up excluded, from 0
    "bytes",  # int64: payload size in bytes (nominal user payload)
    "t_intended",  # int64: the absolute deadline the pacer aimed for
    "t_sent",  # int64: when the publish call was made
    "t_echoed",  # int64 or null: when the echoer (listener, chain hop) received it
    "t_received",  # int64 or null: when the echo (or the ack) came back to the sender
)

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
TRIALS_DIR = "trials"
RECORDS_FILE = "records.parquet"
METADATA_FILE = "metadata.json"
REPORT_FILES = ("report.html", "summary.md")  # rendered by `roboscale report`
# What a run writes at the top of its folder: all that `bench --replace` removes (infra:
# the middleware services' logs, lab/envs.py; hosts: real machines' files, lab/remote.py).
RUN_OUTPUTS = frozenset({RUN_FILE, SUMMARY_FILE, TRIALS_DIR, *REPORT_FILES, "infra", "hosts"})
