"""The rate rules of the per-port counters, as data: byte rates and utilisation per counter row
(docs/formats/zhejiang.md §3.3). window.py applies them as Spark windows (the reference, and the
rates' rebuild), arrays.py over numpy arrays (the one pass); both take every threshold from here.

Each counter row holds the bytes counted since the switch last *refreshed* its counter, which
happens about once a second while the collector polls every ~0.5 s. So a row of four zeros
usually means "no refresh since the last poll", not "no traffic": the bytes of that time arrive
in the next non-zero row. (On the release, the bytes summed over the five minutes after the
collector outage match the outage row's 253 s average, median ratio 1.009: nothing is lost.)

Rules, per port, in time order (by save_time_utc, then hour_cst):
  first        the port's first row: no interval start is known, no rate.
  repeated     the instant of the row before it: the same poll delivered again by a later hour
               folder (the earlier folder's copy sorts first and keeps the rate), so its bytes
               are not counted twice; no rate.
  gap          more than `max_gap_s` since the previous row (collector outage, missing rows):
               no rate, flagged; the counts are kept, so volumes still add up.
  update       a non-zero row: its bytes cover (last non-zero row, this row], the zero rows
               in between included (the carry), even when a poll gap (< max_gap_s) follows
               them. If those zero rows had turned idle (below), the port was really idle and
               the interval is (previous row, this row].
  no_new_data  a zero row within `max_gap_s` of the last update: the counter had not refreshed,
               its bytes are in the next update; no rate (never reported as idle).
  idle         a zero row more than `max_gap_s` after the last update (or the port's first
               row): refreshes kept reading zero, the rate is 0.
  over_line_rate  an update whose rate would exceed the line rate by more than `max_util`:
               rate withheld, flagged (none on the release).
  negative_counter  a negative count on a 64-bit port (200G/400G): not a wrap, so no rate and
               flagged; its counts stay as delivered.
Management-port counters are 32-bit: a negative delta there has wrapped and gets 2^32 added. Only
there: adding 2^32 to a 64-bit port's negative count would fabricate a rate.
Measured on the 350 real files: 894,805 updates, 704,499 zero rows waiting for one, no rate
above 0.998 of line rate. The zero/non-zero pattern fits a switch refresh clock of ~1.000 s, so
a row's true interval is known only to about a poll (0.5 s) at either end: per-row rates in a
10 s window scatter with a coefficient of variation of 0.44, and sums of octets over windows of
2 s or more are the accurate figure.
Line rates come from the port name: TwoHundredGigE 200 Gb/s, FourHundredGigE 400 Gb/s,
M-GigabitEthernet (management) 1 Gb/s.
"""

from __future__ import annotations

from tracelake.sources.zhejiang.layout import MGMT_PORT

WRAP = 1 << 32
MAX_GAP_S = 5.0  # Δt p99.9 on the release is 4.2 s; refreshes come about every second
MAX_UTIL = 1.05
LINE_RATES_BPS = (("TwoHundredGigE", 200_000_000_000), ("FourHundredGigE", 400_000_000_000),
                  ("M-GigabitEthernet", 1_000_000_000))
COUNTERS = ("in_pkts", "in_octets", "out_pkts", "out_octets")
STATUSES = ("first", "repeated", "gap", "update", "no_new_data", "idle", "over_line_rate", "negative_counter")
FIRST, REPEATED, GAP, UPDATE, NO_NEW_DATA, IDLE, OVER_LINE_RATE, NEGATIVE = range(len(STATUSES))


def line_rate_of(port: str) -> int | None:
    """Bits per second of a port from its name; None for a name this release does not use."""
    return next((bps for prefix, bps in LINE_RATES_BPS if port.startswith(prefix)), None)


def is_32bit(port: str) -> bool:
    """Whether the port's counters are 32-bit (the management port's only): a negative delta wrapped."""
    return port == MGMT_PORT
