"""Summaries of kernel values (nbagent.notebook.value_summary): what the model reads of a variable, never a user repr."""

from __future__ import annotations

import collections
import datetime
import importlib.util
import re
from typing import Any

import pytest

from nbagent.notebook.secret_names import secret_label
from nbagent.notebook.value_details import SAMPLE, details
from nbagent.notebook.value_summary import summary


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
        (HostileDict(a=1), "tests.notebook.test_value_summary.HostileDict (a dict subclass: not read)"),
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
        """A DataFrame subclass whose methods record being called: a summary names it and reads nothing of it."""

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
    assert text == f"{__name__}.test_pandas_dataframe_summary_reads_metadata_only.<locals>.Watched (a pandas.DataFrame subclass: not read)"
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


# Issue 33, item 3: values under secret-looking names inside a value -------------------------------------------------
class Conn:
    def __init__(self) -> None:
        self.host = "db.internal"
        self.password = "hunter2-conn"
        self.api_token = ["hunter2-listed"]


@pytest.mark.parametrize(
    ("label", "secret"),
    [
        ("db_password", True),
        ("API_TOKEN", True),
        ("auth", True),
        ("author", False),
        ("tokenizer", False),
        ("host", False),
        (("creds", "password"), True),
        (("a", "b"), False),
        (7, False),
        (b"password", False),  # only str labels are names
    ],
)
def test_secret_label(label: object, secret: bool) -> None:
    assert secret_label(label) is secret


@pytest.mark.parametrize(
    ("value", "shown", "hidden"),
    [
        (
            {"host": "db.internal", "db_password": "hunter2-cfg"},
            ["'host': str 'db.internal'", "'db_password': (value hidden)"],
            ["hunter2"],
        ),
        ({("db", "password"): "hunter2-tuple", "n": 1}, ["(value hidden)", "'n': int 1"], ["hunter2"]),
        (collections.OrderedDict(token="hunter2-ordered"), ["'token': (value hidden)"], ["hunter2"]),
        (Conn(), ["host: str 'db.internal'", "password: (value hidden)", "api_token: (value hidden)"], ["hunter2"]),
    ],
)
def test_details_hide_values_under_secret_names(value: object, shown: list[str], hidden: list[str]) -> None:
    text = details(value)
    assert all(s in text for s in shown), text
    assert not any(h in text for h in hidden), text


@pytest.mark.skipif(pandas_missing, reason="pandas is not installed (not in the test extra)")
def test_details_hide_secret_columns() -> None:
    import pandas as pd

    users = pd.DataFrame({"name": ["ann"], "password": ["hunter2-a"], "api_token": ["hunter2-b"], "pin": [1234567]})
    text = details(users)
    assert "ann  1234567" in text and "mean   1234567.0" in text  # the other columns: rows and describe()
    assert re.search(r"^'password'  (str|object)  0  \(value hidden\)$", text, re.MULTILINE)  # dtype and nulls still shown
    assert "values of 'password', 'api_token' hidden" in text and "hunter2" not in text
    assert "values of 'password' hidden" in details(users["password"]) and "hunter2" not in details(users["password"])
    only = details(users[["password"]])
    assert "first 5 rows" not in only and "hunter2" not in only
    wide = pd.DataFrame({("login", "password"): ["hunter2-multi"], ("login", "user"): ["ann"]})
    assert "hunter2" not in details(wide) and "ann" in details(wide)


def test_polars_hides_secret_columns() -> None:
    import polars as pl

    df = pl.DataFrame({"name": ["ann"], "api_key": ["hunter2-pl"]})
    assert "ann" in details(df) and "hunter2" not in details(df) and "values of 'api_key' hidden" in details(df)
    assert "hunter2" not in details(df["api_key"])


# Issue 33, item 11: a user subclass of a known type is named, not read ------------------------------------------------
class HostileList(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        Hostile.called.append("list len")
        return 0

    def __iter__(self) -> Any:
        Hostile.called.append("list iter")
        return iter(())


class HostileCounter(collections.Counter):  # type: ignore[type-arg]
    def __len__(self) -> int:
        Hostile.called.append("counter len")
        return 0

    def __iter__(self) -> Any:
        Hostile.called.append("counter iter")
        return iter(())


class LookAlike(dict):  # type: ignore[type-arg]
    """Borrows the module and name of a known class: it is still not that class."""

    __module__ = "collections"
    __qualname__ = "OrderedDict"

    def __len__(self) -> int:
        Hostile.called.append("look-alike len")
        return 0


class FakeDate:
    """Borrows datetime.date's module and name: its repr is user code."""

    __module__ = "datetime"
    __qualname__ = "date"

    def __repr__(self) -> str:
        Hostile.called.append("look-alike repr")
        return "date"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (HostileList([1, 2]), f"{__name__}.HostileList (a list subclass: not read)"),
        (HostileCounter("aab"), f"{__name__}.HostileCounter (a collections.Counter subclass: not read)"),
        (LookAlike(a=1), "collections.OrderedDict (a dict subclass: not read)"),
        (FakeDate(), "datetime.date"),
    ],
)
def test_subclasses_and_look_alikes_are_named_not_read(value: object, expected: str) -> None:
    assert summary(value) == expected
    assert details(value).startswith(expected)


@pytest.mark.skipif(pandas_missing, reason="pandas is not installed (not in the test extra)")
def test_library_subclasses_are_named_not_read() -> None:
    import numpy as np
    import pandas as pd

    class Frame(pd.DataFrame):
        @property
        def shape(self) -> Any:
            Hostile.called.append("frame shape")
            return (0, 0)

    class Array(np.ndarray):  # type: ignore[type-arg]
        @property
        def dtype(self) -> Any:  # type: ignore[override]
            Hostile.called.append("array dtype")
            return np.dtype("int8")

    frame = Frame({"a": [1]})
    array = np.zeros(3).view(Array)
    Hostile.called.clear()  # pandas itself reads the property while building the frame
    assert summary(frame).endswith("Frame (a pandas.DataFrame subclass: not read)")
    assert summary(array).endswith("Array (a numpy.ndarray subclass: not read)")
    assert "(a pandas.DataFrame subclass: not read)" in details(frame) and "not read" in details(array)
    assert summary(np.ma.masked_array([1, 2])) == "numpy.ma.MaskedArray, shape (2,), dtype int64"  # numpy's own


# Issue 33, item 6: an array's statistics over a bounded sample; a memory-mapped one not read --------------------------
@pytest.mark.skipif(numpy_missing, reason="numpy is not installed (not in the test extra)")
def test_large_array_statistics_are_over_a_stated_sample() -> None:
    import numpy as np

    assert "(over" not in details(np.arange(SAMPLE, dtype=float)) and "NaN: 0\n" in details(np.arange(SAMPLE, dtype=float))
    big = np.arange(10 * SAMPLE, dtype=float)
    text = details(big)
    assert f"min 0  max {10 * SAMPLE - 1:.6g}" in text and f"(over a sample of {SAMPLE:,} evenly spaced values of {10 * SAMPLE:,})" in text
    assert "NaN: 0 in the sample" in text
    strided = np.zeros((4 * SAMPLE, 4))[:, 1]  # not contiguous: sampled, never copied whole
    assert f"evenly spaced values of {4 * SAMPLE:,}" in details(strided)


@pytest.mark.skipif(numpy_missing, reason="numpy is not installed (not in the test extra)")
def test_memory_mapped_arrays_are_not_read(tmp_path: Any) -> None:
    import mmap

    import numpy as np

    path = tmp_path / "big.f64"
    with open(path, "wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GB that costs no disk
    mapped = np.memmap(path, dtype="float64", mode="r")
    with open(path, "rb") as handle:
        raw = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    for value in (
        mapped,
        mapped[10:],
        np.asarray(mapped)[::2],
        np.frombuffer(raw, dtype="float64"),
        np.frombuffer(memoryview(raw), dtype="u1"),
    ):
        text = details(value)
        assert "memory-mapped file: no values read and no statistics computed" in text, text
        assert "min " not in text and "first 20 values" not in text
    assert "min 0" in details(np.asarray(mapped)[:10].copy())  # a copy is in memory: read as usual
    del mapped
