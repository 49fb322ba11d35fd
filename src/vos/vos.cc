// Vos: the storage-class names, Open/Destroy, and the blocking wrappers.
#include "vos/vos.h"

#include <fmt/format.h>

#include "vos/env.h"
#include "vos/vos_store.h"

namespace ros2::vos {

std::string_view StorageClassName(StorageClass c) {
  switch (c) {
    case StorageClass::kNvme: return "nvme";
    case StorageClass::kRam: return "ram";
  }
  return "unknown";
}

Result<StorageClass> ParseStorageClass(std::string_view name) {
  if (name == "nvme") return StorageClass::kNvme;
  if (name == "ram") return StorageClass::kRam;
  return Status::InvalidArgument(fmt::format("unknown storage class '{}' (expected 'nvme' or 'ram')", name));
}

std::string_view ExtentSyncName(ExtentSync s) {
  switch (s) {
    case ExtentSync::kGroup: return "group";
    case ExtentSync::kDsync: return "dsync";
    case ExtentSync::kWal: return "wal";
  }
  return "unknown";
}

Result<ExtentSync> ParseExtentSync(std::string_view name) {
  if (name == "group") return ExtentSync::kGroup;
  if (name == "dsync") return ExtentSync::kDsync;
  if (name == "wal") return ExtentSync::kWal;
  return Status::InvalidArgument(
      fmt::format("unknown extent sync mode '{}' (expected 'wal', 'group' or 'dsync')", name));
}

Result<std::unique_ptr<Vos>> Vos::Open(const VosOptions& options) {
  return VosStore::Open(options);
}

Status Vos::Destroy(const std::string& path, Env* env) {
  if (path.empty()) return Status::InvalidArgument("vos: destroy: empty path");
  return (env != nullptr ? env : Env::Default())->RemoveAll(path);
}

Status Vos::Update(const UpdateOp& op) {
  std::optional<Status> result;
  SubmitUpdate(op, [&result](Status s) { result = std::move(s); });
  while (!result) Progress(/*wait=*/true);
  return *result;
}

Status Vos::Punch(const PunchOp& op) {
  std::optional<Status> result;
  SubmitPunch(op, [&result](Status s) { result = std::move(s); });
  while (!result) Progress(/*wait=*/true);
  return *result;
}

Status Vos::Discard(const DiscardOp& op) {
  std::optional<Status> result;
  SubmitDiscard(op, [&result](Status s) { result = std::move(s); });
  while (!result) Progress(/*wait=*/true);
  return *result;
}

Result<FetchResult> Vos::Fetch(const FetchOp& op) {
  std::optional<Result<FetchResult>> result;
  SubmitFetch(op, [&result](Result<FetchResult> r) { result = std::move(r); });
  while (!result) Progress(/*wait=*/true);
  return std::move(*result);
}

}  // namespace ros2::vos
