"""Table schemas as data: one YAML per table in schemas/, the single source of truth.

A schema file gives the table's layer, columns (type, nullability, unit, description, source
column), keys and partitioning, and for bronze tables the raw file's header. Readers build their
parse plan from it, the writer its MERGE keys, and `tracelake describe` its documentation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tracelake.errors import TracelakeError
from tracelake.resources import resource_dir

if TYPE_CHECKING:
    from pyspark.sql import types as T

# the column types a schema may give; their Spark types are made on first use (spark_types), so
# reading a schema (`describe`, the command line) imports no pyspark
TYPE_NAMES = ("string", "int", "bigint", "double", "boolean", "timestamp", "date", "array<string>")


@cache
def spark_types() -> dict[str, T.DataType]:
    from pyspark.sql import types as T

    return {
        "string": T.StringType(),
        "int": T.IntegerType(),
        "bigint": T.LongType(),
        "double": T.DoubleType(),
        "boolean": T.BooleanType(),
        "timestamp": T.TimestampType(),
        "date": T.DateType(),
        "array<string>": T.ArrayType(T.StringType()),
    }


LAYERS = ("bronze", "silver", "gold", "quarantine", "ops")
COLUMN_KEYS = {"name", "type", "nullable", "unit", "description", "source", "format", "null_values", "non_finite",
               "formerly"}
TABLE_KEYS = {"table", "layer", "description", "keys", "partition_by", "columns", "raw", "lineage"}
LINEAGE_FILE = "_lineage.yaml"
# the names of the columns a run stages beside a table's own (a parse's problems and verdicts, a
# pass's proofs): staged files can be a table's data files, read by its schema, so no schema may
# name a column so, and such a column can never be read as a table's value
RESERVED_PREFIX = "_tl_"
TABLE_NAME = re.compile(r"([a-z]+)\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    description: str
    unit: str | None = None
    source: str | None = None  # raw column it is parsed from; None = derived or added by the reader
    format: str | None = None  # e.g. a timestamp pattern
    null_values: tuple[str, ...] = ()  # raw spellings of "no value" besides the empty field
    non_finite: bool = False  # a float column that may hold NaN/±Infinity (else such a value is a parse problem)
    formerly: tuple[str, ...] = ()  # its names in lakes written by earlier releases (delta/migrate.py renames them)

    @property
    def spark_type(self) -> T.DataType:
        return spark_types()[self.type]

    @property
    def comment(self) -> str:
        """The Delta column comment: the description, and the unit where there is one, so that
        readers outside tracelake (deltalake, Polars, a catalog explorer) see both."""
        return f"{self.description} [unit: {self.unit}]" if self.unit else self.description


@dataclass(frozen=True)
class TableSchema:
    layer: str
    table: str
    description: str
    columns: tuple[Column, ...]
    keys: tuple[str, ...]
    partition_by: tuple[str, ...]
    raw_header: tuple[str, ...]  # exact header of the raw file, bronze only
    delimiter: str
    has_lineage: bool

    @property
    def full_name(self) -> str:
        return f"{self.layer}.{self.table}"

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def data_columns(self) -> list[Column]:
        """Columns other than lineage: what a MERGE compares to decide a row changed."""
        lineage = {c.name for c in lineage_columns()} if self.has_lineage else set()
        return [c for c in self.columns if c.name not in lineage]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    def spark_schema(self) -> T.StructType:
        from pyspark.sql import types as T

        return T.StructType(
            [T.StructField(c.name, c.spark_type, c.nullable) for c in self.columns]
        )

    def arrow_schema(self):
        """The columns as Arrow fields, each with its Delta column comment (`comment` metadata):
        what a table created by the `deltalake` package stores."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        return pa.schema([pa.field(c.name, to_arrow_type(c.spark_type), c.nullable, metadata={"comment": c.comment})
                          for c in self.columns])

    def ddl(self) -> str:
        return ", ".join(f"`{c.name}` {c.type.upper()}" for c in self.columns)


def _column(raw: dict[str, Any], where: str) -> Column:
    unknown = set(raw) - COLUMN_KEYS
    if unknown:
        raise TracelakeError(f"{where}: unknown column keys {sorted(unknown)}")
    for required in ("name", "type", "description"):
        if required not in raw:
            raise TracelakeError(f"{where}: column needs '{required}'")
    if raw["type"] not in TYPE_NAMES:
        raise TracelakeError(f"{where}: column {raw['name']}: unknown type {raw['type']!r}")
    return Column(
        name=raw["name"],
        type=raw["type"],
        nullable=bool(raw.get("nullable", True)),
        description=str(raw["description"]).strip(),
        unit=raw.get("unit"),
        source=raw.get("source"),
        format=raw.get("format"),
        null_values=tuple(str(v) for v in raw.get("null_values") or ()),
        non_finite=bool(raw.get("non_finite", False)),
        formerly=_names(raw.get("formerly")),
    )


def _names(value: Any) -> tuple[str, ...]:
    """A name or a list of names, as a tuple."""
    if value is None:
        return ()
    return (str(value),) if isinstance(value, str) else tuple(str(v) for v in value)


@cache
def lineage_columns() -> tuple[Column, ...]:
    path = resource_dir("schemas") / LINEAGE_FILE
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tuple(_column(c, str(path)) for c in data["columns"])


def parse_schema(data: dict[str, Any], where: str) -> TableSchema:
    unknown = set(data) - TABLE_KEYS
    if unknown:
        raise TracelakeError(f"{where}: unknown keys {sorted(unknown)}")
    layer = data.get("layer")
    if layer not in LAYERS:
        raise TracelakeError(f"{where}: layer must be one of {LAYERS}, got {layer!r}")
    columns = [_column(c, where) for c in data.get("columns") or []]
    has_lineage = bool(data.get("lineage", layer == "bronze"))
    if has_lineage:
        columns += list(lineage_columns())
    names = [c.name for c in columns]
    reserved = [n for n in names if n.startswith(RESERVED_PREFIX)]
    if reserved:
        raise TracelakeError(f"{where}: column {reserved[0]}: names starting with {RESERVED_PREFIX} are the run's "
                             "own staged columns, never a table's")
    if len(set(names)) != len(names):
        raise TracelakeError(f"{where}: duplicate column names")
    reused = sorted({old for c in columns for old in c.formerly} & set(names))
    if reused:  # a migration could not tell the old column from the new one
        raise TracelakeError(f"{where}: {', '.join(reused)} is a column's former name and another column's name")
    keys = tuple(data.get("keys") or ())
    partition_by = tuple(data.get("partition_by") or ())
    for col in keys + partition_by:
        if col not in names:
            raise TracelakeError(f"{where}: key/partition column '{col}' is not a column")
    raw = data.get("raw") or {}
    header = tuple(raw.get("header") or ())
    for col in columns:
        if col.source and col.source not in header:
            raise TracelakeError(f"{where}: column {col.name}: source '{col.source}' not in raw.header")
    return TableSchema(
        layer=layer,
        table=data["table"],
        description=str(data.get("description", "")).strip(),
        columns=tuple(columns),
        keys=keys,
        partition_by=partition_by,
        raw_header=header,
        delimiter=raw.get("delimiter", ","),
        has_lineage=has_lineage,
    )


def check_table_name(full_name: str) -> tuple[str, str]:
    """(layer, table) of `layer.table`; anything else is refused, as the name becomes a path
    under schemas/ (`../conf/base` would read a file outside it)."""
    match = TABLE_NAME.fullmatch(full_name)
    if not match or match.group(1) not in LAYERS:
        raise TracelakeError(f"table name must be <layer>.<table> with layer one of {', '.join(LAYERS)} "
                             f"and table a plain name (letters, digits, _), got {full_name!r}")
    return match.group(1), match.group(2)


@cache
def load_schema(full_name: str, schema_dir: Path | None = None) -> TableSchema:
    """Load `layer.table` from schemas/<layer>.<table>.yaml."""
    check_table_name(full_name)
    directory = schema_dir or resource_dir("schemas")
    path = directory / f"{full_name}.yaml"
    if not path.exists():
        known = ", ".join(all_table_names(directory))
        raise TracelakeError(f"no schema for table '{full_name}' (known: {known})")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    schema = parse_schema(data, str(path))
    if schema.full_name != full_name:
        raise TracelakeError(f"{path}: declares {schema.full_name}, file name says {full_name}")
    return schema


def all_table_names(schema_dir: Path | None = None) -> list[str]:
    directory = schema_dir or resource_dir("schemas")
    return sorted(p.stem for p in directory.glob("*.yaml") if not p.name.startswith("_"))


def describe_markdown(schema: TableSchema) -> str:
    """Human documentation of a table, generated from its schema file."""
    lines = [f"# {schema.full_name}", "", schema.description, ""]
    if schema.keys:
        lines.append(f"Keys: {', '.join(schema.keys)}")
    if schema.partition_by:
        lines.append(f"Partitioned by: {', '.join(schema.partition_by)}")
    if schema.raw_header:
        lines.append(f"Raw header: {schema.delimiter.join(schema.raw_header)}")
    lines += ["", "| column | type | nullable | unit | source | description |", "|---|---|---|---|---|---|"]
    for c in schema.columns:
        lines.append(
            f"| {c.name} | {c.type} | {'yes' if c.nullable else 'no'} | {c.unit or ''} "
            f"| {c.source or ''} | {c.description} |"
        )
    return "\n".join(lines) + "\n"


def table_schema(full_name: str) -> TableSchema:
    """Any lake table's schema, the generated quarantine ones included (they have no file)."""
    layer, table = check_table_name(full_name)
    if layer != "quarantine":
        return load_schema(full_name)
    bronze = f"bronze.{table}"
    if bronze not in all_table_names():
        known = ", ".join(f"quarantine.{n.split('.', 1)[1]}" for n in all_table_names() if n.startswith("bronze."))
        raise TracelakeError(f"no table '{full_name}': each bronze table has one quarantine table (known: {known})")
    return quarantine_of(load_schema(bronze))


def quarantine_of(schema: TableSchema) -> TableSchema:
    """The quarantine table of a bronze table: its partition columns, then the common layout."""
    return quarantine_schema(schema.table, tuple(c for c in schema.columns if c.name in schema.partition_by))


@cache
def quarantine_schema(table: str, partition_columns: tuple[Column, ...] = ()) -> TableSchema:
    """Every quarantine table has one layout (schemas/_quarantine.yaml): quarantine.<table>.
    A time-partitioned table's quarantine is partitioned the same way (its partition columns
    come first), so re-ingesting a partition replaces only that partition's set-aside rows."""
    path = resource_dir("schemas") / "_quarantine.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    extra = [{"name": c.name, "type": c.type, "nullable": c.nullable, "description": c.description}
             for c in partition_columns]
    return parse_schema(
        {"table": table, "layer": "quarantine", "lineage": False, "columns": extra + data["columns"],
         "partition_by": [c.name for c in partition_columns],
         "description": f"Rows of {table} set aside by parsing or the quality gate."},
        str(path),
    )
