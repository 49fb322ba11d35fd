#include "common/uuid.h"

#include <gtest/gtest.h>

namespace ros2 {
namespace {

TEST(UuidTest, RoundTripsThroughText) {
  Uuid u = Uuid::Generate();
  EXPECT_FALSE(u.IsNil());
  auto parsed = Uuid::Parse(u.ToString());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, u);
  EXPECT_EQ(u.ToString()[14], '4');  // version 4
}

TEST(UuidTest, RejectsMalformedText) {
  EXPECT_FALSE(Uuid::Parse("not-a-uuid").ok());
  EXPECT_FALSE(Uuid::Parse("zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz").ok());
  EXPECT_FALSE(Uuid::Parse("12345678+1234-1234-1234-123456789abc").ok());
}

TEST(UuidTest, GeneratedAreDistinct) { EXPECT_NE(Uuid::Generate(), Uuid::Generate()); }

}  // namespace
}  // namespace ros2
