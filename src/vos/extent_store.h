// ExtentStore: the bytes of the VOS's large extents.
//
// Two kinds, chosen by the storage class: NvmeExtentStore (a data file grown on
// demand with fallocate, or a block device; O_DIRECT reads and writes through
// io_uring) and RamExtentStore (an anonymous memory mapping). Callers address it by byte
// offset; the nvme kind requires offsets, lengths and buffer addresses to be
// multiples of kBlockSize (4 KiB) when the file is O_DIRECT (alignment()).
// Reads and writes are asynchronous: their callbacks run from Reap() on the
// target thread. Short transfers are continued until complete; failures are
// reported as a Status (NoSpace for ENOSPC, IOError otherwise). Sync() makes
// written data durable and may be called from the VOS commit thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "vos/env.h"

namespace ros2::vos {

class ExtentStore {
 public:
  using IoDone = std::function<void(Status)>;
  virtual ~ExtentStore() = default;

  // Opens `path` (a data file, created empty when missing, whose address space
  // is `size` bytes — or its current size if larger — and which Reserve grows;
  // or a block device of min(its size, `size`) bytes). Completions signal `event_fd` when >= 0.
  // With `dsync_writes`, every write is issued with RWF_DSYNC: it completes
  // only once its data is on stable storage (FUA, or a flush by the kernel).
  static Result<std::unique_ptr<ExtentStore>> OpenNvme(Env* env, const std::string& path, bool block_device,
                                                       uint64_t size, unsigned io_depth, int event_fd,
                                                       bool dsync_writes);
  static Result<std::unique_ptr<ExtentStore>> OpenRam(uint64_t size);

  // Queue an I/O. Small ones may reach the kernel only at the next Flush or
  // WaitForCompletion (the VOS's Progress pass does both).
  virtual void SubmitWrite(uint64_t offset, std::span<const std::byte> data, IoDone done) = 0;
  virtual void SubmitRead(uint64_t offset, std::span<std::byte> buf, IoDone done) = 0;
  // Runs the callbacks of completed I/O; returns how many ran.
  virtual int Reap() = 0;
  // Hands queued I/O to the kernel (one system call for the batch).
  virtual void Flush() = 0;
  // I/O queued and not yet handed to the kernel.
  virtual size_t queued() const = 0;
  // Flushes and blocks until at least one I/O has completed (returns at once when none is in flight).
  virtual void WaitForCompletion() = 0;
  // Makes completed writes durable (fdatasync). Thread-safe.
  virtual Status Sync() = 0;
  // True when every completed write is already durable (RWF_DSYNC).
  virtual bool writes_are_durable() const = 0;

  // Makes [0, end) writable before an extent there is written: grows a data
  // file with fallocate (never writing zeros). NoSpace when `end` is beyond
  // capacity() or the file system is full (then nothing changed).
  virtual Status Reserve(uint64_t end) = 0;
  // True when space Reserve allocated is "unwritten" until first written
  // (ext4 and XFS): the first write of a block changes file metadata, which
  // only an fdatasync of the file makes durable (docs/vos.md, "Durability").
  virtual bool fresh_space_needs_sync() const = 0;
  // Bytes the file holds allocated (data file: grown so far; others: capacity).
  virtual uint64_t file_size() const = 0;
  // The address space extents are placed in.
  virtual uint64_t capacity() const = 0;
  virtual size_t alignment() const = 0;  // required alignment of offsets, lengths and buffers
  virtual size_t in_flight() const = 0;
  // The io_uring's submitting calls and SQEs so far (0 without a ring).
  virtual uint64_t uring_submits() const { return 0; }
  virtual uint64_t uring_sqes() const { return 0; }
};

}  // namespace ros2::vos
