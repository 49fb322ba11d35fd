/* libros2 C API: the native ROS2 client for C programs, beside the C++ API of
 * ros2/client.h (which it wraps; the semantics are the same, see there and
 * docs/client.md).
 *
 * Handles are opaque pointers, created by *_connect / *_open / *_create and
 * released by the matching *_close / *_destroy (NULL is accepted and ignored).
 * Every function that can fail returns 0 on success or a negative errno value
 * (-EINVAL bad argument, -ENOENT not found, -EIO corruption or I/O error,
 * -EACCES / -EPERM refused, -ETIMEDOUT, -ENOTSUP reserved object class, ...).
 * ros2_strerror(rc) names the code; ros2_last_error() returns the message of
 * the last failure on the calling thread (naming the object and the cause).
 *
 * Threads: client, pool and container handles may be shared by threads; an
 * object handle may be used from any thread; an event queue belongs to the
 * thread that created it. Buffers passed to asynchronous calls must stay valid
 * until their event has been returned by ros2_eq_poll / ros2_eq_wait.
 */
#ifndef ROS2_ROS2_H_
#define ROS2_ROS2_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ros2_client ros2_client_t;
typedef struct ros2_pool ros2_pool_t;
typedef struct ros2_cont ros2_cont_t;
typedef struct ros2_obj ros2_obj_t;
typedef struct ros2_eq ros2_eq_t;
typedef struct ros2_io_buffer ros2_io_buffer_t;

/* Object classes (the numbers of the object id's class byte). */
enum ros2_oclass {
  ROS2_OC_S1 = 1,     /* one shard */
  ROS2_OC_SX = 2,     /* striped over every target */
  ROS2_OC_RP_2G1 = 3, /* two replicas on distinct engines, one group */
  ROS2_OC_RP_3G1 = 4, /* three replicas, one group */
  ROS2_OC_RP_2GX = 5, /* two replicas per group, groups over every target */
  ROS2_OC_RP_3GX = 6  /* three replicas per group, groups over every target */
};

typedef struct ros2_client_options {
  const char* control;     /* "unix:/path", "/path" or "host:port"; required */
  const char* tenant;      /* NULL: "admin" */
  const char* secret;      /* the secret, or NULL and: */
  const char* secret_file; /* a file holding it */
  const char* transport;   /* NULL: "auto"; "tcp", "shm", "rdma" */
  uint32_t io_timeout_ms;  /* 0: 30000 */
  /* How long a call waits for an engine that went away (restarting) before it
     fails with -ENOTCONN; 0: 60000, UINT32_MAX: no waiting (docs/client.md). */
  uint32_t reconnect_timeout_ms;
} ros2_client_options_t;

/* A completed asynchronous operation. */
typedef struct ros2_event {
  uint64_t user_data;
  int rc;        /* 0 or a negative errno; the message is in `message` */
  uint64_t size; /* fetch: value size / bytes read; update: bytes written */
  char message[256];
} ros2_event_t;

const char* ros2_strerror(int rc);
/* The message of the last failure on this thread ("" when none). */
const char* ros2_last_error(void);

int ros2_connect(const ros2_client_options_t* options, ros2_client_t** client);
void ros2_client_close(ros2_client_t* client);

int ros2_pool_connect(ros2_client_t* client, const char* pool, ros2_pool_t** pool_out);
void ros2_pool_close(ros2_pool_t* pool);

int ros2_cont_open(ros2_pool_t* pool, const char* container, ros2_cont_t** cont);
void ros2_cont_close(ros2_cont_t* cont);

/* Opens the object of class `oclass` with the user bits `hi` (48 bits) and `lo`. */
int ros2_obj_open(ros2_cont_t* cont, int oclass, uint64_t hi, uint64_t lo, ros2_obj_t** obj);
void ros2_obj_close(ros2_obj_t* obj);

/* Blocking I/O. Keys are NUL-terminated strings. */
int ros2_obj_put(ros2_obj_t* obj, const char* dkey, const char* akey, const void* value, size_t size);
/* Reads a single value into buf; *size receives the value's full size (when it
 * exceeds `capacity` nothing verified was copied: call again with a larger buffer). */
int ros2_obj_get(ros2_obj_t* obj, const char* dkey, const char* akey, void* buf, size_t capacity, size_t* size);
int ros2_obj_write_array(ros2_obj_t* obj, const char* dkey, const char* akey, uint64_t index, uint32_t record_size,
                         const void* data, size_t size);
int ros2_obj_read_array(ros2_obj_t* obj, const char* dkey, const char* akey, uint64_t index, uint64_t count,
                        uint32_t record_size, void* buf, size_t capacity);
int ros2_obj_punch(ros2_obj_t* obj);
int ros2_obj_punch_dkey(ros2_obj_t* obj, const char* dkey);
/* *end receives one past the highest written record, 0 when none. */
int ros2_obj_array_end(ros2_obj_t* obj, const char* dkey, const char* akey, uint64_t* end);

/* I/O buffer memory an engine on this host reads and writes directly (a shared
 * segment; docs/client.md "I/O buffers"): pass any range of it to any I/O.
 * `length` is rounded up to whole pages; the memory is zero-filled. */
int ros2_io_buffer_alloc(ros2_client_t* client, uint64_t length, ros2_io_buffer_t** buffer);
void* ros2_io_buffer_data(const ros2_io_buffer_t* buffer);
uint64_t ros2_io_buffer_size(const ros2_io_buffer_t* buffer);
/* No I/O into the buffer may still be in flight. */
void ros2_io_buffer_free(ros2_io_buffer_t* buffer);

/* Asynchronous I/O through an event queue of the calling thread. */
int ros2_eq_create(ros2_client_t* client, ros2_eq_t** eq);
void ros2_eq_destroy(ros2_eq_t* eq);
int ros2_obj_write_array_async(ros2_obj_t* obj, ros2_eq_t* eq, const char* dkey, const char* akey, uint64_t index,
                               uint32_t record_size, const void* data, size_t size, uint64_t user_data);
int ros2_obj_read_array_async(ros2_obj_t* obj, ros2_eq_t* eq, const char* dkey, const char* akey, uint64_t index,
                              uint64_t count, uint32_t record_size, void* buf, size_t capacity, uint64_t user_data);
/* Returns the number of events stored in `events` (>= 0) or a negative errno. */
int ros2_eq_poll(ros2_eq_t* eq, ros2_event_t* events, size_t max_events);
/* Waits up to timeout_ms for at least min_events; -ETIMEDOUT when fewer completed. */
int ros2_eq_wait(ros2_eq_t* eq, ros2_event_t* events, size_t max_events, size_t min_events, uint32_t timeout_ms);
/* Operations submitted to `eq` and not yet completed. */
size_t ros2_eq_in_flight(const ros2_eq_t* eq);

#ifdef __cplusplus
}
#endif

#endif /* ROS2_ROS2_H_ */
