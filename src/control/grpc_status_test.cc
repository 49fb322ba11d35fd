// ros2::Status <-> grpc::Status: every code maps to the expected gRPC code and
// back exactly; statuses from plain gRPC map by their code.
#include "control/grpc_status.h"

#include <gtest/gtest.h>

namespace ros2::control {
namespace {

TEST(GrpcStatusTest, EveryCodeRoundTrips) {
  for (uint8_t c = 1; c <= static_cast<uint8_t>(Status::kLastCode); ++c) {
    Status s = Status::FromCode(c, "message " + std::to_string(c));
    grpc::Status g = ToGrpcStatus(s);
    EXPECT_FALSE(g.ok());
    EXPECT_EQ(g.error_message(), s.message());
    EXPECT_EQ(FromGrpcStatus(g), s) << s.ToString();
  }
  EXPECT_TRUE(ToGrpcStatus(Status::Ok()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, CodesMapToTheNaturalGrpcCodes) {
  EXPECT_EQ(ToGrpcStatus(Status::NotFound("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(Status::InvalidArgument("x")).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(Status::AlreadyExists("x")).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(ToGrpcStatus(Status::PermissionDenied("x")).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ToGrpcStatus(Status::Unauthenticated("x")).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ToGrpcStatus(Status::NoSpace("x")).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST(GrpcStatusTest, ForeignStatusesMapByCodeAndNameTheCall) {
  Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), "Management.ListPools");
  EXPECT_EQ(s.code(), Status::Code::kDisconnected);
  EXPECT_EQ(s.message(), "Management.ListPools: connection refused");
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "late")).code(), Status::Code::kTimedOut);
  // Garbage details fall back to the gRPC code.
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "x", "ros2:abc")).code(), Status::Code::kNotFound);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "x", "ros2:99")).code(), Status::Code::kProtocol);
}

}  // namespace
}  // namespace ros2::control
