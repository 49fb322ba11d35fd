#include "bench/vos_bench_util.h"

#include <cstring>

#include <fmt/format.h>

namespace ros2::bench {

using Clock = std::chrono::steady_clock;

void MergeRound(CaseStats* total, CaseStats round) {
  total->seconds += round.seconds;
  total->ops += round.ops;
  total->bytes += round.bytes;
  total->lat_us.insert(total->lat_us.end(), round.lat_us.begin(), round.lat_us.end());
}

std::string ChunkKey(uint64_t chunk) {
  return fmt::format("{:012}", chunk);
}

Result<CaseStats> VosCaseRunner::Run(const Shape& shape, double runtime_s, uint64_t max_ops) {
  shape_ = shape;
  const uint64_t blocks = size_ / shape.bs;
  if (blocks == 0) return Status::InvalidArgument("vos bench: size smaller than block size");
  std::uniform_int_distribution<uint64_t> pick(0, blocks - 1);
  slots_.clear();
  free_slots_.clear();
  if (shape.qd <= 0) return Status::InvalidArgument("vos bench: queue depth must be positive");
  const size_t region = static_cast<size_t>(shape.qd) * shape.bs;
  if (memory_.size() != region || memory_.kind() != pages_) {
    memory_ = IoMemory();  // free the old region first: huge pages are counted
    ROS2_ASSIGN_OR_RETURN(memory_, AllocateIoMemory(region, pages_));
  }
  for (int i = 0; i < shape.qd; ++i) {
    slots_.push_back(Slot{memory_.data() + static_cast<size_t>(i) * shape.bs, {}});
    free_slots_.push_back(i);
  }
  stats_ = CaseStats{};
  error_ = Status::Ok();
  need_space_ = false;
  uint64_t cursor = 0, submitted = 0;
  Clock::duration paused{0};
  const auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(runtime_s));
  while (true) {
    const bool time_left = max_ops > 0 ? submitted < max_ops : Clock::now() < deadline;
    while (!free_slots_.empty() && time_left && error_.ok() && !need_space_ && (max_ops == 0 || submitted < max_ops)) {
      uint64_t block = IsRandom(shape.op) ? pick(rng_) : (cursor++ % blocks);
      int slot = free_slots_.back();
      free_slots_.pop_back();
      Submit(slot, block * shape.bs);
      ++submitted;
    }
    if (vos_->in_flight() == 0) {
      if (!error_.ok()) return error_;
      if (!need_space_) {
        if (!time_left || (max_ops > 0 && submitted >= max_ops)) break;
        continue;
      }
      // The extent store is full of overwritten versions: reclaim them untimed.
      auto t0 = Clock::now();
      auto agg = vos_->Aggregate();
      if (!agg.ok()) return agg.status().WithContext("vos bench: aggregate after NoSpace");
      if (agg->bytes_freed == 0) return Status::NoSpace("vos bench: extent store full and aggregation freed nothing");
      need_space_ = false;
      auto pause = Clock::now() - t0;
      paused += pause;
      deadline += pause;
      continue;
    }
    vos_->Progress(/*wait=*/true);
  }
  stats_.seconds = std::chrono::duration<double>(Clock::now() - start - paused).count();
  return std::move(stats_);
}

void VosCaseRunner::Submit(int slot, uint64_t offset) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  const uint64_t chunk = offset / kChunk;
  const uint64_t in_chunk = offset % kChunk;
  s.started = Clock::now();
  const uint64_t bs = shape_.bs;
  if (IsWrite(shape_.op)) {
    vos::UpdateOp op;
    op.oid = oid_;
    op.dkey = ChunkKey(chunk);
    op.akey = std::string(1, '0');  // not = "0": GCC 12 -Wrestrict false positive at -O3
    op.epoch = (*next_epoch_)++;
    op.type = vos::ValueType::kArray;
    op.index = in_chunk / record_size_;
    op.record_size = record_size_;
    op.data = std::span<const std::byte>(s.buf, bs);
    vos_->SubmitUpdate(op, [this, slot, offset](Status st) {
      if (st.IsNoSpace()) {
        need_space_ = true;
        free_slots_.push_back(slot);  // the op did not happen; it is not counted
        return;
      }
      Complete(slot, st.ok() ? st : st.WithContext(fmt::format("update offset {}", offset)));
    });
  } else {
    vos::FetchOp op;
    op.oid = oid_;
    op.dkey = ChunkKey(chunk);
    op.akey = std::string(1, '0');  // not = "0": GCC 12 -Wrestrict false positive at -O3
    op.epoch = kEpochMax;
    op.type = vos::ValueType::kArray;
    op.index = in_chunk / record_size_;
    op.count = bs / record_size_;
    op.record_size = record_size_;
    op.buffer = std::span<std::byte>(s.buf, bs);
    op.caller_verifies = caller_verifies_;
    vos_->SubmitFetch(op, [this, slot, offset](Result<vos::FetchResult> r) {
      Complete(slot, r.ok() ? Status::Ok() : r.status().WithContext(fmt::format("fetch offset {}", offset)));
    });
  }
}

void VosCaseRunner::Complete(int slot, const Status& st) {
  if (!st.ok()) {
    if (error_.ok()) error_ = st;
    return;
  }
  const Slot& s = slots_[static_cast<size_t>(slot)];
  stats_.lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s.started).count());
  stats_.ops++;
  stats_.bytes += shape_.bs;
  free_slots_.push_back(slot);
}

}  // namespace ros2::bench
