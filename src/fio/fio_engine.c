/* libros2_fio.so: an fio 3.33 external ioengine doing asynchronous DFS I/O.
 *
 *   fio --ioengine=external:/path/libros2_fio.so --data_dir=/tmp/ros2 \
 *       --pool=p1 --cont=c1 [--transport=shm] [--oclass=S1] [--chunk_size=1m] ...
 *
 * This file is the glue to fio's C headers (fio.h, optgroup.h, from the
 * configured source tree scripts/fetch-fio-source.sh fetches); everything that
 * touches ROS2 goes through the C bridge in fio_dfs_bridge.h. One job (a fio
 * process, or a thread with --thread) keeps its own event queue; the mount
 * (client, pool, container, file system) is shared by the jobs of a process.
 *
 * I/O model, as fio's asynchronous engines: ->queue() parks an io_u in the
 * job's pending list, ->commit() submits every pending io_u to DFS
 * (Filesystem::SubmitRead / SubmitWrite on the job's EventQueue) and stamps its
 * issue time, ->getevents() progresses the queue until enough completed, and
 * ->event() hands them back one by one. At most iodepth I/Os are pending or in
 * flight. A sync is a barrier: it waits (FIO_Q_BUSY) until every write in flight
 * has completed; DFS acknowledges a write only once it is durable. docs/fio.md
 * describes the engine.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fio.h"
#include "optgroup.h"

#include "fio/fio_dfs_bridge.h"

/* Engine options (fio's option parser fills this; the first member is fio's). */
struct ros2_engine_options {
  void* pad;
  char* data_dir;
  char* control;
  char* secret_file;
  char* tenant;
  char* pool;
  char* cont;
  char* transport;
  char* oclass;
  unsigned long long chunk_size;
  unsigned int spin_us;
  unsigned int io_buffers;
};

#define ROS2_STR_OPTION(opt_name, opt_lname, field, opt_help)                                              \
  {                                                                                                        \
    .name = (opt_name), .lname = (opt_lname), .type = FIO_OPT_STR_STORE,                                   \
    .off1 = offsetof(struct ros2_engine_options, field), .help = (opt_help), .category = FIO_OPT_C_ENGINE, \
    .group = FIO_OPT_G_INVALID,                                                                            \
  }

static struct fio_option ros2_engine_option_table[] = {
    ROS2_STR_OPTION("pool", "ROS2 pool", pool, "Pool label or UUID (required)"),
    ROS2_STR_OPTION("cont", "ROS2 container", cont, "Container label or UUID holding the DFS namespace (required)"),
    ROS2_STR_OPTION("data_dir", "ROS2 cluster directory", data_dir,
                    "Directory of a `ros2ctl cluster up` cluster (control endpoint and admin secret; default "
                    "$ROS2_DATA_DIR)"),
    ROS2_STR_OPTION("control", "ROS2 control endpoint", control,
                    "Control endpoint (unix:/path or host:port), overriding data_dir's"),
    ROS2_STR_OPTION("secret_file", "ROS2 secret file", secret_file, "The tenant's secret file, overriding data_dir's"),
    ROS2_STR_OPTION("tenant", "ROS2 tenant", tenant, "Tenant to authenticate as (default admin)"),
    ROS2_STR_OPTION("transport", "ROS2 transport", transport, "Data-plane transport: auto (default), tcp, shm, rdma"),
    ROS2_STR_OPTION("oclass", "ROS2 object class", oclass,
                    "Object class of files this job creates (S1, S2, SX; default: the file system's)"),
    {
        .name = "chunk_size",
        .lname = "DFS chunk size",
        .type = FIO_OPT_ULL,
        .off1 = offsetof(struct ros2_engine_options, chunk_size),
        .help = "Chunk size of files this job creates (default: the file system's)",
        .def = "0",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "spin_us",
        .lname = "ROS2 poll before sleeping",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct ros2_engine_options, spin_us),
        .help = "Microseconds a job polls the data plane before sleeping on it (0-1000000; default 10: fio keeps "
                "many I/Os in flight, so replies come in batches)",
        .def = "10",
        .minval = 0,
        .maxval = 1000000,
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "io_buffers",
        .lname = "ROS2 I/O buffers",
        .type = FIO_OPT_BOOL,
        .off1 = offsetof(struct ros2_engine_options, io_buffers),
        .help = "Allocate fio's buffers as libros2 I/O buffers (shared segments a same-host engine reads into "
                "directly; default 1) instead of heap memory",
        .def = "1",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = NULL,
    },
};

/* One job's state (td->io_ops_data). */
struct ros2_engine_job {
  struct ros2_fio_mount* mount;
  struct ros2_fio_queue* queue;
  unsigned depth;
  struct io_u** pending; /* queued, not yet committed */
  unsigned npending;
  struct io_u** events; /* reaped by the last getevents */
  struct ros2_fio_completion* completions;
  unsigned writes_in_flight;
};

static void ros2_engine_fail(struct thread_data* td, int err, const char* what) {
  const char* detail = ros2_fio_last_error();
  log_err("ros2: %s: %s\n", what, detail[0] != '\0' ? detail : strerror(err));
  td_verror(td, err, what);
}

static void ros2_engine_free_job(struct ros2_engine_job* job) {
  if (job == NULL) return;
  if (job->queue != NULL) ros2_fio_queue_destroy(job->queue);
  if (job->mount != NULL) ros2_fio_mount_release(job->mount);
  free(job->pending);
  free(job->events);
  free(job->completions);
  free(job);
}

static int ros2_engine_init(struct thread_data* td) {
  struct ros2_engine_options* eo = td->eo;
  struct ros2_engine_job* job = calloc(1, sizeof(*job));
  if (job == NULL) {
    td_verror(td, ENOMEM, "ros2 init");
    return 1;
  }
  job->depth = td->o.iodepth > 0 ? td->o.iodepth : 1;
  job->pending = calloc(job->depth, sizeof(*job->pending));
  job->events = calloc(job->depth, sizeof(*job->events));
  job->completions = calloc(job->depth, sizeof(*job->completions));
  if (job->pending == NULL || job->events == NULL || job->completions == NULL) {
    ros2_engine_free_job(job);
    td_verror(td, ENOMEM, "ros2 init");
    return 1;
  }
  struct ros2_fio_mount_options mo = {
      .data_dir = eo->data_dir,
      .control = eo->control,
      .secret_file = eo->secret_file,
      .tenant = eo->tenant,
      .pool = eo->pool,
      .cont = eo->cont,
      .transport = eo->transport,
      .oclass = eo->oclass,
      .chunk_size = eo->chunk_size,
      .spin_us = eo->spin_us,
  };
  int err = ros2_fio_mount_acquire(&mo, &job->mount);
  if (err != 0) {
    ros2_engine_fail(td, err, "ros2 mount");
    ros2_engine_free_job(job);
    return 1;
  }
  err = ros2_fio_queue_create(job->mount, job->depth, &job->queue);
  if (err != 0) {
    ros2_engine_fail(td, err, "ros2 event queue");
    ros2_engine_free_job(job);
    return 1;
  }
  td->io_ops_data = job;
  return 0;
}

static void ros2_engine_cleanup(struct thread_data* td) {
  ros2_engine_free_job(td->io_ops_data);
  td->io_ops_data = NULL;
}

static int ros2_engine_open_file(struct thread_data* td, struct fio_file* f) {
  struct ros2_engine_job* job = td->io_ops_data;
  int flags = O_RDONLY;
  if (td_write(td) && !read_only) flags = O_RDWR | (td->o.allow_create ? O_CREAT : 0);
  struct ros2_fio_file* file = NULL;
  int err = ros2_fio_file_open(job->mount, f->file_name, flags, &file);
  if (err != 0) {
    ros2_engine_fail(td, err, "ros2 open");
    return err;
  }
  FILE_SET_ENG_DATA(f, file);
  return 0;
}

static int ros2_engine_close_file(struct thread_data fio_unused* td, struct fio_file* f) {
  struct ros2_fio_file* file = FILE_ENG_DATA(f);
  if (file != NULL) ros2_fio_file_close(file);
  FILE_SET_ENG_DATA(f, NULL);
  return 0;
}

/* Called by fio's parent process before the jobs start (create_serialize), when
 * nothing is mounted there: fio's own size then stands. */
static int ros2_engine_get_file_size(struct thread_data* td, struct fio_file* f) {
  struct ros2_engine_job* job = td->io_ops_data;
  if (job == NULL) return 0;
  uint64_t size = 0;
  int err = ros2_fio_file_size(job->mount, f->file_name, &size);
  if (err == ENOENT) return 0;
  if (err != 0) {
    ros2_engine_fail(td, err, "ros2 stat");
    return err;
  }
  f->real_file_size = size;
  fio_file_set_size_known(f);
  return 0;
}

static int ros2_engine_unlink_file(struct thread_data* td, struct fio_file* f) {
  struct ros2_engine_job* job = td->io_ops_data;
  if (job == NULL) return 0;
  int err = ros2_fio_file_unlink(job->mount, f->file_name);
  if (err != 0 && err != ENOENT) {
    ros2_engine_fail(td, err, "ros2 unlink");
    return err;
  }
  return 0;
}

/* No client-side cache to drop: every read goes to the engines. */
static int ros2_engine_invalidate(struct thread_data fio_unused* td, struct fio_file fio_unused* f) {
  return 0;
}

static enum fio_q_status ros2_engine_queue(struct thread_data* td, struct io_u* io_u) {
  struct ros2_engine_job* job = td->io_ops_data;
  fio_ro_check(td, io_u);
  if (ddir_sync(io_u->ddir)) {
    /* Acknowledged DFS writes are durable: a sync only waits for those in flight. */
    if (job->npending > 0 || job->writes_in_flight > 0) return FIO_Q_BUSY;
    return FIO_Q_COMPLETED;
  }
  if (io_u->ddir != DDIR_READ && io_u->ddir != DDIR_WRITE) {
    io_u->error = EOPNOTSUPP;
    return FIO_Q_COMPLETED;
  }
  if (job->npending + ros2_fio_queue_in_flight(job->queue) >= job->depth) return FIO_Q_BUSY;
  job->pending[job->npending++] = io_u;
  return FIO_Q_QUEUED;
}

static int ros2_engine_commit(struct thread_data* td) {
  struct ros2_engine_job* job = td->io_ops_data;
  if (job->npending == 0) return 0;
  struct timespec now;
  const bool stamp = fio_fill_issue_time(td);
  if (stamp) fio_gettime(&now, NULL);
  unsigned submitted = 0;
  for (unsigned i = 0; i < job->npending; i++) {
    struct io_u* io_u = job->pending[i];
    const int write = io_u->ddir == DDIR_WRITE;
    if (stamp) {
      memcpy(&io_u->issue_time, &now, sizeof(now));
      io_u_queued(td, io_u);
    }
    int err = ros2_fio_submit(job->queue, FILE_ENG_DATA(io_u->file), write, io_u->xfer_buf, io_u->xfer_buflen,
                              io_u->offset, io_u);
    /* A submission that failed completes at once with its error (the bridge
     * queues that completion), so the other pending io_us still go out. */
    if (err != 0) log_err("ros2: %s\n", ros2_fio_last_error());
    if (write) job->writes_in_flight++;
    submitted++;
  }
  if (stamp && td->o.read_iolog_file) memcpy(&td->last_issue, &now, sizeof(now));
  io_u_mark_submit(td, submitted);
  job->npending = 0;
  return 0;
}

static int ros2_engine_getevents(struct thread_data* td, unsigned int min, unsigned int max, const struct timespec* t) {
  struct ros2_engine_job* job = td->io_ops_data;
  if (max > job->depth) max = job->depth;
  int n = ros2_fio_reap(job->queue, min, max, t, job->completions);
  if (n < 0) {
    ros2_engine_fail(td, -n, "ros2 getevents");
    return n;
  }
  for (int i = 0; i < n; i++) {
    struct ros2_fio_completion* c = &job->completions[i];
    struct io_u* io_u = c->tag;
    if (io_u->ddir == DDIR_WRITE) job->writes_in_flight--;
    if (c->error != 0) {
      log_err("ros2: %s\n", ros2_fio_last_error());
      io_u->error = c->error;
      io_u->resid = io_u->xfer_buflen;
    } else {
      io_u->error = 0;
      io_u->resid = io_u->xfer_buflen - c->bytes;
    }
    job->events[i] = io_u;
  }
  return n;
}

static struct io_u* ros2_engine_event(struct thread_data* td, int event) {
  struct ros2_engine_job* job = td->io_ops_data;
  return job->events[event];
}

/* fio's I/O buffers (fio calls this after init): shared segments by default, so that
 * a same-host engine fetches straight into them (docs/fio.md). */
static int ros2_engine_iomem_alloc(struct thread_data* td, size_t total) {
  struct ros2_engine_options* eo = td->eo;
  struct ros2_engine_job* job = td->io_ops_data; /* set by init, which fio runs first */
  if (job == NULL) {
    td_verror(td, EINVAL, "ros2 I/O buffers before the engine's init");
    return 1;
  }
  void* p = NULL;
  int err = ros2_fio_iomem_alloc(job->mount, total, eo->io_buffers != 0, &p);
  if (err != 0) {
    ros2_engine_fail(td, err, "ros2 I/O buffers");
    return 1;
  }
  td->orig_buffer = (char*)p;
  return 0;
}

static void ros2_engine_iomem_free(struct thread_data* td) {
  ros2_fio_iomem_free(td->orig_buffer);
  td->orig_buffer = NULL;
}

/* The symbol fio looks up in an external engine. */
struct ioengine_ops ioengine = {
    .name = "ros2",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NODISKUTIL | FIO_ASYNCIO_SETS_ISSUE_TIME,
    .init = ros2_engine_init,
    .cleanup = ros2_engine_cleanup,
    .open_file = ros2_engine_open_file,
    .close_file = ros2_engine_close_file,
    .get_file_size = ros2_engine_get_file_size,
    .unlink_file = ros2_engine_unlink_file,
    .invalidate = ros2_engine_invalidate,
    .queue = ros2_engine_queue,
    .commit = ros2_engine_commit,
    .getevents = ros2_engine_getevents,
    .event = ros2_engine_event,
    .iomem_alloc = ros2_engine_iomem_alloc,
    .iomem_free = ros2_engine_iomem_free,
    .option_struct_size = sizeof(struct ros2_engine_options),
    .options = ros2_engine_option_table,
};
