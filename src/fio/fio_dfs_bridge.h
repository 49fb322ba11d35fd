/* The C face of DFS that the fio external ioengine (fio_engine.c) calls.
 *
 * fio's headers are C and cannot be included from C++, and DFS's API
 * (include/ros2/dfs.h) is C++: this bridge sits between them. It owns three
 * kinds of opaque handles, all created and destroyed by the engine glue:
 *
 *   ros2_fio_mount — one Client + Pool + Container + dfs::Filesystem, shared by
 *     every fio job of a process that asks for the same cluster, pool,
 *     container and mount options (fio --thread runs jobs as threads of one
 *     process; without it every job is its own process and gets its own).
 *     Reference-counted; thread-safe.
 *   ros2_fio_queue — one fio job thread's libros2 EventQueue plus the
 *     completions its callbacks produced. Bound to the thread that created it.
 *   ros2_fio_file — an open DFS file (a dfs::Entry). Any thread of the mount.
 *
 * Every function returns 0 (or a count) on success and a positive errno value
 * (negative for the counting functions) on failure; the failure's text, naming
 * the object and the cause, is then available from ros2_fio_last_error() on the
 * same thread. No C++ exception crosses this interface.
 */
#ifndef ROS2_FIO_DFS_BRIDGE_H
#define ROS2_FIO_DFS_BRIDGE_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where the cluster is and what to mount. NULL or "" strings take the default
 * named beside them. */
struct ros2_fio_mount_options {
  const char* data_dir;    /* a `ros2ctl cluster up` directory: its cluster.json gives the
                              control endpoint and admin secret file (default $ROS2_DATA_DIR) */
  const char* control;     /* control endpoint, overriding data_dir's ($ROS2_CONTROL) */
  const char* secret_file; /* the tenant's secret file, overriding data_dir's ($ROS2_SECRET_FILE) */
  const char* tenant;      /* default "admin" ($ROS2_TENANT) */
  const char* pool;        /* label or UUID; required */
  const char* cont;        /* label or UUID; required */
  const char* transport;   /* auto (default), tcp, shm, rdma */
  const char* oclass;      /* object class of new files (default: the file system's) */
  uint64_t chunk_size;     /* chunk size of new files; 0: the file system's */
  unsigned spin_us;        /* data-plane poll before sleeping, microseconds (0..1000000) */
};

struct ros2_fio_mount;
struct ros2_fio_queue;
struct ros2_fio_file;

/* One finished I/O: the tag given to ros2_fio_submit, 0 or an errno, and the
 * bytes transferred (always the full length on success: see ros2_fio_submit). */
struct ros2_fio_completion {
  void* tag;
  int error;
  uint64_t bytes;
};

/* The text of the last failure on this thread ("" when none). */
const char* ros2_fio_last_error(void);

/* Mounts (or shares this process's identical mount of) the container. */
int ros2_fio_mount_acquire(const struct ros2_fio_mount_options* options, struct ros2_fio_mount** out);
/* Drops one reference; the last one unmounts and disconnects. */
void ros2_fio_mount_release(struct ros2_fio_mount* mount);
/* Chunk size of files created through this mount. */
uint64_t ros2_fio_mount_chunk_size(const struct ros2_fio_mount* mount);

/* Opens `path` ("/a/b" or "a/b", both from the root). `flags` are open(2)'s:
 * with O_CREAT missing parent directories are created too. */
int ros2_fio_file_open(struct ros2_fio_mount* mount, const char* path, int flags, struct ros2_fio_file** out);
void ros2_fio_file_close(struct ros2_fio_file* file);
/* Size of the file at `path`; ENOENT when it does not exist. */
int ros2_fio_file_size(struct ros2_fio_mount* mount, const char* path, uint64_t* size);
/* Removes the file at `path` (ENOENT when absent). */
int ros2_fio_file_unlink(struct ros2_fio_mount* mount, const char* path);

/* An event queue for the calling thread (which must then be the only one to
 * use it). `depth` is the most I/Os the caller will have in flight. */
int ros2_fio_queue_create(struct ros2_fio_mount* mount, unsigned depth, struct ros2_fio_queue** out);
/* Waits for the I/Os still in flight, then frees the queue. */
void ros2_fio_queue_destroy(struct ros2_fio_queue* queue);

/* Starts an asynchronous read (write == 0) or write of `length` bytes at
 * `offset` of `file` from/into `buffer`, which must stay valid until the I/O
 * completes. A read that reaches the end of the DFS file completes with the
 * rest of the buffer zeroed and the full length (fio sizes its files itself and
 * never lays them out on this engine, so its file is as long as it says).
 * When the submission itself fails, the error is returned and the I/O also
 * completes at once with it (the next ros2_fio_reap returns it). */
int ros2_fio_submit(struct ros2_fio_queue* queue, struct ros2_fio_file* file, int write, void* buffer, uint64_t length,
                    uint64_t offset, void* tag);
/* Progresses the queue (which first sends the requests submitted since the
 * last progress: libros2 corks its endpoints, so they leave together, one
 * message per target), and until at least `min` completions are available
 * (or `timeout`, when not NULL, passes) waits on it; then moves up to `max`
 * of them into `out`. Returns their number, or -errno. */
int ros2_fio_reap(struct ros2_fio_queue* queue, unsigned min, unsigned max, const struct timespec* timeout,
                  struct ros2_fio_completion* out);
/* I/Os submitted and not yet reaped. */
unsigned ros2_fio_queue_in_flight(const struct ros2_fio_queue* queue);

/* fio's I/O buffer memory. With `shared`, `length` bytes of libros2 I/O buffer
 * from the mount's client (a shared segment a same-host engine reads into
 * directly, docs/client.md); otherwise page-aligned heap memory. *out is NULL
 * and the error returned on failure. Free with ros2_fio_iomem_free (NULL is
 * ignored); the buffer does not need the mount to be still held then. */
int ros2_fio_iomem_alloc(struct ros2_fio_mount* mount, uint64_t length, int shared, void** out);
void ros2_fio_iomem_free(void* buffer);

#ifdef __cplusplus
}
#endif

#endif /* ROS2_FIO_DFS_BRIDGE_H */
