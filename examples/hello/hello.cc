// hello: the smallest complete libros2 program. Connects to a ROS2 cluster's
// control endpoint with a tenant's secret, opens a pool and a container,
// writes and reads back a single value and an array extent of one object,
// then mounts the container's DFS namespace and writes and reads back a file.
// Exit status 0 when every byte read matches what was written. For a local
// cluster, DIR/cluster.json names the endpoint and the admin secret file:
//
//   hello --control unix:/tmp/ros2-quickstart/control.sock
//         --secret-file /tmp/ros2-quickstart/admin.secret --pool p --container c
//
// (one command line).
//
// Built against the installed headers and libros2.so only (docs/client.md,
// "Installing libros2").
#include <fcntl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ros2/client.h"
#include "ros2/dfs.h"

namespace {

int Fail(std::string_view what, const ros2::Status& status) {
  std::fprintf(stderr, "hello: %.*s: %s\n", static_cast<int>(what.size()), what.data(), status.ToString().c_str());
  return 1;
}

std::span<const std::byte> Bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace

int main(int argc, char** argv) {
  ros2::client::ClientOptions options;
  std::string pool_name = "p";
  std::string container_name = "c";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--control") {
      options.control = value;
    } else if (flag == "--tenant") {
      options.tenant = value;
    } else if (flag == "--secret-file") {
      options.secret_file = value;
    } else if (flag == "--transport") {
      options.transport = value;
    } else if (flag == "--pool") {
      pool_name = value;
    } else if (flag == "--container") {
      container_name = value;
    } else {
      std::fprintf(stderr,
                   "usage: hello --control ENDPOINT --secret-file FILE [--tenant T]\n"
                   "             [--transport auto|tcp|shm|rdma] [--pool P] [--container C]\n");
      return 2;
    }
  }
  auto client = ros2::client::Client::Connect(options);
  if (!client.ok()) return Fail("connect", client.status());
  auto pool = (*client)->ConnectPool(pool_name);
  if (!pool.ok()) return Fail("connect pool " + pool_name, pool.status());
  auto container = (*pool)->OpenContainer(container_name, ros2::kRightRead | ros2::kRightWrite);
  if (!container.ok()) return Fail("open container " + container_name, container.status());

  // --- an object: one single value and one array extent ---
  ros2::ObjectId oid = ros2::client::Container::MakeObjectId(ros2::ObjectClass::kSX, 0, 42);
  auto object = (*container)->OpenObject(oid);
  if (!object.ok()) return Fail("open object", object.status());
  const std::string_view value = "hello, ros2";
  if (ros2::Status st = object->Put("greeting", "text", Bytes(value)); !st.ok()) return Fail("put", st);
  auto got = object->Get("greeting", "text");
  if (!got.ok()) return Fail("get", got.status());
  if (got->size() != value.size() || std::memcmp(got->data(), value.data(), value.size()) != 0) {
    std::fprintf(stderr, "hello: object %s: read back differs from what was written\n", oid.ToString().c_str());
    return 1;
  }
  std::vector<std::byte> extent(8192);
  for (size_t i = 0; i < extent.size(); ++i) extent[i] = std::byte(i * 7 + 1);
  ros2::client::UpdateArgs update;
  update.dkey = "array";
  update.akey = "bytes";
  update.kind = ros2::ValueType::kArray;
  update.data = extent;
  if (ros2::Status st = object->Update(update); !st.ok()) return Fail("update array", st);
  std::vector<std::byte> back(extent.size());
  ros2::client::FetchArgs fetch;
  fetch.dkey = "array";
  fetch.akey = "bytes";
  fetch.kind = ros2::ValueType::kArray;
  fetch.count = back.size();
  fetch.buffer = back;
  auto fetched = object->Fetch(fetch);
  if (!fetched.ok()) return Fail("fetch array", fetched.status());
  if (back != extent) {
    std::fprintf(stderr, "hello: object %s: array read back differs\n", oid.ToString().c_str());
    return 1;
  }
  std::printf("object %s: wrote and read back %zu + %zu bytes\n", oid.ToString().c_str(), value.size(), extent.size());

  // --- a DFS file in the same container ---
  auto fs = ros2::dfs::Filesystem::Mount(**container);
  if (!fs.ok()) return Fail("mount", fs.status());
  auto file = (*fs)->Open((*fs)->Root(), "hello.txt", O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (!file.ok()) return Fail("open /hello.txt", file.status());
  const std::string_view text = "a file written through libros2\n";
  auto written = (*fs)->Write(*file, 0, Bytes(text));
  if (!written.ok()) return Fail("write /hello.txt", written.status());
  std::vector<std::byte> read_back(text.size());
  auto read = (*fs)->Read(*file, 0, read_back);
  if (!read.ok()) return Fail("read /hello.txt", read.status());
  auto attr = (*fs)->Stat(*file);
  if (!attr.ok()) return Fail("stat /hello.txt", attr.status());
  if (*read != text.size() || attr->size != text.size() ||
      std::memcmp(read_back.data(), text.data(), text.size()) != 0) {
    std::fprintf(stderr, "hello: /hello.txt: read %llu bytes, size %llu, expected %zu matching bytes\n",
                 static_cast<unsigned long long>(*read), static_cast<unsigned long long>(attr->size), text.size());
    return 1;
  }
  std::printf("dfs /hello.txt: wrote and read back %zu bytes\n", text.size());
  return 0;
}
