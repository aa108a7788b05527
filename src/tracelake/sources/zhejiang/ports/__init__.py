"""The per-port counters, a room of their own: trafficinfo/<hour>/<switch folder>/<port file>.csv
into bronze.zj_port_counters, and from the same pass silver.zj_port_rates.

  tables.py     the table plan: the port files' input and the rates' derived table
  files.py      which files are port files (the naming rules of layout.py)
  parser.py     the parser: the one pass over the hour's files, or the exact line-by-line parse
  filepass.py   the pass over one file: read, checked, typed and rated in Arrow
  grouppass.py  the pass over a group of files at once (filepass's rows, one set of numpy operations)
  rules.py      the rate rules as data: statuses, thresholds, line rates (read by both below)
  arrays.py     the rate rules over numpy arrays (the pass's), and the rate columns it hands over
  window.py     the rate rules as Spark windows (the reference, and the rebuild's), the carried state
  carry.py      the carried state an hour's pass leaves for the next hour
  rebuild.py    silver.zj_port_rates's partial rebuild from the pass's staged rows

Nothing is imported here: the engine's tasks import the pass's modules alone.
"""

TABLE = "bronze.zj_port_counters"
RATES_TABLE = "silver.zj_port_rates"
