// The C API (include/ros2/ros2.h): opaque handles around the C++ classes,
// Status turned into negative errno values, and a per-thread last-error message.
#include "ros2/ros2.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "ros2/client.h"

using ros2::Status;

// Each handle starts with a magic number so a stale or foreign pointer is
// refused with -EINVAL (best effort) instead of being used.
struct ros2_client {
  uint32_t magic;
  std::unique_ptr<ros2::client::Client> impl;
};
struct ros2_pool {
  uint32_t magic;
  std::unique_ptr<ros2::client::Pool> impl;
};
struct ros2_cont {
  uint32_t magic;
  std::unique_ptr<ros2::client::Container> impl;
};
struct ros2_obj {
  uint32_t magic;
  ros2::client::Object impl;
};
struct ros2_eq {
  uint32_t magic;
  std::unique_ptr<ros2::client::EventQueue> impl;
};

struct ros2_io_buffer {
  uint32_t magic;
  ros2::client::IoBuffer impl;
};

namespace {

constexpr uint32_t kClientMagic = 0x52324331;  // "R2C1"
constexpr uint32_t kPoolMagic = 0x52325031;
constexpr uint32_t kContMagic = 0x52324e31;
constexpr uint32_t kObjMagic = 0x52324f31;
constexpr uint32_t kEqMagic = 0x52324531;
constexpr uint32_t kIoBufferMagic = 0x52324231;
constexpr uint32_t kClosedMagic = 0xdeadc105;

thread_local std::string last_error;

int Fail(const Status& st) {
  last_error = st.ToString();
  int err = st.ToErrno();
  return -(err == 0 ? EIO : err);
}

int Invalid(const char* what) {
  return Fail(Status::InvalidArgument(what));
}

int Ok() {
  last_error.clear();
  return 0;
}

template <typename H>
bool Valid(const H* h, uint32_t magic) {
  return h != nullptr && h->magic == magic;
}

// Releases a handle made by one of the open/create calls. A NULL, foreign or
// already released handle is ignored; the magic is poisoned before the delete so
// a use after close is reported as an invalid handle, not trusted.
template <typename H>
void Release(H* h, uint32_t magic) {
  if (!Valid(h, magic)) return;
  h->magic = kClosedMagic;
  delete h;
}

std::span<const std::byte> In(const void* p, size_t n) {
  return {static_cast<const std::byte*>(p), n};
}
std::span<std::byte> Out(void* p, size_t n) {
  return {static_cast<std::byte*>(p), n};
}

void FillEvent(const ros2::client::Event& e, ros2_event_t* out) {
  out->user_data = e.user_data;
  out->size = e.result.size;
  if (e.result.status.ok()) {
    out->rc = 0;
    out->message[0] = '\0';
  } else {
    int err = e.result.status.ToErrno();
    out->rc = -(err == 0 ? EIO : err);
    std::string msg = e.result.status.ToString();
    size_t n = std::min(msg.size(), sizeof(out->message) - 1);
    std::memcpy(out->message, msg.data(), n);
    out->message[n] = '\0';
  }
}

int CopyEvents(std::span<ros2::client::Event> events, size_t n, ros2_event_t* out) {
  for (size_t i = 0; i < n; ++i) FillEvent(events[i], &out[i]);
  Ok();
  return static_cast<int>(n);
}

// The arguments of an array write and an array read (the blocking and the
// asynchronous calls take the same).
ros2::client::UpdateArgs ArrayWrite(const char* dkey, const char* akey, uint64_t index, uint32_t record_size,
                                    const void* data, size_t size) {
  ros2::client::UpdateArgs args;
  args.dkey = dkey;
  args.akey = akey;
  args.kind = ros2::ValueType::kArray;
  args.index = index;
  args.record_size = record_size;
  args.data = In(data, size);
  return args;
}
ros2::client::FetchArgs ArrayRead(const char* dkey, const char* akey, uint64_t index, uint64_t count,
                                  uint32_t record_size, void* buf, size_t capacity) {
  ros2::client::FetchArgs args;
  args.dkey = dkey;
  args.akey = akey;
  args.kind = ros2::ValueType::kArray;
  args.index = index;
  args.count = count;
  args.record_size = record_size;
  args.buffer = Out(buf, capacity);
  return args;
}

}  // namespace

extern "C" {

const char* ros2_strerror(int rc) {
  if (rc == 0) return "success";
  return std::strerror(rc < 0 ? -rc : rc);
}

const char* ros2_last_error(void) {
  return last_error.c_str();
}

int ros2_connect(const ros2_client_options_t* options, ros2_client_t** client) {
  if (client == nullptr) return Invalid("ros2_connect: client is NULL");
  *client = nullptr;
  if (options == nullptr) return Invalid("ros2_connect: options is NULL");
  if (options->control == nullptr || options->control[0] == '\0') return Invalid("ros2_connect: no control endpoint");
  ros2::client::ClientOptions o;
  o.control = options->control;
  if (options->tenant != nullptr) o.tenant = options->tenant;
  if (options->secret != nullptr) o.secret = options->secret;
  if (options->secret_file != nullptr) o.secret_file = options->secret_file;
  if (options->transport != nullptr) o.transport = options->transport;
  if (options->io_timeout_ms != 0) o.io_timeout = std::chrono::milliseconds(options->io_timeout_ms);
  if (options->reconnect_timeout_ms == UINT32_MAX) {
    o.reconnect_timeout = std::chrono::milliseconds(0);
  } else if (options->reconnect_timeout_ms != 0) {
    o.reconnect_timeout = std::chrono::milliseconds(options->reconnect_timeout_ms);
  }
  auto c = ros2::client::Client::Connect(o);
  if (!c.ok()) return Fail(c.status());
  *client = new ros2_client{kClientMagic, std::move(*c)};  // released by ros2_client_close
  return Ok();
}

void ros2_client_close(ros2_client_t* client) {
  Release(client, kClientMagic);
}

int ros2_pool_connect(ros2_client_t* client, const char* pool, ros2_pool_t** pool_out) {
  if (pool_out == nullptr) return Invalid("ros2_pool_connect: pool_out is NULL");
  *pool_out = nullptr;
  if (!Valid(client, kClientMagic)) return Invalid("ros2_pool_connect: invalid client handle");
  if (pool == nullptr) return Invalid("ros2_pool_connect: pool is NULL");
  auto p = client->impl->ConnectPool(pool);
  if (!p.ok()) return Fail(p.status());
  *pool_out = new ros2_pool{kPoolMagic, std::move(*p)};
  return Ok();
}

void ros2_pool_close(ros2_pool_t* pool) {
  Release(pool, kPoolMagic);
}

int ros2_cont_open(ros2_pool_t* pool, const char* container, ros2_cont_t** cont) {
  if (cont == nullptr) return Invalid("ros2_cont_open: cont is NULL");
  *cont = nullptr;
  if (!Valid(pool, kPoolMagic)) return Invalid("ros2_cont_open: invalid pool handle");
  if (container == nullptr) return Invalid("ros2_cont_open: container is NULL");
  auto c = pool->impl->OpenContainer(container);
  if (!c.ok()) return Fail(c.status());
  *cont = new ros2_cont{kContMagic, std::move(*c)};
  return Ok();
}

void ros2_cont_close(ros2_cont_t* cont) {
  Release(cont, kContMagic);
}

int ros2_obj_open(ros2_cont_t* cont, int oclass, uint64_t hi, uint64_t lo, ros2_obj_t** obj) {
  if (obj == nullptr) return Invalid("ros2_obj_open: obj is NULL");
  *obj = nullptr;
  if (!Valid(cont, kContMagic)) return Invalid("ros2_obj_open: invalid container handle");
  if (oclass < ROS2_OC_S1 || oclass > ROS2_OC_RP_3GX) return Invalid("ros2_obj_open: unknown object class");
  auto id = ros2::client::Container::MakeObjectId(static_cast<ros2::ObjectClass>(oclass), hi, lo);
  auto o = cont->impl->OpenObject(id);
  if (!o.ok()) return Fail(o.status());
  *obj = new ros2_obj{kObjMagic, std::move(*o)};
  return Ok();
}

void ros2_obj_close(ros2_obj_t* obj) {
  Release(obj, kObjMagic);
}

#define ROS2_CHECK_OBJ_KEYS(fn)                                             \
  if (!Valid(obj, kObjMagic)) return Invalid(fn ": invalid object handle"); \
  if (dkey == nullptr || akey == nullptr) return Invalid(fn ": dkey or akey is NULL")

int ros2_obj_put(ros2_obj_t* obj, const char* dkey, const char* akey, const void* value, size_t size) {
  ROS2_CHECK_OBJ_KEYS("ros2_obj_put");
  if (value == nullptr && size != 0) return Invalid("ros2_obj_put: value is NULL");
  Status st = obj->impl.Put(dkey, akey, In(value, size));
  return st.ok() ? Ok() : Fail(st);
}

int ros2_obj_get(ros2_obj_t* obj, const char* dkey, const char* akey, void* buf, size_t capacity, size_t* size) {
  ROS2_CHECK_OBJ_KEYS("ros2_obj_get");
  if (size == nullptr) return Invalid("ros2_obj_get: size is NULL");
  if (buf == nullptr && capacity != 0) return Invalid("ros2_obj_get: buf is NULL");
  ros2::client::FetchArgs args;
  args.dkey = dkey;
  args.akey = akey;
  args.buffer = Out(buf, capacity);
  auto r = obj->impl.Fetch(args);
  if (!r.ok()) return Fail(r.status());
  *size = r->size;
  return Ok();
}

int ros2_obj_write_array(ros2_obj_t* obj, const char* dkey, const char* akey, uint64_t index, uint32_t record_size,
                         const void* data, size_t size) {
  ROS2_CHECK_OBJ_KEYS("ros2_obj_write_array");
  if (data == nullptr) return Invalid("ros2_obj_write_array: data is NULL");
  Status st = obj->impl.Update(ArrayWrite(dkey, akey, index, record_size, data, size));
  return st.ok() ? Ok() : Fail(st);
}

int ros2_obj_read_array(ros2_obj_t* obj, const char* dkey, const char* akey, uint64_t index, uint64_t count,
                        uint32_t record_size, void* buf, size_t capacity) {
  ROS2_CHECK_OBJ_KEYS("ros2_obj_read_array");
  if (buf == nullptr) return Invalid("ros2_obj_read_array: buf is NULL");
  auto r = obj->impl.Fetch(ArrayRead(dkey, akey, index, count, record_size, buf, capacity));
  return r.ok() ? Ok() : Fail(r.status());
}

int ros2_obj_punch(ros2_obj_t* obj) {
  if (!Valid(obj, kObjMagic)) return Invalid("ros2_obj_punch: invalid object handle");
  Status st = obj->impl.PunchObject();
  return st.ok() ? Ok() : Fail(st);
}

int ros2_obj_punch_dkey(ros2_obj_t* obj, const char* dkey) {
  if (!Valid(obj, kObjMagic)) return Invalid("ros2_obj_punch_dkey: invalid object handle");
  if (dkey == nullptr) return Invalid("ros2_obj_punch_dkey: dkey is NULL");
  Status st = obj->impl.PunchDkey(dkey);
  return st.ok() ? Ok() : Fail(st);
}

int ros2_obj_array_end(ros2_obj_t* obj, const char* dkey, const char* akey, uint64_t* end) {
  ROS2_CHECK_OBJ_KEYS("ros2_obj_array_end");
  if (end == nullptr) return Invalid("ros2_obj_array_end: end is NULL");
  auto r = obj->impl.QueryArrayEnd(dkey, akey);
  if (!r.ok()) return Fail(r.status());
  *end = r->value_or(0);
  return Ok();
}

int ros2_io_buffer_alloc(ros2_client_t* client, uint64_t length, ros2_io_buffer_t** buffer) {
  if (buffer == nullptr) return Invalid("ros2_io_buffer_alloc: buffer is NULL");
  *buffer = nullptr;
  if (!Valid(client, kClientMagic)) return Invalid("ros2_io_buffer_alloc: invalid client handle");
  if (length == 0) return Invalid("ros2_io_buffer_alloc: length 0");
  auto b = client->impl->AllocateIoBuffer(length);
  if (!b.ok()) return Fail(b.status());
  *buffer = new ros2_io_buffer{kIoBufferMagic, std::move(*b)};
  return Ok();
}

void* ros2_io_buffer_data(const ros2_io_buffer_t* buffer) {
  return Valid(buffer, kIoBufferMagic) ? buffer->impl.data() : nullptr;
}

uint64_t ros2_io_buffer_size(const ros2_io_buffer_t* buffer) {
  return Valid(buffer, kIoBufferMagic) ? buffer->impl.size() : 0;
}

void ros2_io_buffer_free(ros2_io_buffer_t* buffer) {
  Release(buffer, kIoBufferMagic);
}

int ros2_eq_create(ros2_client_t* client, ros2_eq_t** eq) {
  if (eq == nullptr) return Invalid("ros2_eq_create: eq is NULL");
  *eq = nullptr;
  if (!Valid(client, kClientMagic)) return Invalid("ros2_eq_create: invalid client handle");
  auto q = client->impl->CreateEventQueue();
  if (!q.ok()) return Fail(q.status());
  *eq = new ros2_eq{kEqMagic, std::move(*q)};
  return Ok();
}

void ros2_eq_destroy(ros2_eq_t* eq) {
  Release(eq, kEqMagic);
}

int ros2_obj_write_array_async(ros2_obj_t* obj, ros2_eq_t* eq, const char* dkey, const char* akey, uint64_t index,
                               uint32_t record_size, const void* data, size_t size, uint64_t user_data) {
  ROS2_CHECK_OBJ_KEYS("ros2_obj_write_array_async");
  if (!Valid(eq, kEqMagic)) return Invalid("ros2_obj_write_array_async: invalid event queue handle");
  if (data == nullptr) return Invalid("ros2_obj_write_array_async: data is NULL");
  Status st = obj->impl.SubmitUpdate(*eq->impl, ArrayWrite(dkey, akey, index, record_size, data, size), user_data);
  return st.ok() ? Ok() : Fail(st);
}

int ros2_obj_read_array_async(ros2_obj_t* obj, ros2_eq_t* eq, const char* dkey, const char* akey, uint64_t index,
                              uint64_t count, uint32_t record_size, void* buf, size_t capacity, uint64_t user_data) {
  ROS2_CHECK_OBJ_KEYS("ros2_obj_read_array_async");
  if (!Valid(eq, kEqMagic)) return Invalid("ros2_obj_read_array_async: invalid event queue handle");
  if (buf == nullptr) return Invalid("ros2_obj_read_array_async: buf is NULL");
  Status st =
      obj->impl.SubmitFetch(*eq->impl, ArrayRead(dkey, akey, index, count, record_size, buf, capacity), user_data);
  return st.ok() ? Ok() : Fail(st);
}

int ros2_eq_poll(ros2_eq_t* eq, ros2_event_t* events, size_t max_events) {
  if (!Valid(eq, kEqMagic)) return Invalid("ros2_eq_poll: invalid event queue handle");
  if (events == nullptr && max_events != 0) return Invalid("ros2_eq_poll: events is NULL");
  std::vector<ros2::client::Event> got(max_events);
  size_t n = eq->impl->Poll(got);
  return CopyEvents(got, n, events);
}

int ros2_eq_wait(ros2_eq_t* eq, ros2_event_t* events, size_t max_events, size_t min_events, uint32_t timeout_ms) {
  if (!Valid(eq, kEqMagic)) return Invalid("ros2_eq_wait: invalid event queue handle");
  if (events == nullptr && max_events != 0) return Invalid("ros2_eq_wait: events is NULL");
  std::vector<ros2::client::Event> got(max_events);
  auto n = eq->impl->Wait(got, min_events, std::chrono::milliseconds(timeout_ms));
  if (!n.ok()) return Fail(n.status());
  return CopyEvents(got, *n, events);
}

size_t ros2_eq_in_flight(const ros2_eq_t* eq) {
  return Valid(eq, kEqMagic) ? eq->impl->in_flight() : 0;
}

}  // extern "C"
