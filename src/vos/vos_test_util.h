// Helpers shared by the VOS tests: short-hand update/fetch calls and file
// damage, beside the temporary directory and data pattern of every test
// (src/testing). Test code only.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "testing/pattern.h"
#include "testing/temp_dir.h"
#include "vos/vos.h"

namespace ros2::vos::testing {

// The tests' one temporary directory and data pattern (src/testing).
using ros2::testing::Pattern;
using ros2::testing::TempDir;

// Finds the first occurrence of `needle` in the file at `path`, hands `len`
// bytes starting `at` bytes after its start to `edit`, and writes them back
// (fsynced): how the tests damage a store's files. False when the needle is
// not there or the file cannot be rewritten.
bool EditWhere(const std::string& path, std::span<const std::byte> needle, size_t at, size_t len,
               const std::function<void(std::span<std::byte>)>& edit);

// Options for a small store in `dir`: 64 MiB data file, defaults otherwise.
VosOptions SmallOptions(const std::string& dir, StorageClass cls = StorageClass::kNvme);

ObjectId TestOid(uint64_t n);

// A single-value update of `data` (which must outlive it).
UpdateOp SingleUpdate(const ObjectId& oid, const std::string& dkey, const std::string& akey, Epoch epoch,
                      std::span<const std::byte> data);
Status PutSingle(Vos* vos, const ObjectId& oid, const std::string& dkey, const std::string& akey, Epoch epoch,
                 const std::vector<std::byte>& data);
Status PutArray(Vos* vos, const ObjectId& oid, const std::string& dkey, const std::string& akey, Epoch epoch,
                uint64_t index, uint32_t record_size, const std::vector<std::byte>& data);
// Fetches a single value with a buffer of `capacity` bytes; the result is resized to the value size.
Result<std::vector<std::byte>> GetSingle(Vos* vos, const ObjectId& oid, const std::string& dkey,
                                         const std::string& akey, Epoch epoch, size_t capacity = 1 << 22);
Result<std::vector<std::byte>> GetArray(Vos* vos, const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                        Epoch epoch, uint64_t index, uint64_t count, uint32_t record_size);

// Writes and reclaims `bytes` of filler, so that the first `bytes` of the
// data file have been written: extents placed there ride on the WAL sync,
// while never-written space of the growing file makes its group fdatasync the
// data file (docs/vos.md, "Durability"). Leaves the store's data space empty.
void WarmDataFile(Vos* vos, uint64_t bytes);

}  // namespace ros2::vos::testing
