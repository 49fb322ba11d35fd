// Conversions of control-plane records to ros2ctl's two output forms: JSON
// objects with snake_case keys and plain numbers (for scripts), and short human
// lines. Free functions; no state.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ros2/common.pb.h"
#include "ros2/mgmt.pb.h"

namespace ros2::ctl {

nlohmann::json AclToJson(const google::protobuf::RepeatedPtrField<rpc::AclEntry>& acl);
nlohmann::json PoolToJson(const rpc::PoolInfo& pool);
nlohmann::json ContainerToJson(const rpc::ContainerInfo& cont);
nlohmann::json EngineStatusToJson(const rpc::EngineStatus& status);

std::string AclToText(const google::protobuf::RepeatedPtrField<rpc::AclEntry>& acl, const std::string& indent);
std::string PoolToText(const rpc::PoolInfo& pool);
std::string ContainerToText(const rpc::ContainerInfo& cont);
std::string EngineStatusToText(const rpc::EngineStatus& status);
std::string TargetStateText(rpc::TargetState state);

// A pool's rebuild (rebuild_commands.cc): state, objects and bytes done of the
// total, rate, ETA; the text is indented lines for `pool query`.
nlohmann::json RebuildToJson(const rpc::RebuildStatus& rebuild);
std::string RebuildToText(const rpc::RebuildStatus& rebuild);
// "[#####.....]  42% 1.2 GiB of 2.9 GiB, 120 MiB/s, ETA 14 s" (width: the bar's cells).
std::string RebuildProgressLine(const rpc::RebuildStatus& rebuild, int width);

// A fixed-width table: a header row and rows of cells.
std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace ros2::ctl
