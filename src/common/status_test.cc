#include "common/status.h"

#include <gtest/gtest.h>

namespace ros2 {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.ToErrno(), 0);
}

TEST(StatusTest, ErrorsNameKindAndCause) {
  Status s = Status::NotFound("pool 'p1'").WithContext("mgmt: query");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_EQ(s.ToString(), "NotFound: mgmt: query: pool 'p1'");
  EXPECT_EQ(s.ToErrno(), ENOENT);
}

TEST(StatusTest, FromErrnoMapsCommonCodes) {
  EXPECT_TRUE(Status::FromErrno(ENOSPC, "write f").IsNoSpace());
  EXPECT_TRUE(Status::FromErrno(ENOENT, "open f").IsNotFound());
  EXPECT_TRUE(Status::FromErrno(EIO, "read f").IsIOError());
  EXPECT_NE(Status::FromErrno(EIO, "read f").message().find("read f"), std::string::npos);
}

TEST(StatusTest, PosixNamespaceCodesRoundTripThroughErrno) {
  for (int err : {ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP, ENOTEMPTY, EEXIST, ENOENT, EACCES, ENOSPC, EINVAL}) {
    EXPECT_EQ(Status::FromErrno(err, "lookup /a/b").ToErrno(), err) << err;
  }
  EXPECT_EQ(Status::NotDirectory("x").ToErrno(), ENOTDIR);
  EXPECT_EQ(Status::FromCode(static_cast<uint8_t>(Status::kLastCode), "x").code(), Status::kLastCode);
}

TEST(StatusTest, FromCodeRejectsUnknownWireCodes) {
  EXPECT_EQ(Status::FromCode(5, "x").code(), Status::Code::kNoSpace);
  EXPECT_EQ(Status::FromCode(200, "x").code(), Status::Code::kProtocol);
  EXPECT_TRUE(Status::FromCode(0, "ignored").ok());
}

Result<int> Half(int v) {
  if (v % 2 != 0) return Status::InvalidArgument("odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  ROS2_ASSIGN_OR_RETURN(int h, Half(v));
  ROS2_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(ResultTest, PropagatesValuesAndErrors) {
  auto ok = Quarter(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  auto bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument());
}

TEST(ResultTest, OkStatusIsNotAValue) {
  Result<int> r(Status::Ok());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInternal);
}

}  // namespace
}  // namespace ros2
