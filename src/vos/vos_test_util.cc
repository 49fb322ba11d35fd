#include "vos/vos_test_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

namespace ros2::vos::testing {

bool EditWhere(const std::string& path, std::span<const std::byte> needle, size_t at, size_t len,
               const std::function<void(std::span<std::byte>)>& edit) {
  std::ifstream in(path, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t pos = content.find(std::string_view(reinterpret_cast<const char*>(needle.data()), needle.size()));
  if (pos == std::string::npos || pos + at > content.size() || len > content.size() - pos - at) return false;
  std::vector<std::byte> bytes(len);
  std::memcpy(bytes.data(), content.data() + pos + at, len);
  edit(bytes);
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) return false;
  bool ok =
      ::pwrite(fd, bytes.data(), len, static_cast<off_t>(pos + at)) == static_cast<ssize_t>(len) && ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

VosOptions SmallOptions(const std::string& dir, StorageClass cls) {
  VosOptions o;
  o.path = dir + "/store";
  o.storage_class = cls;
  o.data_size = 64ull << 20;
  o.io_depth = 64;
  return o;
}

ObjectId TestOid(uint64_t n) {
  return ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 7, n);
}

UpdateOp SingleUpdate(const ObjectId& oid, const std::string& dkey, const std::string& akey, Epoch epoch,
                      std::span<const std::byte> data) {
  UpdateOp op;
  op.oid = oid;
  op.dkey = dkey;
  op.akey = akey;
  op.epoch = epoch;
  op.type = ValueType::kSingle;
  op.data = data;
  return op;
}

Status PutSingle(Vos* vos, const ObjectId& oid, const std::string& dkey, const std::string& akey, Epoch epoch,
                 const std::vector<std::byte>& data) {
  return vos->Update(SingleUpdate(oid, dkey, akey, epoch, data));
}

void WarmDataFile(Vos* vos, uint64_t bytes) {
  ASSERT_TRUE(PutArray(vos, TestOid(99), "warm", "a", 1, 0, 1, Pattern(bytes, 99)).ok());
  ASSERT_TRUE(vos->PunchObject(TestOid(99), 2).ok());
  ASSERT_TRUE(vos->Aggregate(kEpochMax).ok());
  ASSERT_EQ(vos->Space().data_used, 0u);
}

Status PutArray(Vos* vos, const ObjectId& oid, const std::string& dkey, const std::string& akey, Epoch epoch,
                uint64_t index, uint32_t record_size, const std::vector<std::byte>& data) {
  UpdateOp op;
  op.oid = oid;
  op.dkey = dkey;
  op.akey = akey;
  op.epoch = epoch;
  op.type = ValueType::kArray;
  op.index = index;
  op.record_size = record_size;
  op.data = data;
  return vos->Update(op);
}

Result<std::vector<std::byte>> GetSingle(Vos* vos, const ObjectId& oid, const std::string& dkey,
                                         const std::string& akey, Epoch epoch, size_t capacity) {
  std::vector<std::byte> buf(capacity);
  FetchOp op;
  op.oid = oid;
  op.dkey = dkey;
  op.akey = akey;
  op.epoch = epoch;
  op.type = ValueType::kSingle;
  op.buffer = buf;
  auto r = vos->Fetch(op);
  if (!r.ok()) return r.status();
  buf.resize(std::min<size_t>(r->size, capacity));
  return buf;
}

Result<std::vector<std::byte>> GetArray(Vos* vos, const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                        Epoch epoch, uint64_t index, uint64_t count, uint32_t record_size) {
  std::vector<std::byte> buf(count * record_size);
  FetchOp op;
  op.oid = oid;
  op.dkey = dkey;
  op.akey = akey;
  op.epoch = epoch;
  op.type = ValueType::kArray;
  op.index = index;
  op.count = count;
  op.record_size = record_size;
  op.buffer = buf;
  auto r = vos->Fetch(op);
  if (!r.ok()) return r.status();
  if (r->size != buf.size()) return Status::Internal("fetch size differs from the buffer");
  return buf;
}

}  // namespace ros2::vos::testing
