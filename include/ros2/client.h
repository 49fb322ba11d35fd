// libros2: the native C++ client of ROS2 (the C API beside it is ros2/ros2.h).
//
// A program connects a Client to a control endpoint with tenant credentials,
// connects a Pool (the session: pool map, target worker addresses and the pool
// capability), opens a Container (its properties and container capability), and
// does I/O on Objects: single values and array extents under dkeys and akeys,
// punch, list, and size queries. docs/client.md describes the design.
//
// Placement is computed from the pool map (jump consistent hash, src/placement):
// a request goes straight to the target that owns the dkey, with no lookup.
// Checksums (the container's "checksum" property) are computed here, sent with
// every update, and every fetched byte is verified against the checksums the
// engine returns: a mismatch is a Corruption error, never data.
//
// Threads: the Client, Pool and Container are thread-safe. The data plane is
// per thread: each thread that does I/O gets its own transport Worker (made on
// its first I/O) and its own endpoints to the targets it talks to. An Object is
// a small value that any thread may copy and use. An EventQueue belongs to the
// thread that created it: submit to it and poll it from that thread only.
// Destroy Objects, EventQueues, Containers and Pools before their Client, and
// stop every I/O thread's use of the Client before destroying it.
//
// Errors: every call returns ros2::Status / ros2::Result<T>; no exception leaves
// the library. Messages name the object, the key and the cause.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ros2/types.h"

namespace ros2::client {

struct ClientOptions {
  // Control endpoint: "unix:/path/control.sock", "/path/control.sock" or "host:port";
  // or several engines of one cluster, "a,b,c": a control call that cannot
  // reach the current one moves to the next.
  std::string control;
  std::string tenant = "admin";
  std::string secret;       // the tenant's secret, or
  std::string secret_file;  // a file whose first line is the secret
  // Data-plane transport: "auto", "tcp", "shm" or "rdma"; `net_devices` is
  // UCX_NET_DEVICES for tcp/rdma ("lo" for a local cluster). "ofi-tcp",
  // "ofi-shm" (...) is short for provider "ofi" with that transport.
  std::string transport = "auto";
  // The fabric library of the data plane: "ucx" or "ofi" (libfabric); the
  // engines' transport.provider must be the same.
  std::string provider = "ucx";
  std::string net_devices = "lo";
  std::chrono::milliseconds control_timeout{10000};  // each gRPC call
  std::chrono::milliseconds io_timeout{30000};       // each data-plane request
  // How long a call waits for the pool to be reachable again after its
  // engine went away (killed, restarted): the client retries the control
  // plane with growing pauses, opens a fresh session and map once it answers,
  // and resends what is safe to resend (reads; updates and punches only when
  // they were refused or never sent). Past it the call fails with
  // Disconnected naming the pool. 0: no waiting, fail at once (the next call
  // tries again). docs/client.md, "Engine restarts".
  std::chrono::milliseconds reconnect_timeout{60000};
  // Whether each connected pool keeps a watch on its map (a gRPC stream from
  // the control plane, re-opened on another engine when one goes away), so a
  // new map (an engine marked DOWN) reaches the client without a failed
  // request. Off: the client learns a new map when an engine refuses a
  // request made with the old one (StaleMap) and resends it. docs/cluster.md,
  // "Map versions".
  bool watch_pool_maps = true;
  // How long a thread waiting for a reply polls the data plane before it
  // sleeps on the worker's event fd (0..1 s). Polling catches a quick reply
  // without the cost of waking a sleeping thread; a process keeping many I/Os in flight
  // next to the engine on few cores does better with a short spin, since its
  // replies come in batches anyway (docs/client.md, "Waiting").
  std::chrono::microseconds spin_budget{50};
  // Offload mode: how long a host thread waiting for a completion polls the
  // completion ring before it sleeps on the session's event fd (0..1 s). The
  // host CPU is what offload mode saves, so by default the thread sleeps at
  // once; one wake-up then reaps every completion the agent has posted.
  std::chrono::microseconds offload_spin_budget{0};
  // Bytes per checksum chunk for updates (the engine verifies and stores them).
  uint32_t checksum_chunk_size = 4096;
  // Offload mode (docs/agent.md): the Unix socket of a ros2-agent. When set,
  // or when this is empty and the environment has ROS2_AGENT_SOCKET, this
  // process runs no data plane and holds no capability: the DFS API
  // (ros2/dfs.h) goes through the agent's shared-memory rings, as the tenant
  // the agent maps this process's uid/gid to. The control endpoint, tenant,
  // secret and transport are then not used, and the object API answers
  // NotSupported.
  std::string agent_socket;
};

// What an akey holds (ros2/types.h): a single value or an array of records.
using ros2::ValueType;

// Condition of an update or punch, checked by the engine atomically with the
// write against every other conditional operation on the same dkey (DAOS's
// conditional insert / update / punch).
enum class Condition : uint8_t {
  kNone = 0,
  kAbsent = 1,   // update: only if the akey has no value (else AlreadyExists)
  kPresent = 2,  // update: only if the akey has a value; punch: only if the key is visible (else NotFound)
};

// One update: a single value (replaced whole) or an array extent of
// data.size() / record_size records starting at record `index`.
// The data must stay valid until the update completes.
struct UpdateArgs {
  std::string dkey;
  std::string akey;
  ValueType kind = ValueType::kSingle;
  uint64_t index = 0;        // kArray
  uint32_t record_size = 1;  // kArray: data.size() must be a multiple
  std::span<const std::byte> data;
  Condition condition = Condition::kNone;
};

// One fetch into `buffer`: a single value (buffer is its capacity) or `count`
// records from `index` (buffer.size() >= count * record_size; holes read as
// zeros). The buffer must stay valid until the fetch completes.
struct FetchArgs {
  std::string dkey;
  std::string akey;
  ValueType kind = ValueType::kSingle;
  uint64_t index = 0;
  uint64_t count = 0;
  uint32_t record_size = 1;
  std::span<std::byte> buffer;
  // kArray: also return the akey's array end (IoResult::array_end), in the
  // same round trip.
  bool want_array_end = false;
};

// The outcome of one asynchronous I/O.
struct IoResult {
  Status status;
  // Fetch: kSingle — the value's full size (0 when absent; when larger than the
  // buffer only buffer.size() bytes were filled and not verified, fetch again);
  // kArray — count * record_size. Update: the bytes written.
  uint64_t size = 0;
  uint64_t epoch = 0;  // update: the epoch the engine stored it at
  // Fetch with want_array_end: one past the highest record of the whole akey
  // (0 when it holds none).
  uint64_t array_end = 0;
};

// The last record of an array akey over the whole object: the largest dkey
// (bytewise) and the array end of the akey under it (0 when that dkey does not
// hold the akey).
struct ArrayTail {
  std::string dkey;
  uint64_t end = 0;
};
using ArrayTailCallback = std::function<void(const Result<std::optional<ArrayTail>>& tail)>;

// Resumable position of a paged dkey listing across an object's shards: start
// with a default one, pass back what the previous page left, stop at `eof`.
// DFS's Readdir resumes with the same type (dfs::DirAnchor names it).
struct KeyAnchor {
  uint32_t shard = 0;    // index into the object's shard targets (placement order)
  std::string position;  // the engine's opaque position within that shard
  bool eof = false;
};

// Pool space as the control plane reports it (statfs).
struct PoolSpace {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
};

using IoCallback = std::function<void(const IoResult& result)>;

// A completed operation taken from an EventQueue.
struct Event {
  uint64_t user_data = 0;
  IoResult result;
};

// Completion queue of asynchronous I/O for one thread. Owned by the caller;
// bound to the thread that created it (every method must be called there).
// Operations submitted with a user_data value appear as Events once complete;
// operations submitted with a callback run it inside Poll()/Wait(). Destroying a
// queue with operations in flight waits for them (bounded by io_timeout).
class EventQueue {
 public:
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Makes progress without blocking; moves up to out.size() completed events
  // into `out` and returns how many.
  size_t Poll(std::span<Event> out);
  // Blocks until at least `min_events` (capped at in_flight() + completed) have
  // completed or `timeout` passes; then behaves like Poll. TimedOut when fewer
  // than `min_events` completed in time (the events that did are still returned
  // by the next Poll).
  Result<size_t> Wait(std::span<Event> out, size_t min_events, std::chrono::milliseconds timeout);
  // Blocks until at least one operation of this queue completes (an event is
  // queued or a completion callback ran), nothing is in flight, or `timeout`
  // passes, progressing this thread's worker and sleeping on its event fd
  // meanwhile (the transport's adaptive spin-then-sleep). For callers that
  // complete by callback, which Wait cannot count. Returns how many operations
  // completed during the call (0 on timeout or with nothing in flight).
  size_t WaitAny(std::chrono::microseconds timeout);
  // Operations submitted and not yet completed.
  size_t in_flight() const;
  // Completed events not yet returned by Poll/Wait.
  size_t ready() const;

  // libros2's state of the queue (src/client/event_queue_impl.h), opaque
  // here: queues are made by Client::CreateEventQueue and
  // Container::CreateEventQueue.
  class Impl;
  explicit EventQueue(std::unique_ptr<Impl> impl);
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct PoolSummary {
  std::string uuid;
  std::string label;
  uint32_t target_count = 0;
  uint64_t map_version = 0;
  Rights rights = 0;  // kRight* bits (ros2/types.h) of the session
};

// A target of a pool's map and the calling thread's connection to it
// (Pool::Connections).
struct TargetConnection {
  uint32_t target = 0;  // global target index in the map
  std::string engine_uuid;
  std::string engine_address;  // the engine's host name in the map (control.address)
  bool connected = false;      // this thread has an endpoint to the target
  // When connected: UCX's active-message lane "transport/device" (e.g.
  // "tcp/eth0", "posix/memory"), every lane in lane order, and whether UCX
  // counts the peer as on this host.
  std::string transport;
  std::vector<std::string> lanes;
  bool same_host = false;
};

struct ContainerSummary {
  std::string uuid;
  std::string label;
  ObjectClass default_object_class = ObjectClass::kSX;
  // The end-to-end checksum of the container's data (kNone: its "checksum"
  // property is off; fetched data is then not verified).
  ChecksumType checksum = ChecksumType::kCrc32c;
  uint64_t chunk_size = 0;
  // Redundancy factor (container property rd_fac, 0-2): the engine losses its
  // objects must survive; OpenObject refuses a class that survives fewer.
  uint32_t rd_fac = 0;
  Rights rights = 0;
  // Container property encryption=aes-256-gcm: file data is encrypted (DFS
  // needs the key to mount; docs/dfs.md, "Encrypted files"), and the name of
  // the key recorded at create (empty when none was given).
  bool encryption = false;
  std::string encryption_key_id;
};

class Object;

// An open container. Thread-safe; created by Pool::OpenContainer.
class Container {
 public:
  ~Container();
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  const ContainerSummary& summary() const;

  // Opens object `oid` (no RPC). InvalidArgument for an unknown class, and
  // for a class that survives fewer engine losses than the container's
  // redundancy factor (the message names both).
  Result<Object> OpenObject(const ObjectId& oid) const;
  // Convenience: the id of a key-value (or array) object of class `oc` with
  // the user bits `hi` (the low 48 bits are kept) and `lo`. The order is the
  // one of the id's printed form ("<hi>.<lo>") and the same in the C API
  // (ros2_obj_open) and the Python package (Container.object).
  static ObjectId MakeObjectId(ObjectClass oc, uint64_t hi, uint64_t lo, ObjectType type = ObjectType::kKeyValue) {
    return ObjectId::Make(type, oc, hi, lo);
  }

  // Enumerates the container's objects across every target (blocking).
  Result<std::vector<ObjectId>> ListObjects() const;
  // An event queue bound to the calling thread (as Client::CreateEventQueue),
  // for code that holds only the container.
  Result<std::unique_ptr<EventQueue>> CreateEventQueue() const;
  // The pool's capacity and use (one control-plane call).
  Result<PoolSpace> QueryPoolSpace() const;
  // Opened through a ros2-agent (ClientOptions::agent_socket): only the DFS
  // API reaches it.
  bool offload() const;

  // libros2's state of the container (src/client/handle_backends.h: direct,
  // or the agent's), opaque here: containers are made by Pool::OpenContainer.
  class Impl;
  explicit Container(std::shared_ptr<Impl> impl);
  Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

// A connected pool (one session). Thread-safe; created by Client::ConnectPool.
// Closing it (destruction) ends the session: the engines then refuse its
// capabilities.
class Pool {
 public:
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  PoolSummary summary() const;
  // Opens a container by label or UUID; `rights` 0 asks for every right the
  // container's ACL grants this tenant (kRight* bits otherwise).
  Result<std::unique_ptr<Container>> OpenContainer(std::string_view container, Rights rights = 0);
  // Fetches the current pool map from the control plane (after an engine
  // restarted or a target changed state). Returns the new version.
  Result<uint64_t> RefreshMap();
  // One entry per target of the current map: the calling thread's
  // data-plane connection to it, with the transports UCX chose (shared
  // memory to an engine on this host, tcp or verbs to others). NotSupported
  // in offload mode (the agent holds the connections).
  Result<std::vector<TargetConnection>> Connections() const;

  // libros2's state of the pool (src/client/handle_backends.h: direct, or
  // the agent's), opaque here: pools are made by Client::ConnectPool.
  class Impl;
  explicit Pool(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
};

// An object of an open container: a cheap, copyable handle (no state on the
// engines until written). Any thread may use it; each thread's I/O goes
// through that thread's worker. Blocking calls progress the calling thread's
// worker until their reply arrives (bounded by ClientOptions::io_timeout).
class Object {
 public:
  const ObjectId& id() const;

  // --- blocking ---
  Status Update(const UpdateArgs& args) const;
  Result<IoResult> Fetch(const FetchArgs& args) const;
  // Shorthands for single values.
  Status Put(std::string_view dkey, std::string_view akey, std::span<const std::byte> value) const;
  // The whole value (the buffer grows to its size when larger than
  // `size_hint`); empty when no value is stored (an absent single value reads
  // as size 0, like an empty one).
  Result<std::vector<std::byte>> Get(std::string_view dkey, std::string_view akey, size_t size_hint = 4096) const;

  Status PunchObject() const;
  Status PunchDkey(std::string_view dkey) const;
  Status PunchAkey(std::string_view dkey, std::string_view akey) const;
  // Conditional punches: with Condition::kPresent, NotFound when the key is
  // not visible (kAbsent is InvalidArgument).
  Status PunchDkey(std::string_view dkey, Condition condition) const;
  Status PunchAkey(std::string_view dkey, std::string_view akey, Condition condition) const;

  // Every dkey of the object (across its shards), every akey of a dkey.
  Result<std::vector<std::string>> ListDkeys() const;
  Result<std::vector<std::string>> ListAkeys(std::string_view dkey) const;
  // Largest dkey (bytewise) over all shards; nullopt when the object is empty.
  Result<std::optional<std::string>> QueryMaxDkey() const;
  // One past the highest written record of an array akey; nullopt when none.
  Result<std::optional<uint64_t>> QueryArrayEnd(std::string_view dkey, std::string_view akey) const;
  // The object's ArrayTail for `akey`: every shard is asked at once (one
  // round trip); nullopt when the object holds no dkey.
  Result<std::optional<ArrayTail>> QueryArrayTail(std::string_view akey) const;
  // Connects the calling thread to every target holding a shard of this
  // object (blocking; cheap once connected). Completion callbacks must not
  // connect (that would progress the worker from inside its own progress), so
  // code that may submit follow-up requests from a callback (a short read's
  // size query) calls this before its first submission.
  Status ConnectShards() const;
  // Up to `max` dkeys from `anchor` (fewer at a shard boundary is normal; an
  // empty page only at eof), advancing it. Keys of one shard come in order.
  Result<std::vector<std::string>> ListDkeysPage(KeyAnchor& anchor, size_t max) const;

  // --- asynchronous: completion as an Event carrying `user_data`, or by `callback` ---
  // Submission errors (bad arguments, unreachable target) are returned at once
  // and nothing is queued; every later failure arrives in the completion.
  Status SubmitUpdate(EventQueue& eq, const UpdateArgs& args, uint64_t user_data) const;
  Status SubmitUpdate(EventQueue& eq, const UpdateArgs& args, IoCallback callback) const;
  Status SubmitFetch(EventQueue& eq, const FetchArgs& args, uint64_t user_data) const;
  Status SubmitFetch(EventQueue& eq, const FetchArgs& args, IoCallback callback) const;
  // QueryArrayTail through `eq`: `callback` runs inside eq.Poll()/Wait() once
  // every shard answered (it counts as one operation in flight).
  Status SubmitQueryArrayTail(EventQueue& eq, std::string_view akey, ArrayTailCallback callback) const;

  // libros2's state of the object (its id and its container's;
  // src/client/client_internal.h), opaque here: objects are made by
  // Container::OpenObject.
  class Impl;
  explicit Object(std::shared_ptr<const Impl> impl);

 private:
  std::shared_ptr<const Impl> impl_;
};

// Memory for I/O buffers that an engine on the same host reaches directly: a
// shared segment (docs/client.md, "I/O buffers"). A fetch into it lands in it
// straight from the engine's storage read, and an update is read from it with
// one memcpy, instead of a cross-memory copy (process_vm_writev runs well
// below memcpy speed) or, from 1 KiB up, a copy into and out of the request or
// reply. Any span inside it may be passed to any I/O; over tcp or to
// a remote engine it behaves like ordinary memory. Move-only; unmapped on
// destruction (no I/O into it may still be in flight).
class IoBuffer {
 public:
  IoBuffer();
  IoBuffer(IoBuffer&&) noexcept;
  IoBuffer& operator=(IoBuffer&&) noexcept;
  ~IoBuffer();
  std::byte* data() const;
  uint64_t size() const;  // the length asked for, rounded up to whole pages
  std::span<std::byte> span() const { return {data(), size()}; }

  // libros2's state of the buffer (src/client/client_internal.h), opaque
  // here: buffers are made by Client::AllocateIoBuffer.
  class Impl;
  explicit IoBuffer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// A connection to a ROS2 control endpoint plus the process's data-plane
// transport context. Thread-safe. Create one per process (or per tenant).
class Client {
 public:
  // Resolves the credentials, makes the gRPC channel and the transport context.
  // Does not contact the server yet (ConnectPool does): an unreachable endpoint
  // is reported by the first call that needs it.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Opens a session on a pool (label or UUID).
  Result<std::unique_ptr<Pool>> ConnectPool(std::string_view pool);
  // An event queue bound to the calling thread.
  Result<std::unique_ptr<EventQueue>> CreateEventQueue();
  // Registers [addr, addr + length), a buffer the caller will reuse for I/O,
  // with the transport until UnregisterBuffer(addr) or until the client
  // closes; I/O on a range inside it then uses this registration. Optional:
  // any other buffer is registered for the I/O that uses it, and that
  // registration ends with the I/O. The memory must stay mapped while it is
  // registered. Registering at an address already registered replaces that
  // registration. InvalidArgument for a null address or zero length.
  Status RegisterBuffer(void* addr, uint64_t length);
  // Ends the registration RegisterBuffer made at `addr` (call it before
  // freeing the memory); I/O still in flight on it keeps it until it
  // completes. NotFound when none starts there.
  Status UnregisterBuffer(void* addr);
  // Allocates `length` bytes (zero-filled) of I/O buffer memory an engine on
  // this host writes and reads directly (IoBuffer).
  Result<IoBuffer> AllocateIoBuffer(uint64_t length);
  // "transport=shm tls=... devices=..." of the data-plane context.
  std::string DescribeTransport() const;
  const ClientOptions& options() const;
  // Connected to a ros2-agent (ClientOptions::agent_socket) rather than to
  // the engines.
  bool offload() const;

  // libros2's state of the client (src/client/handle_backends.h: direct, or
  // through ros2-agent), opaque here: clients are made by Connect.
  class Impl;
  explicit Client(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
};

// InvalidArgument for a class number no ObjectClass has: what OpenObject
// accepts (every named class, S1 to RP_3GX).
Status CheckObjectClassSupported(ObjectClass oc);

}  // namespace ros2::client
