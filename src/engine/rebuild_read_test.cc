// The bounds of a rebuild read's request (RebuildReadLengths): what a peer
// that holds the engines' forward key could still send wrong.
#include <gtest/gtest.h>

#include <string>

#include "engine/rebuild_source.h"

namespace ros2::engine {
namespace {

rpc::RebuildReadExtent Extent(uint64_t count, uint32_t record_size) {
  rpc::RebuildReadExtent e;
  e.set_oid(std::string(16, '\1'));
  e.set_dkey("d");
  e.set_akey("a");
  e.set_count(count);
  e.set_record_size(record_size);
  return e;
}

TEST(RebuildReadTest, LengthsOfWellFormedExtents) {
  rpc::RebuildReadRequest m;
  *m.add_extents() = Extent(4, 4096);
  *m.add_extents() = Extent(100, 1);
  auto lengths = RebuildReadLengths(m, 0);
  ASSERT_TRUE(lengths.ok()) << lengths.status().ToString();
  EXPECT_EQ(*lengths, (std::vector<uint64_t>{16384, 100}));
}

TEST(RebuildReadTest, MalformedExtentsAndOversizeReadsAreRefusedByName) {
  auto refused = [](const rpc::RebuildReadRequest& m, const std::string& named) {
    auto r = RebuildReadLengths(m, 3);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
    EXPECT_NE(r.status().message().find(named), std::string::npos) << r.status().message();
  };
  rpc::RebuildReadRequest base;
  *base.add_extents() = Extent(1, 1);
  auto second = [&](auto&& change) {
    rpc::RebuildReadRequest m = base;
    rpc::RebuildReadExtent* e = m.add_extents();
    *e = Extent(1, 1);
    change(e);
    return m;
  };
  refused(second([](auto* e) { e->set_oid(std::string(15, '\1')); }), "extent 1 is malformed");
  refused(second([](auto* e) { e->clear_dkey(); }), "extent 1 is malformed");
  refused(second([](auto* e) { e->clear_akey(); }), "extent 1 is malformed");
  refused(second([](auto* e) { e->set_count(0); }), "extent 1 is malformed");
  refused(second([](auto* e) { e->set_record_size(0); }), "extent 1 is malformed");
  // A product that wraps: count * record_size past 2^64.
  refused(second([](auto* e) {
            e->set_count(uint64_t{1} << 40);
            e->set_record_size(1u << 30);
          }),
          "extent 1 is malformed");
  // Each extent within the bound, the sum over it.
  rpc::RebuildReadRequest many;
  for (int i = 0; i < 3; ++i) *many.add_extents() = Extent(kMaxRebuildReadBytes / 2, 1);
  refused(many, "rebuild read of more than");
}

}  // namespace
}  // namespace ros2::engine
