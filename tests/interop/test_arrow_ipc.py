"""Tensors between machines through Arrow IPC, with real pyarrow: a Tensor written as a column
(``pa.array(tensor)`` / ``pa.table({...})``) with pyarrow's IPC stream and file writers, read
back by pyarrow, and imported again with ``dlbridge.from_dlpack``.

Peer facts this file relies on (pyarrow 26): ``arrow.fixed_shape_tensor`` and ``arrow.bool8``
are canonical extension types pyarrow registers, so their metadata (shape, dim_names,
permutation) travels in the IPC schema and comes back as the extension type; reading a stream
from an in-memory buffer, or a file through ``pa.memory_map``, gives arrays whose buffers point
into that memory (no copy); ``read_all`` gives one chunk per record batch.
"""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

import dlbridge  # noqa: E402
from dlb_testing import assert_values_equal, make  # noqa: E402

# dtypes Arrow has a type for (bool travels as the arrow.bool8 extension)
DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64"]


def named_tensor(dim_names=("H", "W")) -> dlbridge.Tensor:
    """A (4, 2, 3) int32 Tensor with cell dim_names, made by importing a pyarrow column."""
    ty = pa.fixed_shape_tensor(pa.int32(), [2, 3], dim_names=list(dim_names))
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(24, dtype=np.int32)), 6)
    t = dlbridge.from_dlpack(pa.ExtensionArray.from_storage(ty, storage))
    assert t.dim_names == ("", *dim_names)
    return t


def write_stream(table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def write_file(table, path) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def inside(t, buf: pa.Buffer) -> bool:
    """Whether the tensor's elements lie in ``buf`` (a zero-copy import of what IPC read)."""
    return buf.address <= t.data_ptr and t.data_ptr + t.nbytes <= buf.address + buf.size


@pytest.mark.parametrize("dtype", DTYPES)
def test_nd_tensor_column_through_an_ipc_stream(dtype):
    ref = make(dtype, (5, 3, 4))
    buf = write_stream(pa.table({"x": dlbridge.from_dlpack(ref)}))
    col = pa.ipc.open_stream(buf).read_all().column("x")
    assert col.type.extension_name == "arrow.fixed_shape_tensor"
    t = dlbridge.from_dlpack(col)
    assert (t.shape, t.dtype.name, t.dim_names) == (ref.shape, dtype, None)
    assert_values_equal(np.from_dlpack(t), ref)
    assert t.readonly and not t.is_copied and inside(t, buf)


@pytest.mark.parametrize("dtype", DTYPES)
def test_1d_tensor_column_through_an_ipc_stream(dtype):
    ref = make(dtype, (17,))
    buf = write_stream(pa.table({"x": dlbridge.from_dlpack(ref)}))
    t = dlbridge.from_dlpack(pa.ipc.open_stream(buf).read_all().column("x"))
    assert (t.shape, t.dtype.name) == (ref.shape, dtype)
    assert_values_equal(np.from_dlpack(t), ref)
    assert t.readonly and not t.is_copied and inside(t, buf)


def test_dim_names_travel_through_an_ipc_file(tmp_path):
    t = named_tensor()
    path = tmp_path / "tensors.arrow"
    write_file(pa.table({"image": t, "label": pa.array(np.arange(4, dtype=np.int64))}), path)
    del t
    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
        assert table.schema.field("image").type.dim_names == ["H", "W"]
        back = dlbridge.from_dlpack(table.column("image"))
        label = dlbridge.from_dlpack(table.column("label"))
    assert (back.shape, back.dtype.name, back.dim_names) == ((4, 2, 3), "int32", ("", "H", "W"))
    assert_values_equal(np.from_dlpack(back), np.arange(24, dtype=np.int32).reshape(4, 2, 3))
    assert label.tolist() == [0, 1, 2, 3]
    del table
    # the mapping stays alive while a Tensor views it, after pyarrow's objects are gone
    assert np.from_dlpack(back)[-1, -1, -1] == 23


def test_dim_names_travel_through_an_ipc_stream():
    buf = write_stream(pa.table({"image": named_tensor(("row", "col"))}))
    t = dlbridge.from_dlpack(pa.ipc.open_stream(buf).read_all().column("image"))
    assert t.dim_names == ("", "row", "col") and inside(t, buf)
    # and again: what came out of IPC goes back in with its names
    again = pa.ipc.open_stream(write_stream(pa.table({"image": t}))).read_all().column("image")
    assert dlbridge.from_dlpack(again).dim_names == ("", "row", "col")


def test_transposed_cells_travel_as_a_permutation():
    ref = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4).transpose(0, 2, 1)
    column = pa.array(dlbridge.from_dlpack(ref))
    assert column.type.permutation == [1, 0]  # zero-copy export: the layout is in the metadata
    buf = write_stream(pa.table({"x": column}))
    col = pa.ipc.open_stream(buf).read_all().column("x")
    assert col.type.permutation == [1, 0]
    t = dlbridge.from_dlpack(col)
    assert t.shape == ref.shape and inside(t, buf)
    assert_values_equal(np.from_dlpack(t), ref)


def test_each_record_batch_of_a_stream_imports_zero_copy():
    ref = make("float64", (6, 2, 2))
    schema = pa.schema([("x", pa.array(dlbridge.from_dlpack(ref[:1])).type)])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for start in (0, 2, 4):
            writer.write_batch(pa.record_batch({"x": dlbridge.from_dlpack(ref[start : start + 2])}))
    buf = sink.getvalue()
    batches = list(pa.ipc.open_stream(buf))
    parts = [dlbridge.from_dlpack(b.column(0), copy=False) for b in batches]
    assert [p.shape for p in parts] == [(2, 2, 2)] * 3 and all(inside(p, buf) for p in parts)
    assert_values_equal(np.concatenate([np.from_dlpack(p) for p in parts]), ref)
    # the whole stream as one column has three chunks: joined by a copy (refused by copy=False)
    col = pa.ipc.open_stream(buf).read_all().column("x")
    assert col.num_chunks == 3
    whole = dlbridge.from_dlpack(col)
    assert whole.is_copied and not inside(whole, buf)
    assert_values_equal(np.from_dlpack(whole), ref)
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(col, copy=False)
