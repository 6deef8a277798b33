"""The checker's adapters: one per library, each in the module of the same name as its library's
module in :mod:`dlbridge.namespaces` (``namespaces/torch.py`` and ``adapters/torch.py``), plus
the checker's own libraries (``arrow.py``: producers that speak Arrow only; ``builtin.py``: the
reference DLPack producer and consumer, Python's memoryview). :mod:`dlbridge.check.libraries`
finds every :class:`~dlbridge.check.adapters.base.Adapter` subclass with a ``name`` here: a new
library needs no other entry.

An adapter knows, for its library, how to

- build an array from NumPy data with a given layout (``make``; the checker's *producer* role),
  or say that the library cannot express it (:class:`~dlbridge.check.adapters.base.Unsupported`);
- import an array through the library's DLPack consumer (``consume``: ``from_dlpack`` with the
  library's own spelling of ``device=`` and ``copy=``);
- tell whether one of its arrays is read-only, and read one of its results (``read_result``).

The checker judges dlbridge, so an adapter must not reuse the conclusions of dlbridge's planner
(``Namespace.dtype_route``, ``layout_problem``, ``can_hold``...): a wrong rule there would then
agree with itself here. It shares only data with its namespace class: the name, module and pip
spec (``class TorchLib(Adapter, namespace=Torch)`` copies those strings and keeps no reference
to the class), and facts such as the dtypes MLX and Warp hold or the device types whose memory
the host reads, one list per fact.
"""
