"""The checker's adapters: one per library, each in a module named after its library's family
(``torch.py``, ``arrow.py`` for pyarrow and pandas, ``sycl.py`` for dpnp), plus the checker's
own libraries (``builtin.py``: the reference DLPack producer and consumer, Python's memoryview;
``array_api.py``: any array API library). :mod:`dlbridge_check.libraries` finds every
:class:`~dlbridge_check.adapters.base.Adapter` subclass with a ``name`` here: a new library
needs no other entry.

An adapter knows, for its library, how to

- build an array from NumPy data with a given layout (``make``; the checker's *producer* role),
  or say that the library cannot express it (:class:`~dlbridge_check.adapters.base.Unsupported`);
- import an array through the library's DLPack consumer (``consume``: ``from_dlpack`` with the
  library's own spelling of ``device=`` and ``copy=``);
- tell whether one of its arrays is read-only, and read one of its results (``read_result``).

The checker judges dlbridge, so an adapter must not reuse the conclusions of dlbridge's planner
(which route it takes, which layouts it copies, which devices a library holds): a wrong rule
there would then agree with itself here. It reads only dlbridge's public, documented data:
:mod:`dlbridge.libraries` (the name, module, pip spec and order of a library, the dtypes MLX and
Warp hold, the table of legacy capsules imported writable) and :class:`dlbridge.Device` (the
device types whose memory the host reads). dlbridge's tests fail on any other import of
dlbridge.
"""
