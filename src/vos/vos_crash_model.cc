#include "vos/vos_crash_model.h"

#include <cstring>
#include <random>

namespace ros2::vos::testing {

UpdateOp CrashOp::ToUpdate(Epoch epoch) const {
  UpdateOp op;
  op.oid = oid;
  op.dkey = dkey;
  op.akey = akey;
  op.epoch = epoch;
  op.type = type;
  op.index = index;
  op.record_size = record_size;
  op.data = data;
  return op;
}

CrashOp MakeCrashOp(Epoch epoch) {
  std::mt19937_64 rng(epoch * 0x2545f4914f6cdd1dULL);
  CrashOp op;
  op.oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 1, 1 + rng() % 3);
  op.dkey = "d" + std::to_string(rng() % 4);
  size_t len = 0;
  switch (rng() % 4) {
    case 0:  // a single value, inline or not
      op.akey = "s" + std::to_string(rng() % 3);
      len = rng() % 2 ? rng() % 4000 : 4096 + rng() % (60 << 10);
      break;
    case 1:
    case 2:  // a byte array: overlapping extents of every size
      op.akey = "x";
      op.type = ValueType::kArray;
      len = rng() % 3 == 0 ? 1 + rng() % 4000 : 4096 * (1 + rng() % 16) + (rng() % 2 ? rng() % 4096 : 0);
      op.index = rng() % (1 << 20);
      break;
    default:  // an array of 16-byte records
      op.akey = "r";
      op.type = ValueType::kArray;
      op.record_size = 16;
      len = 16 * (1 + rng() % 4096);
      op.index = rng() % 65536;
      break;
  }
  op.data.resize(len);
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = rng();
    std::memcpy(op.data.data() + i, &v, std::min<size_t>(8, len - i));
  }
  return op;
}

}  // namespace ros2::vos::testing
