"""The SaveTime text of a counter row checked against its SaveTimeUTC in bytes, a file or a group of
files at a time (the pass's stand-in for the suite's rule save_time_matches_utc)."""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

# SaveTime as delivered: "2024/05/24 星期五 00:00:01.005" (docs/formats/zhejiang.md), 33 bytes of
# UTF-8: the date, a three-character weekday, the China time of day. Read in place as one record
# per row of little-endian words: the date, its last two digits with the space and the weekday's
# first UTF-8 lead byte, the two other lead bytes (three 3-byte characters: the rule's 16th
# character is then byte 21), the space before the time, "hh:mm:ss" and ".fff".
SAVE_TIME_BYTES = 33
SAVE_TIME_RECORD = np.dtype({
    "names": ["date", "date_end", "lead2", "lead3", "space", "hms", "fraction"],
    "formats": ["<u8", "<u4", "u1", "u1", "u1", "<u8", "<u4"],
    "offsets": [0, 8, 14, 17, 20, 21, 29], "itemsize": SAVE_TIME_BYTES})
LEAD_MASK = 0xF0  # a 3-byte UTF-8 character's lead byte is 0xE_
CST_MS = 8 * 3_600_000
DAY_MS = 86_400_000


@functools.cache
def _time_words() -> tuple[np.ndarray, np.ndarray]:
    """("hh:mm:ss" of each second of a day, ".fff" of each millisecond) as SAVE_TIME_RECORD's words."""
    def text(values: np.ndarray, width: int) -> np.ndarray:  # the values' digits as bytes, one row each
        return np.stack([values // 10 ** k % 10 + ord("0") for k in range(width - 1, -1, -1)], axis=1)

    second, milli = np.arange(86_400), np.arange(1000)
    colon, dot = np.full((86_400, 1), ord(":")), np.full((1000, 1), ord("."))
    hms = np.hstack([text(second // 3600, 2), colon, text(second // 60 % 60, 2), colon, text(second % 60, 2)])
    fraction = np.hstack([dot, text(milli, 3)])
    return hms.astype(np.uint8).view("<u8")[:, 0], fraction.astype(np.uint8).view("<u4")[:, 0]


def save_time_unproven(text: pa.ChunkedArray | pa.Array, ms: np.ndarray) -> np.ndarray:
    """Per row, false where the SaveTime text is shown to name the instant SaveTimeUTC + 8 h, read
    as the suite's rule save_time_matches_utc reads it (the date, then the text from its 16th
    character); true where it may not (another layout: every row of the file). Each row's bytes
    are compared as words with the text its instant gives (its day's date, one per hour folder,
    and the time of day looked up): about 0.1 ms a file, where the gate's query casts a full
    hour's 11 M strings (0.9-1.0 s) to find nothing."""
    n = len(ms)
    column = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    if n == 0 or column.type != pa.string() or column.null_count:
        return np.ones(n, bool)
    _, offsets, data = column.buffers()
    ends = np.frombuffer(offsets, np.int32, n + 1, column.offset * 4)
    if np.any(np.diff(ends) != SAVE_TIME_BYTES):
        return np.ones(n, bool)
    rows = np.frombuffer(data, SAVE_TIME_RECORD, n, int(ends[0]))
    cst = ms + CST_MS
    days = cst // DAY_MS
    of_day = cst - days * DAY_MS
    seconds = of_day // 1000
    hms, fraction = _time_words()
    shown = ((rows["hms"] == hms[seconds]) & (rows["fraction"] == fraction[of_day - seconds * 1000])
             & (rows["space"] == ord(" ")) & (rows["lead2"] & LEAD_MASK == 0xE0) & (rows["lead3"] & LEAD_MASK == 0xE0))
    date_end = rows["date_end"] & np.uint32(0xF0FF_FFFF)  # the lead byte's high nibble
    for day in (days[:1] if days.min() == days.max() else np.unique(days)):
        date = str(np.datetime64(int(day), "D")).replace("-", "/").encode() + b" \xe0"
        shown &= (days != day) | ((rows["date"] == np.frombuffer(date[:8], "<u8")[0])
                                  & (date_end == np.frombuffer(date[8:], "<u4")[0]))
    return ~shown


def save_time_unproven_files(text: pa.ChunkedArray | pa.Array, ms: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """save_time_unproven of several files' rows one after another (`counts` each), each file as
    if alone: a file of another layout leaves only its own rows unproven."""
    column = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    if column.type == pa.string() and not column.null_count:
        ends = np.frombuffer(column.buffers()[1], np.int32, len(column) + 1, column.offset * 4)
        if np.all(np.diff(ends) == SAVE_TIME_BYTES):
            return save_time_unproven(column, ms)
    edges = np.concatenate([[0], np.cumsum(counts)])
    return np.concatenate([save_time_unproven(column.slice(a, b - a), ms[a:b]) for a, b in zip(edges[:-1], edges[1:])]
                          + [np.zeros(0, bool)])
