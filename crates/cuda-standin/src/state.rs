//! The stand-in's process-wide state: devices and their primary contexts, allocations,
//! streams with their queues of pending work, events, and injected failures.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::codes::{CuResult, INVALID_CONTEXT, INVALID_HANDLE, INVALID_VALUE, NOT_INITIALIZED};
use crate::memory::Mapping;

/// A handle value (context, stream, event): an address-like token nothing can dereference.
pub(crate) type Handle = usize;

/// What kind of memory an allocation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `cuMemAlloc` (or an opened IPC handle): not host-accessible.
    Device,
    /// `cuMemHostAlloc`: pinned host memory.
    Pinned,
    /// `cuMemAllocManaged`.
    Managed,
}

/// One allocation.
#[derive(Debug)]
pub(crate) struct Alloc {
    pub(crate) kind: Kind,
    /// Bytes asked for.
    pub(crate) size: usize,
    pub(crate) ordinal: i32,
    pub(crate) ctx: Handle,
    pub(crate) mapping: Mapping,
    /// For an opened IPC handle: (exporter pid, exporter fd) and how often it is open.
    pub(crate) ipc: Option<((u32, i32), usize)>,
}

/// Work queued on a stream, run at a synchronisation point.
#[derive(Debug)]
pub(crate) enum Work {
    /// Copy `len` bytes (read-write addresses of the stand-in, or host memory).
    Copy { dst: usize, src: usize, len: usize },
    /// Run `stream`'s work up to sequence number `seq` first.
    Wait { stream: Handle, seq: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Legacy,
    PerThread,
    Created,
}

#[derive(Debug)]
pub(crate) struct StreamState {
    pub(crate) ctx: Handle,
    pub(crate) kind: StreamKind,
    /// Synchronises with the legacy default stream (all but non-blocking streams).
    pub(crate) blocking: bool,
    queue: VecDeque<(u64, Work)>,
    /// Sequence number of the last work enqueued.
    last: u64,
}

#[derive(Debug)]
pub(crate) struct EventState {
    pub(crate) ctx: Handle,
    /// The stream and sequence number of the last record.
    recorded: Option<(Handle, u64)>,
}

/// Everything the driver knows.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) initialized: bool,
    pub(crate) devices: i32,
    /// Bytes of device and managed memory allowed at once.
    pub(crate) memory_limit: usize,
    pub(crate) memory_used: usize,
    /// Primary context of each device, once retained.
    pub(crate) contexts: Vec<Option<Handle>>,
    /// By visible base address.
    pub(crate) allocations: BTreeMap<usize, Alloc>,
    pub(crate) streams: HashMap<Handle, StreamState>,
    pub(crate) events: HashMap<Handle, EventState>,
    /// Legacy stream of each context; per-thread stream of each (context, thread).
    legacy: HashMap<Handle, Handle>,
    per_thread: HashMap<(Handle, usize), Handle>,
    next_handle: Handle,
    next_seq: u64,
    /// Injected failures: call name -> (code, remaining calls; negative = every call).
    pub(crate) failures: HashMap<String, (CuResult, i64)>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

thread_local! {
    /// This thread's context stack (`cuCtxPushCurrent` / `cuCtxPopCurrent`).
    pub(crate) static CURRENT: RefCell<Vec<Handle>> = const { RefCell::new(Vec::new()) };
    /// A small number naming this thread (for its per-thread default streams).
    static THREAD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// The context current on this thread.
pub(crate) fn current() -> Option<Handle> {
    CURRENT.with(|c| c.borrow().last().copied())
}

/// Parse `DLBRIDGE_STANDIN_FAIL` (`call=code` fails every call, `call=code*n` the next n).
fn failures_from_env() -> HashMap<String, (CuResult, i64)> {
    let spec = std::env::var("DLBRIDGE_STANDIN_FAIL").unwrap_or_default();
    spec.split(',')
        .filter_map(|item| {
            let (name, rest) = item.trim().split_once('=')?;
            let (code, times) = rest.split_once('*').unwrap_or((rest, "-1"));
            Some((name.to_owned(), (code.parse().ok()?, times.parse().ok()?)))
        })
        .collect()
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Run `f` on the state (made on first use from the environment).
pub(crate) fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(|| State {
        devices: i32::try_from(env_number("DLBRIDGE_STANDIN_DEVICES", 2)).unwrap_or(2),
        memory_limit: env_number("DLBRIDGE_STANDIN_MEMORY", 8 << 30),
        failures: failures_from_env(),
        next_handle: 0x5ca1_0000_0000,
        ..State::default()
    }))
}

/// Run the driver call `call` on the state: an injected failure, or `NOT_INITIALIZED` before
/// `cuInit` (for every call but `cuInit`), is returned instead of running `f`.
pub(crate) fn enter(call: &str, f: impl FnOnce(&mut State) -> Result<(), CuResult>) -> CuResult {
    with_state(|state| match state.admit(call).and_then(|()| f(state)) {
        Ok(()) => crate::codes::SUCCESS,
        Err(code) => code,
    })
}

impl State {
    fn admit(&mut self, call: &str) -> Result<(), CuResult> {
        if let Some((code, times)) = self.failures.get_mut(call) {
            let code = *code;
            if *times != 0 {
                *times -= 1;
                if *times == 0 {
                    self.failures.remove(call);
                }
                return Err(code);
            }
        }
        if !self.initialized && call != "cuInit" {
            return Err(NOT_INITIALIZED);
        }
        Ok(())
    }

    /// A fresh handle value.
    pub(crate) fn handle(&mut self) -> Handle {
        self.next_handle += 0x40;
        self.next_handle
    }

    /// The context current on this thread, or `INVALID_CONTEXT`.
    pub(crate) fn require_context(&self) -> Result<Handle, CuResult> {
        current().ok_or(INVALID_CONTEXT)
    }

    /// The device whose primary context is `ctx`.
    pub(crate) fn ordinal_of(&self, ctx: Handle) -> Option<i32> {
        let i = self.contexts.iter().position(|c| *c == Some(ctx))?;
        i32::try_from(i).ok()
    }

    /// The base and allocation containing `[addr, addr + len)`.
    pub(crate) fn find(&self, addr: usize, len: usize) -> Option<(usize, &Alloc)> {
        let (base, alloc) = self.allocations.range(..=addr).next_back()?;
        let end = addr.checked_add(len.max(1))?;
        (end <= base + alloc.size).then_some((*base, alloc))
    }

    /// The stand-in's read-write address for `len` bytes at `addr` of CUDA memory (device,
    /// managed or pinned: one address space, like CUDA's UVA).
    pub(crate) fn cuda_bytes(&self, addr: usize, len: usize) -> Result<usize, CuResult> {
        let (base, alloc) = self.find(addr, len).ok_or(INVALID_VALUE)?;
        Ok(alloc.mapping.rw + (addr - base))
    }

    /// `len` bytes at `addr` of host memory: plain, pinned or managed, never device memory.
    pub(crate) fn host_bytes(&self, addr: usize, len: usize) -> Result<usize, CuResult> {
        if addr == 0 {
            return Err(INVALID_VALUE);
        }
        match self.allocations.range(..=addr).next_back() {
            Some((base, a)) if a.kind == Kind::Device && addr < base + a.mapping.len => {
                Err(INVALID_VALUE)
            }
            _ => Ok(addr.checked_add(len).map(|_| addr).ok_or(INVALID_VALUE)?),
        }
    }

    fn new_stream(&mut self, ctx: Handle, kind: StreamKind, blocking: bool) -> Handle {
        let h = self.handle();
        let stream = StreamState {
            ctx,
            kind,
            blocking,
            queue: VecDeque::new(),
            last: 0,
        };
        self.streams.insert(h, stream);
        h
    }

    /// A stream created by `cuStreamCreate`.
    pub(crate) fn create_stream(&mut self, ctx: Handle, non_blocking: bool) -> Handle {
        self.new_stream(ctx, StreamKind::Created, !non_blocking)
    }

    /// The stream a `CUstream` value names: `0` and `CU_STREAM_LEGACY` the legacy default
    /// stream and `CU_STREAM_PER_THREAD` this thread's default stream of the *current*
    /// context (none current: `INVALID_CONTEXT`), anything else a stream created here.
    pub(crate) fn resolve(&mut self, raw: Handle) -> Result<Handle, CuResult> {
        match raw {
            0 | 1 => {
                let ctx = self.require_context()?;
                if let Some(h) = self.legacy.get(&ctx) {
                    return Ok(*h);
                }
                let h = self.new_stream(ctx, StreamKind::Legacy, true);
                self.legacy.insert(ctx, h);
                Ok(h)
            }
            2 => {
                let ctx = self.require_context()?;
                let key = (ctx, THREAD.with(|t| *t));
                if let Some(h) = self.per_thread.get(&key) {
                    return Ok(*h);
                }
                let h = self.new_stream(ctx, StreamKind::PerThread, true);
                self.per_thread.insert(key, h);
                Ok(h)
            }
            h if self
                .streams
                .get(&h)
                .is_some_and(|s| s.kind == StreamKind::Created) =>
            {
                Ok(h)
            }
            _ => Err(INVALID_HANDLE),
        }
    }

    /// Queue `work` on `stream`, after the implicit barriers of the legacy default stream:
    /// work on it waits for all earlier work of the blocking streams of its context, and work
    /// on a blocking stream waits for all earlier work on the legacy stream.
    pub(crate) fn enqueue(&mut self, stream: Handle, work: Work) {
        let s = &self.streams[&stream];
        let (ctx, kind, blocking) = (s.ctx, s.kind, s.blocking);
        let mut barriers: Vec<(Handle, u64)> = Vec::new();
        if kind == StreamKind::Legacy {
            barriers.extend(
                self.streams
                    .iter()
                    .filter(|(h, o)| **h != stream && o.ctx == ctx && o.blocking)
                    .filter(|(_, o)| !o.queue.is_empty())
                    .map(|(h, o)| (*h, o.last)),
            );
        } else if blocking {
            if let Some(l) = self.legacy.get(&ctx) {
                let legacy = &self.streams[l];
                if !legacy.queue.is_empty() {
                    barriers.push((*l, legacy.last));
                }
            }
        }
        for (other, seq) in barriers {
            self.push(stream, Work::Wait { stream: other, seq });
        }
        self.push(stream, work);
    }

    fn push(&mut self, stream: Handle, work: Work) {
        self.next_seq += 1;
        let seq = self.next_seq;
        let s = self.streams.get_mut(&stream).expect("a resolved stream");
        s.queue.push_back((seq, work));
        s.last = seq;
    }

    /// Run the work queued on `stream` up to sequence number `upto` (and what it waits for).
    pub(crate) fn drain(&mut self, stream: Handle, upto: u64) {
        loop {
            let Some(s) = self.streams.get_mut(&stream) else {
                return; // destroyed: its work ran then
            };
            if s.queue.front().is_none_or(|(seq, _)| *seq > upto) {
                return;
            }
            let (_, work) = s.queue.pop_front().expect("checked above");
            match work {
                // SAFETY: both ranges were checked when the copy was queued, and CUDA memory
                // is freed only after every stream is drained (`drain_all`); host memory is
                // the caller's promise, as with the real driver.
                Work::Copy { dst, src, len } => unsafe {
                    std::ptr::copy(src as *const u8, dst as *mut u8, len);
                },
                Work::Wait { stream, seq } => self.drain(stream, seq),
            }
        }
    }

    /// Run all queued work (before memory is freed: `cuMemFree` synchronises like the driver's).
    pub(crate) fn drain_all(&mut self) {
        let all: Vec<Handle> = self.streams.keys().copied().collect();
        for s in all {
            self.drain(s, u64::MAX);
        }
    }

    /// Work queued and not yet run, on every stream.
    pub(crate) fn pending(&self) -> usize {
        self.streams.values().map(|s| s.queue.len()).sum()
    }

    /// Drain and forget a created stream.
    pub(crate) fn destroy_stream(&mut self, stream: Handle) {
        self.drain(stream, u64::MAX);
        self.streams.remove(&stream);
    }

    /// Record `event` on `stream`: it completes when the work queued so far on `stream` has run.
    pub(crate) fn record(&mut self, event: Handle, stream: Handle) -> Result<(), CuResult> {
        let s = &self.streams[&stream];
        let mark = (stream, s.last);
        let e = self.events.get_mut(&event).ok_or(INVALID_HANDLE)?;
        // The driver's rule: the event and the stream belong to the same context.
        if e.ctx != s.ctx {
            return Err(INVALID_HANDLE);
        }
        e.recorded = Some(mark);
        Ok(())
    }

    /// Make `stream` wait for the last record of `event` (nothing if it was never recorded).
    pub(crate) fn wait(&mut self, stream: Handle, event: Handle) -> Result<(), CuResult> {
        let e = self.events.get(&event).ok_or(INVALID_HANDLE)?;
        if let Some((other, seq)) = e.recorded {
            self.enqueue(stream, Work::Wait { stream: other, seq });
        }
        Ok(())
    }

    /// Run the work the last record of `event` captured.
    pub(crate) fn synchronize_event(&mut self, event: Handle) -> Result<(), CuResult> {
        let e = self.events.get(&event).ok_or(INVALID_HANDLE)?;
        if let Some((stream, seq)) = e.recorded {
            self.drain(stream, seq);
        }
        Ok(())
    }

    pub(crate) fn create_event(&mut self, ctx: Handle) -> Handle {
        let h = self.handle();
        self.events.insert(
            h,
            EventState {
                ctx,
                recorded: None,
            },
        );
        h
    }
}
