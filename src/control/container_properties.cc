#include "control/container_properties.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "common/config.h"
#include "common/object_id.h"

namespace ros2::control {
namespace {

Result<bool> ParseOnOff(const std::string& key, const std::string& value) {
  if (value == "on" || value == "true" || value == "yes" || value == "1") return true;
  if (value == "off" || value == "false" || value == "no" || value == "0") return false;
  return Status::InvalidArgument(fmt::format("container property {}='{}': expected on or off", key, value));
}

// encryption: the cipher of file data ("on" is an alias of the only one).
Result<bool> ParseEncryption(const std::string& value) {
  if (value == "aes-256-gcm" || value == "AES-256-GCM" || value == "on") return true;
  if (value == "off" || value == "none") return false;
  return Status::InvalidArgument(fmt::format("container property encryption='{}': expected aes-256-gcm or off", value));
}

// A key id is a name, never key material: 1 to 128 of [A-Za-z0-9._:-].
Status CheckKeyId(const std::string& value) {
  const bool ok = !value.empty() && value.size() <= 128 && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == ':';
  });
  if (ok) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "container property encryption_key_id='{}': expected a name of 1 to 128 letters, digits, '.', '_', '-', ':'",
      value));
}

}  // namespace

rpc::ContainerProperties DefaultContainerProperties() {
  rpc::ContainerProperties p;
  p.set_object_class("SX");
  p.set_checksum(true);
  p.set_chunk_size(kDefaultChunkSize);
  p.set_encryption(false);
  p.set_layout(rpc::LAYOUT_POSIX);
  return p;
}

Result<rpc::ContainerProperties> ParseContainerProperties(const std::map<std::string, std::string>& props) {
  rpc::ContainerProperties p = DefaultContainerProperties();
  for (const auto& [key, value] : props) {
    if (key == "oclass") {
      auto oc = ParseObjectClass(value);
      if (!oc.ok()) {
        return Status::InvalidArgument(fmt::format(
            "container property oclass='{}': expected S1, SX, RP_2G1, RP_3G1, RP_2GX or RP_3GX", value));
      }
      p.set_object_class(std::string(ObjectClassName(*oc)));
    } else if (key == "rd_fac") {
      if (value != "0" && value != "1" && value != "2") {
        return Status::InvalidArgument(fmt::format(
            "container property rd_fac='{}': expected 0, 1 or 2 (engine losses the objects must survive)", value));
      }
      p.set_rd_fac(static_cast<uint32_t>(value[0] - '0'));
    } else if (key == "checksum") {
      ROS2_ASSIGN_OR_RETURN(bool on, ParseOnOff(key, value));
      p.set_checksum(on);
    } else if (key == "encryption") {
      ROS2_ASSIGN_OR_RETURN(bool on, ParseEncryption(value));
      p.set_encryption(on);
    } else if (key == "encryption_key_id") {
      ROS2_RETURN_IF_ERROR(CheckKeyId(value));
      p.set_encryption_key_id(value);
    } else if (key == "chunk_size") {
      auto size = ParseSize(value);
      if (!size.ok()) {
        return Status::InvalidArgument(fmt::format("container property chunk_size='{}': not a size", value));
      }
      if (*size < 4096 || *size > (uint64_t{64} << 20) || *size % 4096 != 0) {
        return Status::InvalidArgument(fmt::format(
            "container property chunk_size='{}': must be a multiple of 4 KiB between 4 KiB and 64 MiB", value));
      }
      p.set_chunk_size(*size);
    } else if (key == "layout") {
      if (value == "POSIX" || value == "posix") {
        p.set_layout(rpc::LAYOUT_POSIX);
      } else if (value == "plain" || value == "PLAIN") {
        p.set_layout(rpc::LAYOUT_PLAIN);
      } else {
        return Status::InvalidArgument(fmt::format("container property layout='{}': expected POSIX or plain", value));
      }
    } else {
      return Status::InvalidArgument(
          fmt::format("unknown container property '{}' (known: oclass, rd_fac, checksum, chunk_size, encryption, "
                      "encryption_key_id, layout)",
                      key));
    }
  }
  if (!p.encryption_key_id().empty() && !p.encryption()) {
    return Status::InvalidArgument(
        fmt::format("container property encryption_key_id='{}' needs encryption=aes-256-gcm", p.encryption_key_id()));
  }
  auto oc = ParseObjectClass(p.object_class());
  if (oc.ok()) ROS2_RETURN_IF_ERROR(CheckRedundancy(*oc, p.rd_fac()).WithContext("container properties"));
  return p;
}

}  // namespace ros2::control
