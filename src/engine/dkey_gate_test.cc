// DkeyGate's keys (dkey_gate.h): the read rule holds a listing of an object
// while its ordered maps of dkey keys (ReplicaState::unsettled, resolving)
// have any key of that object, found with one lower_bound on the object's
// key. That needs every dkey key of an object to start with the object's key
// and to sort apart from other objects' keys.
#include "engine/dkey_gate.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ros2::engine {
namespace {

TEST(DkeyGateTest, AnObjectsDkeyKeysStartWithItsKeyAndSortTogether) {
  const Uuid pool = Uuid::FromBytes({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  const Uuid cont = Uuid::FromBytes({16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  const ObjectId a{0x100, 7};
  const ObjectId b{0x100, 8};
  const std::string object = DkeyGate::ObjectKey(pool, cont, a);
  ASSERT_EQ(object.size(), DkeyGate::kObjectKeySize);
  std::map<std::string, int, std::less<>> keys;
  for (const char* dkey : {"\x01", "k0", "zzzz", "\xff\xff"}) {
    const std::string k = DkeyGate::Key(pool, cont, a, dkey);
    EXPECT_EQ(DkeyGate::ObjectOf(k), object) << dkey;
    EXPECT_NE(k, object) << "a dkey's key equals its object's";
    keys[k] = 1;
    keys[DkeyGate::Key(pool, cont, b, dkey)] = 2;
  }
  // Object a's keys are contiguous from lower_bound(object a), then b's.
  auto it = keys.lower_bound(std::string_view(object));
  for (int i = 0; i < 4; ++i, ++it) {
    ASSERT_NE(it, keys.end());
    EXPECT_EQ(it->second, 1) << "key " << i << " after object a's key is not a's";
  }
  ASSERT_NE(it, keys.end());
  EXPECT_EQ(it->second, 2);
  EXPECT_NE(DkeyGate::ObjectOf(it->first), object);
}

}  // namespace
}  // namespace ros2::engine
