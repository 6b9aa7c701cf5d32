"""Summaries of kernel values (nbagent.notebook.value_summary): what the model reads of a variable, never a user repr."""

from __future__ import annotations

import collections
import datetime
import importlib.util
from typing import Any

import pytest

from nbagent.notebook.value_summary import details, summary


class Hostile:
    """A value whose repr and str would sleep 10 s and raise; they must never be called."""

    called: list[str] = []

    def __repr__(self) -> str:
        Hostile.called.append("repr")
        import time

        time.sleep(10)
        raise RuntimeError("repr called")

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        Hostile.called.append("format")
        raise RuntimeError("format called")

    def __len__(self) -> int:
        Hostile.called.append("len")
        raise RuntimeError("len called")


class HostileDict(dict):  # type: ignore[type-arg]
    """A dict subclass: its len and repr are user code, so only its type shows."""

    def __len__(self) -> int:
        Hostile.called.append("len")
        raise RuntimeError("len called")


class HostileMeta(type):
    """A metaclass whose == and hash are user code: classes are compared by identity."""

    def __eq__(cls, other: object) -> bool:
        Hostile.called.append("eq")
        raise RuntimeError("eq called")

    def __hash__(cls) -> int:
        Hostile.called.append("hash")
        raise RuntimeError("hash called")


class WithMeta(metaclass=HostileMeta):
    pass


@pytest.fixture(autouse=True)
def _no_user_code() -> Any:
    Hostile.called.clear()
    yield
    assert Hostile.called == [], "a user __repr__/__str__/__len__ was called"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "None"),
        (True, "bool True"),
        (42, "int 42"),
        (2**300, "int, 301 bits"),
        (1.5, "float 1.5"),
        (float("nan"), "float nan"),
        (1 + 2j, "complex (1+2j)"),
        ("hello", "str 'hello'"),
        ("x" * 81, "str, 81 chars"),
        ("a\nb", "str 'a\\nb'"),
        (b"abc", "bytes, 3 bytes"),
        (bytearray(10), "bytearray, 10 bytes"),
        ([1, 2, 3], "list, 3 items of int"),
        ([1, "a"], "list, 2 items"),
        ((1,), "tuple, 1 item of int"),
        ({"a": 1, "b": 2}, "dict, 2 items: keys 'a', 'b'"),
        (dict.fromkeys(range(7)), "dict, 7 items: keys 0, 1, 2, 3, 4, …"),
        ({1, 2}, "set, 2 items"),
        (collections.Counter("aab"), "collections.Counter, 2 items: keys 'a', 'b'"),
        (range(0, 10, 2), "range(0, 10, 2)"),
        (len, "function len"),
        (summary, "function summary"),
        (Hostile, "class Hostile"),
        (Hostile(), "tests.notebook.test_value_summary.Hostile"),
        (HostileDict(a=1), "tests.notebook.test_value_summary.HostileDict"),
        ({Hostile(): 1}, "dict, 1 item: keys <tests.notebook.test_value_summary.Hostile>"),
        ([Hostile()], "list, 1 item of tests.notebook.test_value_summary.Hostile"),
        (datetime.date(2024, 5, 1), "datetime.date datetime.date(2024, 5, 1)"),
        (collections, "module collections"),
        (WithMeta(), "tests.notebook.test_value_summary.WithMeta"),
    ],
)
def test_summary_of_builtin_values(value: object, expected: str) -> None:
    assert summary(value) == expected


def test_summary_is_one_bounded_line() -> None:
    wide = {f"key_{i}_" + "x" * 50: i for i in range(100)}
    for value in (wide, "y" * 10**6, list(range(10**5))):
        text = summary(value, limit=60)
        assert len(text) <= 60 and "\n" not in text


def test_hostile_object_details_show_attributes_not_repr() -> None:
    h = Hostile()
    h.rows = 3  # type: ignore[attr-defined]
    h.inner = Hostile()  # type: ignore[attr-defined]
    text = details(h)
    assert "rows: int 3" in text and "inner: tests.notebook.test_value_summary.Hostile" in text
    assert details([Hostile(), 1]).splitlines()[1:] == ["  [0] tests.notebook.test_value_summary.Hostile", "  [1] 1"]


numpy_missing = importlib.util.find_spec("numpy") is None
pandas_missing = importlib.util.find_spec("pandas") is None


@pytest.mark.skipif(numpy_missing, reason="numpy is not installed (not in the test extra)")
def test_numpy() -> None:
    import numpy as np

    big = np.zeros(10_000_000)
    assert summary(big) == "numpy.ndarray, shape (10,000,000,), dtype float64"
    assert summary(np.zeros((2, 3), dtype=np.int32)) == "numpy.ndarray, shape (2, 3), dtype int32"
    assert summary(np.float64(2.5)) == "numpy.float64 2.5"
    assert summary(np.datetime64("2024-05-01")) == "numpy.datetime64 2024-05-01"
    text = details(np.arange(30))
    assert "min 0  max 29  mean 14.5" in text and "first 20 values (flattened): 0, 1, 2" in text
    objects = np.array([Hostile(), 1], dtype=object)
    assert summary(objects) == "numpy.ndarray, shape (2,), dtype object"
    assert f"{__name__}.Hosti" in details(objects) and details(objects).endswith(", 1")  # the type's name (clipped), no repr


@pytest.mark.skipif(pandas_missing, reason="pandas is not installed (not in the test extra)")
def test_pandas_dataframe_summary_reads_metadata_only() -> None:
    import numpy as np
    import pandas as pd

    n = 1_000_000
    df = pd.DataFrame({"a": np.arange(n), "b": np.zeros(n), "when": pd.Timestamp("2024-01-01")})
    describe, memory = pd.DataFrame.describe, pd.DataFrame.memory_usage
    calls: list[str] = []

    class Watched(pd.DataFrame):
        """A DataFrame that records the whole-data methods a summary must not call."""

        def describe(self, *a: Any, **k: Any) -> Any:
            calls.append("describe")
            return describe(self, *a, **k)

        def memory_usage(self, *a: Any, **k: Any) -> Any:
            calls.append("memory_usage")
            return memory(self, *a, **k)

        def __repr__(self) -> str:
            calls.append("repr")
            return ""

    text = summary(Watched(df))
    assert calls == []
    assert text.endswith("1,000,000 rows × 3 columns: 'a' int64, 'b' float64, 'when' datetime64[us]")
    assert summary(df) == "pandas.DataFrame, 1,000,000 rows × 3 columns: 'a' int64, 'b' float64, 'when' datetime64[us]"
    assert summary(df["a"]) == "pandas.Series 'a', 1,000,000 rows, dtype int64"
    wide = pd.DataFrame(np.zeros((2, 500)))
    assert summary(wide).endswith("19 float64, +480 more")


@pytest.mark.skipif(pandas_missing, reason="pandas is not installed (not in the test extra)")
def test_pandas_details() -> None:
    import numpy as np
    import pandas as pd

    df = pd.DataFrame({"x": [1.0, np.nan, 3.0], "obj": [Hostile(), "s", None]}, index=[Hostile(), "i", 2])
    text = details(df)
    assert "'x'  float64  1" in text and "'obj'  object  1" in text  # dtypes and null counts
    assert "describe():" in text and "mean" in text
    assert "first 5 rows:" in text and f"{__name__}.Ho" in text  # the type's name (clipped to the column), never a repr
    assert len(details(pd.DataFrame(np.zeros((1000, 300))), limit=4000)) <= 4000
    assert "describe():" in details(df["x"])


def test_polars() -> None:
    import polars as pl

    df = pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    assert summary(df) == "polars.DataFrame, 3 rows × 2 columns: 'a' Int64, 'b' String"
    assert summary(df["a"]) == "polars.Series 'a', 3 rows, dtype Int64"
    assert "first 5 rows" in details(df)
