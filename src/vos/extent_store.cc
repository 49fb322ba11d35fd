#include "vos/extent_store.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/io_stages.h"
#include "vos/aligned_buffer.h"
#include "vos/uring.h"

namespace ros2::vos {
namespace {

Status ErrnoStatus(int err, IoKind kind, uint64_t offset, size_t len, const std::string& path) {
  return Status::FromErrno(
      err, fmt::format("vos: {} of {} bytes at {} in {}", kind == IoKind::kRead ? "read" : "write", len, offset, path));
}

// Creates the data file empty: it grows on demand (Reserve, fallocate) as
// extents are allocated, so a shard takes disk space for what it holds, not
// for its address space, and nothing is written at creation. The directory is
// synced so the file survives a crash.
Status CreateDataFile(Env* env, const std::string& path) {
  const std::string dir = path.substr(0, path.find_last_of('/'));
  auto file = env->OpenFile(path, FileOptions{.create = true, .direct = true});
  if (!file.ok()) return file.status().WithContext("creating the data file");
  return env->SyncDir(dir.empty() ? "." : dir);
}

// How much a growing data file is extended at a time: an eighth of its size,
// between 1 and 64 MiB (one fallocate per that much data written, and at most
// that much allocated ahead of the extents).
uint64_t GrowthStep(uint64_t file_size) {
  return std::clamp<uint64_t>(AlignDown(file_size / 8, kBlockSize), uint64_t{1} << 20, uint64_t{64} << 20);
}

// I/O of at least this size is handed to the kernel when it is submitted;
// smaller I/O waits for the owner's next pass (NvmeExtentStore::Start).
constexpr size_t kSubmitAtOnce = 64 << 10;

class NvmeExtentStore final : public ExtentStore {
 public:
  NvmeExtentStore(std::string path, std::unique_ptr<File> file, std::unique_ptr<Uring> ring, uint64_t capacity,
                  bool dsync_writes, bool growable, uint64_t file_size)
      : path_(std::move(path)),
        file_(std::move(file)),
        ring_(std::move(ring)),
        capacity_(capacity),
        dsync_writes_(dsync_writes),
        growable_(growable),
        file_size_(file_size) {}

  ~NvmeExtentStore() override {
    // Every slot references caller buffers; wait for the kernel to let go of them.
    while (in_flight_ > 0) WaitForCompletion(), Reap();
  }

  void SubmitWrite(uint64_t offset, std::span<const std::byte> data, IoDone done) override {
    Start(IoKind::kWrite, offset, const_cast<std::byte*>(data.data()), data.size(), std::move(done));
  }
  void SubmitRead(uint64_t offset, std::span<std::byte> buf, IoDone done) override {
    Start(IoKind::kRead, offset, buf.data(), buf.size(), std::move(done));
  }

  int Reap() override {
    int ran = 0;
    // The batch's vector is the member's, kept between calls (no allocation
    // per reap); taken out while the callbacks run, which may reap again.
    std::vector<std::pair<Slot*, int>> completed;
    completed.swap(reaped_);
    while (true) {
      completed.clear();
      ring_->Reap(
          [&](uint64_t user_data, int res) { completed.emplace_back(reinterpret_cast<Slot*>(user_data), res); });
      if (!failed_.empty()) {
        for (Slot* s : failed_) completed.emplace_back(s, -EBUSY);
        failed_.clear();
      }
      if (completed.empty()) break;
      io_stages::StageSet* stages = io_stages::t_current;
      if (stages != nullptr) Reaped(*stages, completed);
      for (auto [slot, res] : completed) ran += Complete(slot, res);
      if (stages != nullptr) stages->last_reaped = 0;
    }
    if (completed.capacity() > reaped_.capacity()) reaped_.swap(completed);
    return ran;
  }

  void Flush() override {
    if (ring_->queued() == 0) return;
    if (io_stages::t_current != nullptr) Entering(*io_stages::t_current);
    ring_->Submit();
  }
  size_t queued() const override { return ring_->queued(); }

  void WaitForCompletion() override {
    if (in_flight_ == 0 || !failed_.empty()) {
      Flush();
      return;
    }
    if (io_stages::t_current != nullptr && ring_->queued() > 0) Entering(*io_stages::t_current);
    ring_->SubmitAndWait(1);
  }

  Status Sync() override { return file_->Sync(); }
  bool writes_are_durable() const override { return dsync_writes_; }

  Status Reserve(uint64_t end) override {
    if (end > capacity_) {
      return Status::NoSpace(fmt::format("vos: {}: {} bytes exceed the extent store's {}", path_, end, capacity_));
    }
    if (!growable_ || end <= file_size_) return Status::Ok();
    const uint64_t target =
        std::min(capacity_, std::max(AlignUp(end, kBlockSize), file_size_ + GrowthStep(file_size_)));
    Status st = file_->Allocate(file_size_, target - file_size_);
    if (!st.ok() && target > end) {
      // No room for the step ahead: take what this extent needs, if that fits.
      st = file_->Allocate(file_size_, AlignUp(end, kBlockSize) - file_size_);
      if (st.ok()) file_size_ = AlignUp(end, kBlockSize);
    } else if (st.ok()) {
      file_size_ = target;
    }
    return st.WithContext("growing the data file");
  }
  bool fresh_space_needs_sync() const override { return growable_; }
  uint64_t file_size() const override { return file_size_; }
  uint64_t capacity() const override { return capacity_; }
  size_t alignment() const override { return file_->direct() ? kBlockSize : 1; }
  size_t in_flight() const override { return in_flight_; }
  uint64_t uring_submits() const override { return ring_->submits(); }
  uint64_t uring_sqes() const override { return ring_->submitted(); }

 private:
  struct Slot {
    IoKind kind;
    uint64_t offset;
    std::byte* buf;
    size_t len;
    size_t done_bytes;
    IoDone done;
    uint64_t queued_ns = 0;   // io_stages: queued on the ring (0: not timed)
    uint64_t entered_ns = 0;  // io_stages: handed to the kernel
  };

  // io_stages: the I/Os the kernel holds over time, up to `now`.
  void Integrate(io_stages::StageSet& stages, uint64_t now) {
    const size_t waiting = ring_->queued() + failed_.size();
    const size_t in_kernel = in_flight_ > waiting ? in_flight_ - waiting : 0;
    if (last_tick_ns_ != 0 && now > last_tick_ns_) stages.Integrate(in_kernel * (now - last_tick_ns_));
    last_tick_ns_ = now;
  }
  // io_stages: the queued reads are about to enter the kernel.
  void Entering(io_stages::StageSet& stages) {
    const uint64_t now = io_stages::NowNs();
    Integrate(stages, now);
    for (Slot* s : unsent_) {
      if (s->queued_ns == 0 || s->entered_ns != 0) continue;  // failed without an SQE, or counted
      stages.Add(io_stages::kSubmit, s->queued_ns, now);
      s->entered_ns = now;
    }
    unsent_.clear();
  }
  // io_stages: completions reaped now.
  void Reaped(io_stages::StageSet& stages, const std::vector<std::pair<Slot*, int>>& completed) {
    const uint64_t now = io_stages::NowNs();
    Integrate(stages, now);
    for (auto [slot, res] : completed) {
      if (slot->entered_ns != 0) stages.Add(io_stages::kDevice, slot->entered_ns, now);
      slot->queued_ns = slot->entered_ns = 0;
    }
    stages.last_reaped = now;
  }

  void Start(IoKind kind, uint64_t offset, std::byte* buf, size_t len, IoDone done) {
    Slot* slot = AcquireSlot();
    *slot = Slot{kind, offset, buf, len, 0, std::move(done)};
    ++in_flight_;
    if (io_stages::StageSet* stages = io_stages::t_current; stages != nullptr && kind == IoKind::kRead) {
      slot->queued_ns = io_stages::NowNs();
      if (stages->read_handled != 0) stages->Add(io_stages::kLookup, stages->read_handled, slot->queued_ns);
      stages->read_handled = 0;
      unsent_.push_back(slot);
    }
    Queue(slot);
    // A small I/O waits for the owner's next Progress() pass (or
    // WaitForCompletion), which hands everything queued since the last one to
    // the kernel in one system call: on a virtio disk every io_uring_enter
    // that carries I/O also notifies the device, a VM exit dearer than a 4 KiB
    // transfer. A large one goes at once, so that the update's checksum pass
    // (run after SubmitWrite returns) overlaps the device's write.
    if (len >= kSubmitAtOnce) Flush();
  }

  void Queue(Slot* slot) {
    io_uring_sqe* sqe = ring_->GetSqe();
    if (sqe == nullptr) {
      failed_.push_back(slot);  // completed with EBUSY from Reap
      return;
    }
    int fd = ring_->fixed_file() ? 0 : file_->fd();
    std::byte* p = slot->buf + slot->done_bytes;
    unsigned n = static_cast<unsigned>(slot->len - slot->done_bytes);
    uint64_t off = slot->offset + slot->done_bytes;
    if (slot->kind == IoKind::kRead) {
      io_uring_prep_read(sqe, fd, p, n, off);
    } else {
      io_uring_prep_write(sqe, fd, p, n, off);
      if (dsync_writes_) sqe->rw_flags = RWF_DSYNC;
    }
    if (ring_->fixed_file()) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(slot));
  }

  // Returns 1 when the slot's callback ran, 0 when the I/O continues.
  int Complete(Slot* slot, int res) {
    size_t remaining = slot->len - slot->done_bytes;
    res = file_->FilterAsyncResult(slot->kind, slot->offset + slot->done_bytes, remaining, res);
    Status st;
    if (res < 0) {
      st = ErrnoStatus(-res, slot->kind, slot->offset, slot->len, path_);
    } else if (res == 0 && remaining > 0) {
      st = Status::IOError(fmt::format("vos: {} of {} bytes at {} in {} made no progress",
                                       slot->kind == IoKind::kRead ? "read" : "write", slot->len, slot->offset, path_));
    } else {
      slot->done_bytes += static_cast<size_t>(res);
      if (slot->done_bytes < slot->len) {
        Queue(slot);  // a short transfer: continue with the rest
        return 0;
      }
    }
    IoDone done = std::move(slot->done);
    ReleaseSlot(slot);
    --in_flight_;
    done(std::move(st));
    return 1;
  }

  Slot* AcquireSlot() {
    if (free_slots_.empty()) {
      slots_.push_back(std::make_unique<Slot>());
      return slots_.back().get();
    }
    Slot* s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  void ReleaseSlot(Slot* s) {
    s->done = nullptr;
    free_slots_.push_back(s);
  }

  std::string path_;
  std::unique_ptr<File> file_;
  std::unique_ptr<Uring> ring_;
  uint64_t capacity_;
  bool dsync_writes_;
  bool growable_;       // a data file grown by Reserve (not a block device)
  uint64_t file_size_;  // growable: bytes allocated to the file so far
  size_t in_flight_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> free_slots_;
  std::vector<Slot*> failed_;  // could not get an SQE
  std::vector<std::pair<Slot*, int>> reaped_;  // Reap's batch, kept for its capacity
  std::vector<Slot*> unsent_;  // io_stages: timed reads queued and not yet handed to the kernel
  uint64_t last_tick_ns_ = 0;  // io_stages: Integrate's last time
};

// Anonymous memory, pages committed on first touch. I/O is a memcpy whose
// callback is deferred to Reap so that the ram class keeps the async contract.
class RamExtentStore final : public ExtentStore {
 public:
  RamExtentStore(std::byte* base, uint64_t size) : base_(base), size_(size) {}
  ~RamExtentStore() override { ::munmap(base_, size_); }
  RamExtentStore(const RamExtentStore&) = delete;
  RamExtentStore& operator=(const RamExtentStore&) = delete;

  void SubmitWrite(uint64_t offset, std::span<const std::byte> data, IoDone done) override {
    Status st = Check(offset, data.size());
    if (st.ok()) std::memcpy(base_ + offset, data.data(), data.size());
    completed_.emplace_back(std::move(done), std::move(st));
  }
  void SubmitRead(uint64_t offset, std::span<std::byte> buf, IoDone done) override {
    if (io_stages::StageSet* stages = io_stages::t_current; stages != nullptr && stages->read_handled != 0) {
      stages->Add(io_stages::kLookup, stages->read_handled, io_stages::NowNs());
      stages->read_handled = 0;
    }
    Status st = Check(offset, buf.size());
    if (st.ok()) std::memcpy(buf.data(), base_ + offset, buf.size());
    completed_.emplace_back(std::move(done), std::move(st));
  }
  int Reap() override {
    int ran = 0;
    while (!completed_.empty()) {
      std::vector<std::pair<IoDone, Status>> batch;
      batch.swap(completed_);
      io_stages::StageSet* stages = io_stages::t_current;
      if (stages != nullptr) stages->last_reaped = io_stages::NowNs();
      for (auto& [done, st] : batch) {
        done(std::move(st));
        ++ran;
      }
      if (stages != nullptr) stages->last_reaped = 0;
    }
    return ran;
  }
  void Flush() override {}
  size_t queued() const override { return 0; }
  void WaitForCompletion() override {}
  Status Sync() override { return Status::Ok(); }
  bool writes_are_durable() const override { return false; }
  Status Reserve(uint64_t end) override {
    if (end > size_) return Status::NoSpace(fmt::format("vos: {} bytes exceed the ram extent store's {}", end, size_));
    return Status::Ok();
  }
  bool fresh_space_needs_sync() const override { return false; }
  uint64_t file_size() const override { return size_; }
  uint64_t capacity() const override { return size_; }
  size_t alignment() const override { return 1; }
  size_t in_flight() const override { return completed_.size(); }

 private:
  Status Check(uint64_t offset, size_t len) const {
    if (offset > size_ || len > size_ - offset) {
      return Status::IOError(fmt::format("vos: ram extent I/O [{}, +{}) beyond {} bytes", offset, len, size_));
    }
    return Status::Ok();
  }
  std::byte* base_;
  uint64_t size_;
  std::vector<std::pair<IoDone, Status>> completed_;
};

}  // namespace

Result<std::unique_ptr<ExtentStore>> ExtentStore::OpenNvme(Env* env, const std::string& path, bool block_device,
                                                           uint64_t size, unsigned io_depth, int event_fd,
                                                           bool dsync_writes) {
  if (!block_device && !env->FileExists(path)) ROS2_RETURN_IF_ERROR(CreateDataFile(env, path));
  auto file = env->OpenFile(path, FileOptions{.create = false, .direct = true, .block_device = block_device});
  if (!file.ok()) return file.status();
  auto file_size = (*file)->Size();
  if (!file_size.ok()) return file_size.status();
  // A data file's capacity is its address space: `size`, or more when an
  // older store's file was created larger. It grows into it on demand.
  uint64_t capacity = AlignDown(block_device ? std::min(*file_size, size) : std::max(*file_size, size), kBlockSize);
  if (capacity == 0) return Status::InvalidArgument(fmt::format("vos: extent store {} has no space", path));
  auto ring = Uring::Create(io_depth, event_fd);
  if (!ring.ok()) return ring.status();
  if ((*file)->fd() >= 0) ROS2_RETURN_IF_ERROR((*ring)->RegisterFile((*file)->fd()));
  return std::unique_ptr<ExtentStore>(std::make_unique<NvmeExtentStore>(
      path, std::move(*file), std::move(*ring), capacity, dsync_writes, /*growable=*/!block_device,
      block_device ? capacity : AlignDown(*file_size, kBlockSize)));
}

Result<std::unique_ptr<ExtentStore>> ExtentStore::OpenRam(uint64_t size) {
  size = AlignUp(size, kBlockSize);
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Status::FromErrno(errno, fmt::format("vos: mmap {} bytes for the ram extent store", size));
  // Transparent huge pages where the system offers them on request (here
  // THP is "madvise"): every fetch and update is a memcpy over this mapping,
  // and 2 MiB pages spare a page walk per 4 KiB of it (ros2-bench obj, ram
  // class, 1 MiB reads: +15% for VOS alone and through the engine alike).
  // Advice only: refused or unsupported, the store works on 4 KiB pages.
  (void)::madvise(p, size, MADV_HUGEPAGE);
  return std::unique_ptr<ExtentStore>(std::make_unique<RamExtentStore>(static_cast<std::byte*>(p), size));
}

}  // namespace ros2::vos
