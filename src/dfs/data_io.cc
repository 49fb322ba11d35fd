// The data path of Filesystem: reads and writes split at chunk boundaries,
// every chunk submitted at once through an event queue (the caller's for
// SubmitRead/SubmitWrite, a private one for the blocking calls), one callback
// per request after its last chunk completed.
//
// Short reads without a size query: each chunk fetch also returns the end of
// that chunk's array (one more field in the same reply). When the data of the
// chunks read reaches the end of the request, the read was full; only when it
// does not (a read at or across the end of the file, or into a hole at the
// tail) is the file's size asked, through the same queue.
//
// Files of an encrypted container take encrypted_io.cc instead (one flag
// check per request).
#include <cstring>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "client/event_queue_impl.h"
#include "dfs/encrypted_io.h"
#include "dfs/filesystem_core.h"
#include "dfs/offload_mount.h"

namespace ros2::dfs {
namespace {

struct ChunkPiece {
  uint64_t chunk = 0;
  uint64_t offset_in_chunk = 0;
  uint64_t length = 0;
  uint64_t buffer_offset = 0;
};

std::vector<ChunkPiece> SplitIntoChunks(uint64_t offset, uint64_t length, uint64_t chunk_size) {
  std::vector<ChunkPiece> pieces;
  uint64_t done = 0;
  while (done < length) {
    const uint64_t pos = offset + done;
    ChunkPiece p;
    p.chunk = pos / chunk_size;
    p.offset_in_chunk = pos % chunk_size;
    p.length = std::min(length - done, chunk_size - p.offset_in_chunk);
    p.buffer_offset = done;
    pieces.push_back(p);
    done += p.length;
  }
  return pieces;
}

Status CheckIo(const Entry& file, uint64_t offset, uint64_t length, std::string_view op) {
  if (file.is_dir()) return Status::IsDirectory(fmt::format("dfs {}: '{}' is a directory", op, file.name));
  if (!file.is_file()) return Status::InvalidArgument(fmt::format("dfs {}: '{}' is not a regular file", op, file.name));
  if (file.chunk_size == 0)
    return Status::InvalidArgument(fmt::format("dfs {}: '{}' has no chunk size", op, file.name));
  if (offset > UINT64_MAX - length) {
    return Status::InvalidArgument(fmt::format("dfs {}: offset {} + length {} overflows", op, offset, length));
  }
  return Status::Ok();
}

// One request's chunks in flight.
struct RequestState {
  client::Object obj;
  client::EventQueue* eq = nullptr;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t chunk_size = 0;
  size_t remaining = 0;  // chunk completions still due, +1 until every chunk was submitted
  Status status;
  uint64_t data_end = 0;  // reads: the furthest end of data seen in the chunks read
  client::IoCallback callback;
  bool is_read = false;

  explicit RequestState(client::Object o) : obj(std::move(o)) {}

  void Finish(const client::IoResult& r) {
    client::IoCallback cb = std::move(callback);
    callback = nullptr;
    cb(r);
  }

  static void ChunkDone(const std::shared_ptr<RequestState>& s, const ChunkPiece& piece, const client::IoResult& r) {
    if (!r.status.ok()) {
      if (s->status.ok()) s->status = r.status;
    } else if (s->is_read && r.array_end > 0) {
      s->data_end = std::max(s->data_end, piece.chunk * s->chunk_size + r.array_end);
    }
    Release(s);
  }

  static void Release(const std::shared_ptr<RequestState>& s) {
    if (--s->remaining > 0) return;
    client::IoResult out;
    if (!s->status.ok()) {
      out.status = s->status;
      return s->Finish(out);
    }
    if (!s->is_read || s->data_end >= s->offset + s->length) {
      out.size = s->length;
      return s->Finish(out);
    }
    // The data seen ends before the request does: the file's size decides.
    Status st =
        s->obj.SubmitQueryArrayTail(*s->eq, kDataAkey, [s](const Result<std::optional<client::ArrayTail>>& tail) {
          client::IoResult res;
          if (!tail.ok()) {
            res.status = tail.status();
            return s->Finish(res);
          }
          uint64_t size = 0;
          if (tail->has_value()) {
            auto index = ChunkIndex((*tail)->dkey);
            if (!index.ok()) {
              res.status = index.status();
              return s->Finish(res);
            }
            size = *index * s->chunk_size + (*tail)->end;
          }
          res.size = size > s->offset ? std::min(s->length, size - s->offset) : 0;
          s->Finish(res);
        });
    if (!st.ok()) {
      out.status = st;
      s->Finish(out);
    }
  }
};

// Waits until `done` on a private queue.
void Drain(client::EventQueue& eq, const bool& done) {
  std::array<client::Event, 1> ignored;
  while (!done || eq.in_flight() > 0) (void)eq.Wait(ignored, eq.in_flight(), std::chrono::seconds(5));
}

}  // namespace

Status Filesystem::DeferOffloaded(client::EventQueue& eq, const Result<uint64_t>& done,
                                  client::IoCallback callback) {
  if (eq.impl().io_ != nullptr) {
    return Status::InvalidArgument("dfs: an offload-mode file system needs an event queue of its offload-mode client");
  }
  client::IoResult r;
  if (done.ok()) {
    r.size = *done;
  } else {
    r.status = done.status();
  }
  eq.impl().Defer(std::move(callback), r);
  return Status::Ok();
}

Status Filesystem::SubmitOffloaded(client::EventQueue& eq, const Entry& file, uint64_t offset, std::byte* data,
                                   uint64_t length, bool read, client::IoCallback callback) {
  if (eq.impl().io_ != nullptr || !eq.impl().offload_) {
    return Status::InvalidArgument("dfs: an offload-mode file system needs an event queue of its offload-mode client");
  }
  if (!callback) return Status::InvalidArgument(read ? "dfs read: empty callback" : "dfs write: empty callback");
  agent::HostSession& session = *offload_->session;
  const uint64_t chunks = file.chunk_size == 0 ? 1 : length / file.chunk_size + 2;
  const bool in_arena = session.InArena(data, length);
  agent::ArenaBuffer bounce;
  if (length > 0 && chunks < agent::kMaxChunksPerIo && !in_arena) {
    auto b = session.Allocate(length);
    if (b.ok()) bounce = *b;
  }
  if (length == 0 || chunks >= agent::kMaxChunksPerIo || (!in_arena && !bounce)) {
    // Empty, larger than one entry may span, or no arena room: the blocking
    // call (which splits and bounces as it must), completed by the queue.
    auto n = read ? Read(file, offset, {data, length}) : Write(file, offset, {data, length});
    return DeferOffloaded(eq, n, std::move(callback));
  }
  // In flight at the agent: the queue's Poll/Wait reaps the completion.
  std::unique_ptr<client::OffloadIo> io = eq.impl().offload_->TakeIo();
  io->owner = eq.impl().offload_;
  io->callback = std::move(callback);
  io->read = read;
  agent::IoRequest req;
  req.kind = read ? agent::IoKind::kRead : agent::IoKind::kWrite;
  req.mount = offload_->index;
  req.file = &file;
  req.offset = offset;
  if (in_arena) {
    req.buffer = {data, length};
  } else {
    io->bounce = bounce.data;
    io->bounce_offset = bounce.offset;
    io->bounce_size = bounce.size;
    io->user = data;
    if (!read) std::memcpy(bounce.data, data, length);
    req.buffer = {bounce.data, length};
  }
  req.user_data = reinterpret_cast<uint64_t>(io.get());
  eq.impl().offload_->Link(io.get());  // before Submit: another queue may reap the completion at once
  if (Status st = session.Submit({&req, 1}); !st.ok()) {
    eq.impl().offload_->Unlink(io.get());
    eq.impl().offload_->GiveBack(std::move(io));
    if (bounce) session.Free(bounce);
    return st.WithContext(fmt::format("dfs {} of '{}' through the agent", read ? "read" : "write", file.name));
  }
  ++eq.impl().in_flight_;
  io.release();
  return Status::Ok();
}

Status Filesystem::SubmitRead(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<std::byte> buffer,
                              client::IoCallback callback) {
  if (offload_) return SubmitOffloaded(eq, file, offset, buffer.data(), buffer.size(), true, std::move(callback));
  if (!callback) return Status::InvalidArgument("dfs read: empty callback");
  ROS2_RETURN_IF_ERROR(CheckIo(file, offset, buffer.size(), "read"));
  if (buffer.empty()) {
    callback(client::IoResult{});
    return Status::Ok();
  }
  if (core_->cipher() != nullptr) return SubmitEncryptedRead(*core_, eq, file, offset, buffer, std::move(callback));
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core_->OpenObject(file.oid));
  // A short read's size query goes to every shard from a completion callback,
  // where no connection may be made: connect now (a lookup once connected).
  ROS2_RETURN_IF_ERROR(obj.ConnectShards());
  auto s = std::make_shared<RequestState>(std::move(obj));
  s->eq = &eq;
  s->offset = offset;
  s->length = buffer.size();
  s->chunk_size = file.chunk_size;
  s->is_read = true;
  s->callback = std::move(callback);
  const auto pieces = SplitIntoChunks(offset, buffer.size(), file.chunk_size);
  s->remaining = pieces.size() + 1;
  for (const ChunkPiece& piece : pieces) {
    client::FetchArgs f;
    f.dkey = ChunkDkey(piece.chunk);
    f.akey = kDataAkey;
    f.kind = client::ValueType::kArray;
    f.index = piece.offset_in_chunk;
    f.count = piece.length;
    f.buffer = buffer.subspan(piece.buffer_offset, piece.length);
    f.want_array_end = true;
    Status st =
        s->obj.SubmitFetch(eq, f, [s, piece](const client::IoResult& r) { RequestState::ChunkDone(s, piece, r); });
    if (!st.ok()) {
      // Chunks already submitted complete later; the request reports this error once they did.
      s->status = st;
      s->remaining -= pieces.size() - (&piece - pieces.data());
      break;
    }
  }
  // Drop the submission reference; with every chunk done already, finish here.
  if (s->remaining == 1 && !s->status.ok()) {
    s->callback = nullptr;  // nothing was queued: the error is returned instead
    return s->status;
  }
  RequestState::Release(s);
  return Status::Ok();
}

Status Filesystem::SubmitWrite(client::EventQueue& eq, const Entry& file, uint64_t offset,
                               std::span<const std::byte> data, client::IoCallback callback) {
  if (offload_) {
    return SubmitOffloaded(eq, file, offset, const_cast<std::byte*>(data.data()), data.size(), false,
                           std::move(callback));
  }
  if (!callback) return Status::InvalidArgument("dfs write: empty callback");
  ROS2_RETURN_IF_ERROR(CheckIo(file, offset, data.size(), "write"));
  if (data.empty()) {
    callback(client::IoResult{});
    return Status::Ok();
  }
  if (core_->cipher() != nullptr) return SubmitEncryptedWrite(*core_, eq, file, offset, data, std::move(callback));
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core_->OpenObject(file.oid));
  auto s = std::make_shared<RequestState>(std::move(obj));
  s->eq = &eq;
  s->offset = offset;
  s->length = data.size();
  s->chunk_size = file.chunk_size;
  s->callback = std::move(callback);
  const auto pieces = SplitIntoChunks(offset, data.size(), file.chunk_size);
  s->remaining = pieces.size() + 1;
  for (const ChunkPiece& piece : pieces) {
    client::UpdateArgs u;
    u.dkey = ChunkDkey(piece.chunk);
    u.akey = kDataAkey;
    u.kind = client::ValueType::kArray;
    u.index = piece.offset_in_chunk;
    u.data = data.subspan(piece.buffer_offset, piece.length);
    Status st =
        s->obj.SubmitUpdate(eq, u, [s, piece](const client::IoResult& r) { RequestState::ChunkDone(s, piece, r); });
    if (!st.ok()) {
      s->status = st;
      s->remaining -= pieces.size() - (&piece - pieces.data());
      break;
    }
  }
  if (s->remaining == 1 && !s->status.ok()) {
    s->callback = nullptr;
    return s->status;
  }
  RequestState::Release(s);
  return Status::Ok();
}

Result<uint64_t> Filesystem::Read(const Entry& file, uint64_t offset, std::span<std::byte> buffer) {
  if (offload_) return offload_->session->Read(offload_->index, file, offset, buffer);
  ROS2_RETURN_IF_ERROR(CheckIo(file, offset, buffer.size(), "read"));
  if (buffer.empty()) return uint64_t{0};
  ROS2_ASSIGN_OR_RETURN(auto eq, core_->container().CreateEventQueue());
  bool done = false;
  client::IoResult result;
  ROS2_RETURN_IF_ERROR(SubmitRead(*eq, file, offset, buffer, [&](const client::IoResult& r) {
    result = r;
    done = true;
  }));
  Drain(*eq, done);
  if (!result.status.ok()) {
    return result.status.WithContext(fmt::format("dfs read of '{}' at {}", file.name, offset));
  }
  return result.size;
}

Result<uint64_t> Filesystem::Write(const Entry& file, uint64_t offset, std::span<const std::byte> data) {
  if (offload_) return offload_->session->Write(offload_->index, file, offset, data);
  ROS2_RETURN_IF_ERROR(CheckIo(file, offset, data.size(), "write"));
  if (data.empty()) return uint64_t{0};
  ROS2_ASSIGN_OR_RETURN(auto eq, core_->container().CreateEventQueue());
  bool done = false;
  client::IoResult result;
  ROS2_RETURN_IF_ERROR(SubmitWrite(*eq, file, offset, data, [&](const client::IoResult& r) {
    result = r;
    done = true;
  }));
  Drain(*eq, done);
  if (!result.status.ok()) {
    return result.status.WithContext(fmt::format("dfs write of '{}' at {}", file.name, offset));
  }
  return result.size;
}

}  // namespace ros2::dfs
