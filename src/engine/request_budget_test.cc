// InFlightBudget: per-connection and per-target bounds, and release.
#include "engine/request_budget.h"

#include <gtest/gtest.h>

namespace ros2::engine {
namespace {

TEST(InFlightBudget, BoundsEachConnectionAndTheTarget) {
  EngineLimits limits;
  limits.connection_bytes_in_flight = 100;
  limits.connection_requests_in_flight = 3;
  limits.target_bytes_in_flight = 150;
  limits.target_requests_in_flight = 5;
  InFlightBudget budget(limits);

  ASSERT_TRUE(budget.Reserve(1, 60).ok());
  Status over = budget.Reserve(1, 41);
  EXPECT_EQ(over.code(), Status::Code::kBusy);
  EXPECT_NE(over.message().find("limits.connection_bytes_in_flight"), std::string::npos) << over.ToString();
  ASSERT_TRUE(budget.Reserve(1, 40).ok());
  Status many = budget.Reserve(1, 0);  // a third request fits ...
  ASSERT_TRUE(many.ok()) << many.ToString();
  many = budget.Reserve(1, 0);  // ... a fourth does not
  EXPECT_EQ(many.code(), Status::Code::kBusy);
  EXPECT_NE(many.message().find("limits.connection_requests_in_flight"), std::string::npos) << many.ToString();

  // Another connection has its own budget, within the target's.
  Status target = budget.Reserve(2, 51);
  EXPECT_EQ(target.code(), Status::Code::kBusy);
  EXPECT_NE(target.message().find("limits.target_bytes_in_flight"), std::string::npos) << target.ToString();
  ASSERT_TRUE(budget.Reserve(2, 50).ok());
  Status requests = budget.Reserve(2, 0);
  ASSERT_TRUE(requests.ok());
  requests = budget.Reserve(3, 0);
  EXPECT_EQ(requests.code(), Status::Code::kBusy);
  EXPECT_NE(requests.message().find("limits.target_requests_in_flight"), std::string::npos) << requests.ToString();
  EXPECT_EQ(budget.bytes(), 150u);
  EXPECT_EQ(budget.requests(), 5u);

  // Released requests make room again; an idle connection is forgotten.
  budget.Release(1, 60);
  budget.Release(1, 40);
  budget.Release(1, 0);
  EXPECT_EQ(budget.connection_bytes(1), 0u);
  EXPECT_EQ(budget.connections(), 1u);
  EXPECT_TRUE(budget.Reserve(3, 100).ok());
  EXPECT_EQ(budget.bytes(), 150u);
}

}  // namespace
}  // namespace ros2::engine
