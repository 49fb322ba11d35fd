#include "fs_stream.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include <fmt/format.h>

namespace ros2::ctl {

namespace {

constexpr uint64_t kMinBlock = uint64_t{1} << 20;
// How long one wait for completions may block. DFS completions arrive as
// callbacks, which EventQueue::Wait does not count as events, so a wait ends
// either when every request finished or at this bound; the loop then hands out
// whatever completed. Short enough that a pipeline of 1 MiB blocks never runs dry.
constexpr auto kWaitSlice = std::chrono::milliseconds(1);

}  // namespace

FileStreamer::FileStreamer(client::Client& client, dfs::Filesystem& fs, std::unique_ptr<client::EventQueue> eq,
                           uint64_t block_size, uint32_t depth)
    : client_(client), fs_(fs), eq_(std::move(eq)), block_size_(block_size), depth_(depth) {
  slots_.reserve(depth_);
}

FileStreamer::~FileStreamer() {
  // A call still in flight keeps its own reference to the registration.
  for (Slot& s : slots_) (void)client_.UnregisterBuffer(s.buffer.data());
}

Result<std::unique_ptr<FileStreamer>> FileStreamer::Create(client::Client& client, dfs::Filesystem& fs,
                                                           const StreamOptions& options) {
  uint64_t block = options.block_size;
  if (block == 0) {
    block = std::max<uint64_t>(fs.chunk_size(), kMinBlock);
    if (fs.chunk_size() > 0) block = (block + fs.chunk_size() - 1) / fs.chunk_size() * fs.chunk_size();
  }
  if (options.depth == 0) return Status::InvalidArgument("fs: the transfer depth must be at least 1");
  ROS2_ASSIGN_OR_RETURN(auto eq, client.CreateEventQueue());
  return std::unique_ptr<FileStreamer>(new FileStreamer(client, fs, std::move(eq), block, options.depth));
}

size_t FileStreamer::TakeSlot() {
  if (free_.empty()) {
    Slot s;
    s.buffer.resize(block_size_);
    // Optional (I/O registers an unregistered buffer per call); a failure
    // here costs nothing. Unregistered when the streamer goes.
    (void)client_.RegisterBuffer(s.buffer.data(), s.buffer.size());
    slots_.push_back(std::move(s));
    return slots_.size() - 1;
  }
  size_t i = free_.back();
  free_.pop_back();
  return i;
}

void FileStreamer::WaitForCompletions() {
  client::Event events[1];
  const size_t before = in_flight_;
  (void)eq_->Poll(events);
  if (in_flight_ != before || in_flight_ == 0) return;
  // TimedOut only means nothing finished within the slice: loop again.
  (void)eq_->Wait(events, 1, kWaitSlice);
}

Status FileStreamer::Write(const dfs::Entry& file, uint64_t size, const ByteSource& source,
                           TransferProgress* progress) {
  Status first_error;
  uint64_t next = 0;
  while (true) {
    while (first_error.ok() && next < size && in_flight_ < depth_) {
      const size_t i = TakeSlot();
      Slot& slot = slots_[i];
      slot.offset = next;
      slot.length = std::min(block_size_, size - next);
      Result<size_t> got = source(next, std::span(slot.buffer).first(slot.length));
      if (!got.ok() || *got != slot.length) {
        first_error = got.ok() ? Status::IOError(fmt::format("the source ended at byte {} of {} (it shrank while "
                                                             "being copied)",
                                                             next + *got, size))
                               : got.status();
        free_.push_back(i);
        break;
      }
      ++in_flight_;
      Status st = fs_.SubmitWrite(*eq_, file, slot.offset, std::span<const std::byte>(slot.buffer).first(slot.length),
                                  [this, i, progress, &first_error](const client::IoResult& r) {
                                    --in_flight_;
                                    free_.push_back(i);
                                    if (!r.status.ok()) {
                                      if (first_error.ok()) first_error = r.status;
                                    } else if (progress != nullptr) {
                                      progress->AddBytes(slots_[i].length);
                                    }
                                  });
      if (!st.ok()) {
        --in_flight_;
        free_.push_back(i);
        first_error = st;
        break;
      }
      next += slot.length;
    }
    if (in_flight_ == 0 && (next >= size || !first_error.ok())) break;
    WaitForCompletions();
  }
  return first_error;
}

Result<uint64_t> FileStreamer::Read(const dfs::Entry& file, uint64_t size, const ByteSink& sink,
                                    TransferProgress* progress) {
  Status first_error;
  std::deque<size_t> order;  // slots in flight or completed, by offset
  uint64_t next = 0, delivered = 0;
  bool at_end = false;
  while (true) {
    while (first_error.ok() && !at_end && next < size && in_flight_ < depth_) {
      const size_t i = TakeSlot();
      Slot& slot = slots_[i];
      slot.offset = next;
      slot.length = std::min(block_size_, size - next);
      slot.done = false;
      ++in_flight_;
      Status st = fs_.SubmitRead(*eq_, file, slot.offset, std::span(slot.buffer).first(slot.length),
                                 [this, i](const client::IoResult& r) {
                                   --in_flight_;
                                   slots_[i].done = true;
                                   slots_[i].result = r;
                                 });
      if (!st.ok()) {
        --in_flight_;
        free_.push_back(i);
        first_error = st;
        break;
      }
      order.push_back(i);
      next += slot.length;
    }
    // Hand completed blocks to the sink in file order.
    while (!order.empty() && slots_[order.front()].done) {
      const size_t i = order.front();
      order.pop_front();
      Slot& slot = slots_[i];
      free_.push_back(i);
      if (!first_error.ok() || at_end) continue;
      if (!slot.result.status.ok()) {
        first_error = slot.result.status;
        continue;
      }
      const uint64_t got = std::min(slot.result.size, slot.length);
      Status st = sink(slot.offset, std::span<const std::byte>(slot.buffer).first(got));
      if (!st.ok()) {
        first_error = st;
        continue;
      }
      delivered += got;
      if (progress != nullptr) progress->AddBytes(got);
      if (got < slot.length) at_end = true;  // the file is shorter than it was
    }
    if (order.empty() && (next >= size || at_end || !first_error.ok())) break;
    WaitForCompletions();
  }
  if (!first_error.ok()) return first_error;
  return delivered;
}

}  // namespace ros2::ctl
